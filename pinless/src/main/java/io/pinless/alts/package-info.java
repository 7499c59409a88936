/**
 * The ALTS record protocol: frames, counters, record ciphers, the record stage a connection runs,
 * and its two halves as Netty handlers.
 */
package io.pinless.alts;
