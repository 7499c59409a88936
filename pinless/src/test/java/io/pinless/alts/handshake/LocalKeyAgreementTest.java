package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
        byte[] clientKey = keyData(client, server.publicKey(), CLIENT_HELLO, SERVER_HELLO, null);
        byte[] serverKey = keyData(server, client.publicKey(), CLIENT_HELLO, SERVER_HELLO, null);
        assertEquals(LocalKeyAgreement.KEY_DATA_BYTES, clientKey.length);
        assertArrayEquals(clientKey, serverKey, a + " with " + b);
        assertFalse(Arrays.equals(clientKey, new byte[clientKey.length]));
        // Another transcript, another key.
        byte[] swapped = keyData(client, server.publicKey(), SERVER_HELLO, CLIENT_HELLO, null);
        assertFalse(Arrays.equals(clientKey, swapped), a + " with " + b);
      }
    }
  }

  private static byte[] keyData(LocalKeyAgreement keys, byte[] peer, byte[] clientHello,
      byte[] serverHello, byte[] deploymentKey) throws GeneralSecurityException {
    return keys.secrets(peer, clientHello, serverHello, deploymentKey).keyData;
  }

  @Test
  void theSameDeploymentKeyAgreesAndADifferentOneFailsBothMacs() throws GeneralSecurityException {
    byte[] k1 = new byte[32];
    byte[] k2 = new byte[32];
    k2[31] = 1;
    LocalKeyAgreement client = new LocalKeyAgreement();
    LocalKeyAgreement server = new LocalKeyAgreement();
    LocalKeyAgreement.Secrets c =
        client.secrets(server.publicKey(), CLIENT_HELLO, SERVER_HELLO, k1);
    LocalKeyAgreement.Secrets same =
        server.secrets(client.publicKey(), CLIENT_HELLO, SERVER_HELLO, k1);
    assertArrayEquals(c.keyData, same.keyData);
    assertTrue(c.verify(false, same.mac(false)), "the server's MAC");
    assertTrue(same.verify(true, c.mac(true)), "the client's MAC");
    assertFalse(c.verify(true, same.mac(false)), "a MAC reflected back is refused");

    for (byte[] other : new byte[][] {k2, null}) {
      LocalKeyAgreement.Secrets s =
          server.secrets(client.publicKey(), CLIENT_HELLO, SERVER_HELLO, other);
      assertFalse(Arrays.equals(c.keyData, s.keyData));
      assertFalse(c.verify(false, s.mac(false)), "the server's MAC under another key");
      assertFalse(s.verify(true, c.mac(true)), "the client's MAC under another key");
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
          () -> keys.secrets(bad, CLIENT_HELLO, SERVER_HELLO, null), source + " " + bad[0]);
    }
    assertThrows(GeneralSecurityException.class,
        () -> keys.secrets(new byte[31], CLIENT_HELLO, SERVER_HELLO, null));
  }
}
