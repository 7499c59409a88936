/** The read side of a connection: when the socket is read, and how much inbound memory it may pin. */
package io.pinless.read;
