/**
 * The ALTS handshake: the handshaker service protocol and a local handshaker service for machines
 * off Google Cloud.
 */
package io.pinless.alts.handshake;
