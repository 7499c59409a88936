package io.pinless.alts;

import java.security.Provider;
import java.util.Locale;

/**
 * Chooses the AES-GCM provider once per process. The setting {@code pinless.alts.crypto} (see
 * {@link io.pinless.Settings}) picks it: {@code auto} (the default: Conscrypt when it is on the
 * classpath and loads, else the JDK), {@code conscrypt} (fail if it does not load) or {@code jdk}.
 * It also loads Conscrypt's provider for the rest of pinless (the local handshaker's X25519), so
 * the process makes one.
 */
public final class CryptoProvider {
  /** The system property that chooses the provider. */
  static final String PROPERTY = "pinless.alts.crypto";

  private static final Provider PREFERRED = choose(io.pinless.Settings.altsCrypto());

  private CryptoProvider() {}

  /** The provider to use for records; null means the JDK's default. */
  static Provider preferred() {
    return PREFERRED;
  }

  /**
   * Conscrypt's provider, made once per process, or null when it is not on the classpath or does
   * not load here.
   */
  public static Provider conscryptOrNull() {
    try {
      return ConscryptHolder.PROVIDER;
    } catch (LinkageError e) {
      return null;
    }
  }

  private static Provider choose(String setting) {
    switch (setting.toLowerCase(Locale.ROOT)) {
      case "jdk":
        return null;
      case "conscrypt":
        Provider conscrypt = conscryptOrNull();
        if (conscrypt == null) {
          throw new IllegalStateException(PROPERTY + "=conscrypt but Conscrypt does not load");
        }
        return conscrypt;
      case "auto":
        return conscryptOrNull();
      default:
        throw new IllegalArgumentException(
            PROPERTY + "=" + setting + " is not one of auto, conscrypt, jdk");
    }
  }

  /** Loaded only when asked for, so a missing Conscrypt is a caught LinkageError. */
  private static final class ConscryptHolder {
    static final Provider PROVIDER =
        org.conscrypt.Conscrypt.isAvailable() ? org.conscrypt.Conscrypt.newProvider() : null;
  }
}
