package io.pinless.alts.handshake;

import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.PublicKey;
import java.security.interfaces.XECPublicKey;
import java.security.spec.NamedParameterSpec;
import java.security.spec.XECPublicKeySpec;
import java.util.Arrays;
import javax.crypto.KeyAgreement;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The local handshaker's key agreement, all from the JDK (17+): an ephemeral X25519 key pair per
 * handshake; the shared secret of the two ends' keys; and HKDF-SHA256 (RFC 5869) of that secret,
 * salted with the SHA-256 of both ends' hello messages, so both ends derive the same record key
 * only from the same exchange.
 */
final class LocalKeyAgreement {
  /** X25519 public keys are 32 bytes. */
  static final int PUBLIC_KEY_BYTES = 32;
  /** Key data for ALTSRP_GCM_AES128_REKEY: a 32-byte KDF key and a 12-byte nonce mask. */
  static final int KEY_DATA_BYTES = 44;
  private static final byte[] INFO = "pinless local ALTS handshake v1".getBytes(
      java.nio.charset.StandardCharsets.US_ASCII);

  private final KeyPair keyPair;

  /** A fresh ephemeral key pair. */
  LocalKeyAgreement() throws GeneralSecurityException {
    keyPair = KeyPairGenerator.getInstance("X25519").generateKeyPair();
  }

  /** This end's public key, RFC 7748 encoding (the u-coordinate, 32 bytes little endian). */
  byte[] publicKey() {
    byte[] bigEndian = ((XECPublicKey) keyPair.getPublic()).getU().toByteArray();
    byte[] out = new byte[PUBLIC_KEY_BYTES];
    // toByteArray is big endian, may carry a leading zero and may be shorter than 32 bytes.
    for (int i = 0; i < PUBLIC_KEY_BYTES && i < bigEndian.length; i++) {
      out[i] = bigEndian[bigEndian.length - 1 - i];
    }
    return out;
  }

  /**
   * The record key data for this handshake.
   *
   * @param peerPublicKey the peer's 32-byte public key
   * @param clientHello the client's hello, as sent
   * @param serverHello the server's hello, as sent
   * @throws GeneralSecurityException if the peer's key is malformed or degenerate
   */
  byte[] keyData(byte[] peerPublicKey, byte[] clientHello, byte[] serverHello)
      throws GeneralSecurityException {
    if (peerPublicKey.length != PUBLIC_KEY_BYTES) {
      throw new GeneralSecurityException(
          "peer public key is " + peerPublicKey.length + " bytes, not " + PUBLIC_KEY_BYTES);
    }
    KeyAgreement agreement = KeyAgreement.getInstance("X25519");
    agreement.init(keyPair.getPrivate());
    agreement.doPhase(decode(peerPublicKey), true);
    byte[] secret = agreement.generateSecret();
    try {
      MessageDigest transcript = MessageDigest.getInstance("SHA-256");
      transcript.update(clientHello);
      transcript.update(serverHello);
      return hkdf(transcript.digest(), secret, INFO, KEY_DATA_BYTES);
    } finally {
      Arrays.fill(secret, (byte) 0);
    }
  }

  private static PublicKey decode(byte[] littleEndian) throws GeneralSecurityException {
    byte[] bigEndian = new byte[PUBLIC_KEY_BYTES + 1]; // a leading zero keeps it positive
    for (int i = 0; i < PUBLIC_KEY_BYTES; i++) {
      bigEndian[PUBLIC_KEY_BYTES - i] = littleEndian[i];
    }
    // RFC 7748: the top bit of the last byte is ignored on decoding.
    bigEndian[1] &= 0x7f;
    return KeyFactory.getInstance("X25519")
        .generatePublic(new XECPublicKeySpec(NamedParameterSpec.X25519, new BigInteger(bigEndian)));
  }

  /** HKDF-SHA256: extract with {@code salt}, expand with {@code info} to {@code length} bytes. */
  static byte[] hkdf(byte[] salt, byte[] inputKey, byte[] info, int length)
      throws GeneralSecurityException {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(salt, "HmacSHA256"));
    byte[] prk = mac.doFinal(inputKey);
    mac.init(new SecretKeySpec(prk, "HmacSHA256"));
    byte[] out = new byte[length];
    byte[] block = new byte[0];
    for (int done = 0, counter = 1; done < length; counter++) {
      mac.update(block);
      mac.update(info);
      mac.update((byte) counter);
      block = mac.doFinal();
      int n = Math.min(block.length, length - done);
      System.arraycopy(block, 0, out, done, n);
      done += n;
    }
    Arrays.fill(prk, (byte) 0);
    return out;
  }
}
