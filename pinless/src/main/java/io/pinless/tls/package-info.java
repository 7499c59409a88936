/**
 * TLS on the lean read path: a handshake handler that hands an {@code SSLEngine} whole records
 * only, and the record stage that carries the connection after it over the same engine.
 */
package io.pinless.tls;
