package io.pinless.alts;

import io.pinless.PinlessMetrics;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Reports that ALTS crypto fell back to a slower provider: each time in {@link
 * PinlessMetrics.Metric#ALTS_CRYPTO_FALLBACKS}, and the first time as a WARNING naming the cause.
 * The records stay correct either way; only speed is lost, so it is said once and not thrown.
 */
final class CryptoFallback {
  private static final Logger LOG = Logger.getLogger(CryptoFallback.class.getName());

  /** Conscrypt does not load: records and X25519 use the JDK's providers. */
  static final CryptoFallback CONSCRYPT = new CryptoFallback(
      "Conscrypt does not load; ALTS records and the local handshaker's X25519 use the JDK's"
          + " providers, several times slower");
  /** Conscrypt's native AES-GCM calls are not usable: records go through its {@code Cipher}. */
  static final CryptoFallback NATIVE_AEAD = new CryptoFallback(
      "Conscrypt's native AES-GCM calls are not usable; ALTS records go through its Cipher,"
          + " which allocates per record");

  /** What fell back and what it costs. */
  private final String what;
  private final AtomicBoolean logged = new AtomicBoolean();

  CryptoFallback(String what) {
    this.what = what;
  }

  /** Counts a fallback because of {@code cause}; logs it if it is the first. */
  void report(Throwable cause) {
    PinlessMetrics.Metric.ALTS_CRYPTO_FALLBACKS.add(1);
    if (logged.compareAndSet(false, true)) {
      LOG.log(Level.WARNING, what + ": " + cause, cause);
    }
  }
}
