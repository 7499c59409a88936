package io.pinless.alts;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.security.Provider;
import java.util.stream.Stream;

/** The AES-GCM providers every crypto test runs against. */
final class Providers {
  private Providers() {}

  /**
   * The JDK's provider, Conscrypt's through its {@code Cipher}, and Conscrypt's native calls;
   * Conscrypt and its native calls must load on this machine (they are the fast path).
   */
  static Stream<AesGcm> all() {
    Provider conscrypt = CryptoProvider.conscryptOrNull();
    assertNotNull(conscrypt, "Conscrypt must load here: it is the fast path");
    ConscryptAead calls = ConscryptAead.loadOrNull();
    assertNotNull(calls, "Conscrypt's native AEAD calls must load here");
    return Stream.of(new AesGcm(null), new AesGcm(conscrypt, null), new AesGcm(conscrypt, calls));
  }
}
