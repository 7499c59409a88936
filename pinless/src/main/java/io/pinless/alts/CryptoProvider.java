package io.pinless.alts;

import io.pinless.Settings;
import java.security.Provider;

/**
 * Chooses the AES-GCM provider once per process. The setting {@code pinless.alts.crypto} (see
 * {@link io.pinless.Settings}) picks it: {@code auto} (the default: Conscrypt when it is on the
 * classpath and loads, else the JDK), {@code conscrypt} (refused if it does not load) or {@code
 * jdk}. It also loads Conscrypt's provider for the rest of pinless (the local handshaker's
 * X25519), so the process makes one. A Conscrypt that does not load is reported once ({@link
 * CryptoFallback#CONSCRYPT}).
 */
public final class CryptoProvider {
  /** The choice, or why there is none. */
  private static final Choice CHOICE = choose();

  private CryptoProvider() {}

  /** A provider (null: the JDK's default), or the setting's problem. */
  private record Choice(Provider provider, IllegalArgumentException problem) {}

  /**
   * The provider to use for records; null means the JDK's default.
   *
   * @throws IllegalStateException if the setting names no provider that loads
   */
  static Provider preferred() {
    if (CHOICE.problem() != null) {
      throw new IllegalStateException(CHOICE.problem().getMessage(), CHOICE.problem());
    }
    return CHOICE.provider();
  }

  /**
   * Refuses a {@code pinless.alts.crypto} setting that names no provider, or names Conscrypt
   * when it does not load; ALTS credentials call it when they are built.
   *
   * @throws IllegalArgumentException naming the setting and its value
   */
  public static void checkSetting() {
    if (CHOICE.problem() != null) {
      throw new IllegalArgumentException(CHOICE.problem().getMessage(), CHOICE.problem());
    }
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

  private static Choice choose() {
    String setting;
    try {
      setting = Settings.altsCrypto();
    } catch (IllegalArgumentException e) {
      return new Choice(null, e);
    }
    switch (setting) {
      case "jdk":
        return new Choice(null, null);
      case "conscrypt":
        Provider conscrypt = conscryptOrNull();
        if (conscrypt == null) {
          return new Choice(null, new IllegalArgumentException(
              "pinless.alts.crypto=conscrypt but Conscrypt does not load: " + conscryptProblem()));
        }
        return new Choice(conscrypt, null);
      default:
        return new Choice(conscryptOrNull(), null);
    }
  }

  /** Why Conscrypt did not load, as far as is known. */
  private static String conscryptProblem() {
    try {
      return String.valueOf(ConscryptHolder.cause);
    } catch (LinkageError e) {
      return e.toString();
    }
  }

  /** Loaded only when asked for, so a missing Conscrypt is a caught error. */
  private static final class ConscryptHolder {
    /** Why Conscrypt did not load; null when it did. */
    static Throwable cause;
    static final Provider PROVIDER = load();

    private static Provider load() {
      try {
        org.conscrypt.Conscrypt.checkAvailability();
        return org.conscrypt.Conscrypt.newProvider();
      } catch (LinkageError | RuntimeException e) {
        cause = e;
        CryptoFallback.CONSCRYPT.report(e);
        return null;
      }
    }
  }
}
