package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** X25519 from either source: each agrees with itself and with the other. */
class LocalKeyAgreementTest {
  private static final byte[] CLIENT_HELLO = "client hello".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] SERVER_HELLO = "server hello".getBytes(StandardCharsets.US_ASCII);

  @Test
  void conscryptIsPreferredWhenItLoads() {
    assertEquals(LocalKeyAgreement.Source.CONSCRYPT, LocalKeyAgreement.Source.PREFERRED);
  }

  @Test
  void everyPairingOfSourcesAgreesOnTheKeyData() throws GeneralSecurityException {
    for (LocalKeyAgreement.Source a : LocalKeyAgreement.Source.values()) {
      for (LocalKeyAgreement.Source b : LocalKeyAgreement.Source.values()) {
        LocalKeyAgreement client = new LocalKeyAgreement(a);
        LocalKeyAgreement server = new LocalKeyAgreement(b);
        byte[] clientKey = client.keyData(server.publicKey(), CLIENT_HELLO, SERVER_HELLO);
        byte[] serverKey = server.keyData(client.publicKey(), CLIENT_HELLO, SERVER_HELLO);
        assertEquals(LocalKeyAgreement.KEY_DATA_BYTES, clientKey.length);
        assertArrayEquals(clientKey, serverKey, a + " with " + b);
        assertFalse(Arrays.equals(clientKey, new byte[clientKey.length]));
        // Another transcript, another key.
        assertFalse(Arrays.equals(clientKey,
            client.keyData(server.publicKey(), SERVER_HELLO, CLIENT_HELLO)), a + " with " + b);
      }
    }
  }

  @ParameterizedTest
  @EnumSource(LocalKeyAgreement.Source.class)
  void aLowOrderOrShortPeerKeyIsRefused(LocalKeyAgreement.Source source)
      throws GeneralSecurityException {
    LocalKeyAgreement keys = new LocalKeyAgreement(source);
    assertEquals(LocalKeyAgreement.PUBLIC_KEY_BYTES, keys.publicKey().length);
    // u = 0 and u = 1 are points of small order: every private key gives the all-zero secret.
    byte[] one = new byte[32];
    one[0] = 1;
    for (byte[] bad : new byte[][] {new byte[32], one}) {
      assertThrows(GeneralSecurityException.class,
          () -> keys.keyData(bad, CLIENT_HELLO, SERVER_HELLO), source + " " + bad[0]);
    }
    assertThrows(GeneralSecurityException.class,
        () -> keys.keyData(new byte[31], CLIENT_HELLO, SERVER_HELLO));
  }
}
