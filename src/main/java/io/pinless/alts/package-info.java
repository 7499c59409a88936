/** The ALTS record protocol: frames, counters, record ciphers and the two Netty handlers. */
package io.pinless.alts;
