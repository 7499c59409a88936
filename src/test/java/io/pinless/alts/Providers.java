package io.pinless.alts;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.security.Provider;
import java.util.stream.Stream;

/** The AES-GCM providers every crypto test runs against. */
final class Providers {
  private Providers() {}

  /** The JDK's provider and Conscrypt's, which must load on this machine. */
  static Stream<AesGcm> both() {
    Provider conscrypt = CryptoProvider.conscryptOrNull();
    assertNotNull(conscrypt, "Conscrypt must load here: it is the fast path");
    return Stream.of(new AesGcm(null), new AesGcm(conscrypt));
  }
}
