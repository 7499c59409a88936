package io.pinless.alts.handshake;

import io.pinless.alts.CryptoProvider;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.PublicKey;
import java.security.spec.X509EncodedKeySpec;
import java.util.Arrays;
import javax.crypto.KeyAgreement;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The local handshaker's key agreement: an ephemeral X25519 key pair per handshake, the shared
 * secret of the two ends' keys, and the secrets HKDF-SHA256 (RFC 5869) derives from it.
 *
 * <pre>
 *   transcript = SHA-256(len(client hello) u32 BE | client hello | server hello)
 *   prk        = HKDF-Extract(salt = deployment key (none: empty), X25519 secret)
 *   mode       = "keyed " or "unkeyed "
 *   key data   = HKDF-Expand(prk, LABEL | mode | "key data"        | transcript, 44)
 *   server key = HKDF-Expand(prk, LABEL | mode | "server finished" | transcript, 32)
 *   client key = HKDF-Expand(prk, LABEL | mode | "client finished" | transcript, 32)
 *   each end's finished MAC = HMAC-SHA256(its key, transcript)
 * </pre>
 *
 * <p>Both ends derive the same secrets only from the same exchange and the same deployment key.
 * Someone in between who runs an exchange with each end knows both X25519 secrets, but without
 * the key cannot make either end's MAC, so each end checks the other's before it uses the record
 * key. Without a deployment key the MACs only confirm the exchange: nothing is authenticated.
 *
 * <p>X25519 comes from Conscrypt (BoringSSL) when it loads, else from the JDK (17+), whose
 * X25519 is written in Java and about seven times slower here (about 0.45 ms against 0.06 ms per
 * key generation or agreement): in a storm of handshakes it is most of the handshaker's CPU. Keys
 * travel in RFC 7748's encoding (the u-coordinate, 32 bytes little-endian), which both providers
 * read and write through their X.509 form, so two handshakers with different providers agree.
 */
final class LocalKeyAgreement {
  /** X25519 public keys are 32 bytes. */
  static final int PUBLIC_KEY_BYTES = 32;
  /** Key data for ALTSRP_GCM_AES128_REKEY: a 32-byte KDF key and a 12-byte nonce mask. */
  static final int KEY_DATA_BYTES = 44;
  /** The length of each finished key and MAC: SHA-256's. */
  static final int MAC_BYTES = 32;
  /** What every expansion's info starts with: the protocol and its version. */
  private static final String LABEL = "pinless local ALTS handshake v2 ";
  /**
   * The X.509 SubjectPublicKeyInfo of an X25519 key up to its 32 key bytes (RFC 8410): SEQUENCE,
   * the algorithm 1.3.101.110, and a BIT STRING of 33 bytes (no unused bits).
   */
  private static final byte[] X509_PREFIX = {
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00
  };

  /** Where X25519 comes from, chosen once. */
  enum Source {
    /** Conscrypt's XDH. */
    CONSCRYPT("XDH"),
    /** The JDK's X25519. */
    JDK("X25519");

    /** Conscrypt when it is on the class path and loads, else the JDK. */
    static final Source PREFERRED = CryptoProvider.conscryptOrNull() != null ? CONSCRYPT : JDK;

    /** The source's name for X25519. */
    private final String algorithm;

    Source(String algorithm) {
      this.algorithm = algorithm;
    }

    KeyPairGenerator keyPairGenerator() throws GeneralSecurityException {
      return this == CONSCRYPT
          ? KeyPairGenerator.getInstance(algorithm, CryptoProvider.conscryptOrNull())
          : KeyPairGenerator.getInstance(algorithm);
    }

    KeyFactory keyFactory() throws GeneralSecurityException {
      return this == CONSCRYPT
          ? KeyFactory.getInstance(algorithm, CryptoProvider.conscryptOrNull())
          : KeyFactory.getInstance(algorithm);
    }

    KeyAgreement keyAgreement() throws GeneralSecurityException {
      return this == CONSCRYPT
          ? KeyAgreement.getInstance(algorithm, CryptoProvider.conscryptOrNull())
          : KeyAgreement.getInstance(algorithm);
    }
  }

  private final Source source;
  private final KeyPair keyPair;

  /** A fresh ephemeral key pair from the preferred source. */
  LocalKeyAgreement() throws GeneralSecurityException {
    this(Source.PREFERRED);
  }

  /** A fresh ephemeral key pair from {@code source}. */
  LocalKeyAgreement(Source source) throws GeneralSecurityException {
    this.source = source;
    keyPair = source.keyPairGenerator().generateKeyPair();
  }

  /** This end's public key, RFC 7748 encoding (the u-coordinate, 32 bytes little endian). */
  byte[] publicKey() {
    byte[] x509 = keyPair.getPublic().getEncoded();
    if (x509.length != X509_PREFIX.length + PUBLIC_KEY_BYTES
        || !Arrays.equals(x509, 0, X509_PREFIX.length, X509_PREFIX, 0, X509_PREFIX.length)) {
      throw new IllegalStateException("unexpected X25519 public key encoding from " + source);
    }
    return Arrays.copyOfRange(x509, X509_PREFIX.length, x509.length);
  }

  /** What one handshake derives; {@link #wipe()} when done. */
  static final class Secrets {
    /** The record key data: a 32-byte KDF key and a 12-byte nonce mask. */
    final byte[] keyData;
    /** SHA-256 of the transcript. */
    private final byte[] transcript;
    private final byte[] clientKey;
    private final byte[] serverKey;

    private Secrets(byte[] keyData, byte[] transcript, byte[] clientKey, byte[] serverKey) {
      this.keyData = keyData;
      this.transcript = transcript;
      this.clientKey = clientKey;
      this.serverKey = serverKey;
    }

    /** The MAC the client ({@code true}) or the server sends. */
    byte[] mac(boolean client) throws GeneralSecurityException {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(client ? clientKey : serverKey, "HmacSHA256"));
      return mac.doFinal(transcript);
    }

    /** Whether {@code peerMac} is the MAC the client ({@code true}) or server must have sent. */
    boolean verify(boolean client, byte[] peerMac) throws GeneralSecurityException {
      return MessageDigest.isEqual(mac(client), peerMac);
    }

    /** Overwrites every secret. */
    void wipe() {
      Arrays.fill(keyData, (byte) 0);
      Arrays.fill(clientKey, (byte) 0);
      Arrays.fill(serverKey, (byte) 0);
    }
  }

  /**
   * The secrets of this handshake.
   *
   * @param peerPublicKey the peer's 32-byte public key
   * @param clientHello the client's hello, as sent
   * @param serverHello the server's hello, as sent
   * @param deploymentKey the key both ends hold, or null for none
   * @throws GeneralSecurityException if the peer's key is malformed or degenerate
   */
  Secrets secrets(byte[] peerPublicKey, byte[] clientHello, byte[] serverHello,
      byte[] deploymentKey) throws GeneralSecurityException {
    if (peerPublicKey.length != PUBLIC_KEY_BYTES) {
      throw new GeneralSecurityException(
          "peer public key is " + peerPublicKey.length + " bytes, not " + PUBLIC_KEY_BYTES);
    }
    byte[] secret = sharedSecret(peerPublicKey);
    byte[] prk = null;
    try {
      if (allZero(secret)) {
        // RFC 7748 section 6.1: a low-order peer key gives the all-zero secret
        throw new GeneralSecurityException("peer public key is degenerate (a low-order point)");
      }
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      digest.update(ByteBuffer.allocate(4).putInt(clientHello.length).array());
      digest.update(clientHello);
      digest.update(serverHello);
      byte[] transcript = digest.digest();
      prk = extract(deploymentKey == null ? new byte[0] : deploymentKey, secret);
      // The mode is in every label, so no key differs from a key of 32 zero bytes.
      String mode = deploymentKey == null ? "unkeyed " : "keyed ";
      return new Secrets(
          expand(prk, info(mode + "key data", transcript), KEY_DATA_BYTES),
          transcript,
          expand(prk, info(mode + "client finished", transcript), MAC_BYTES),
          expand(prk, info(mode + "server finished", transcript), MAC_BYTES));
    } finally {
      Arrays.fill(secret, (byte) 0);
      if (prk != null) {
        Arrays.fill(prk, (byte) 0);
      }
    }
  }

  private static byte[] info(String purpose, byte[] transcript) {
    byte[] label = (LABEL + purpose).getBytes(StandardCharsets.US_ASCII);
    byte[] info = Arrays.copyOf(label, label.length + transcript.length);
    System.arraycopy(transcript, 0, info, label.length, transcript.length);
    return info;
  }

  private byte[] sharedSecret(byte[] peerPublicKey) throws GeneralSecurityException {
    byte[] x509 = Arrays.copyOf(X509_PREFIX, X509_PREFIX.length + PUBLIC_KEY_BYTES);
    System.arraycopy(peerPublicKey, 0, x509, X509_PREFIX.length, PUBLIC_KEY_BYTES);
    // RFC 7748: the top bit of the last byte is ignored on decoding.
    x509[x509.length - 1] &= 0x7f;
    PublicKey peer = source.keyFactory().generatePublic(new X509EncodedKeySpec(x509));
    KeyAgreement agreement = source.keyAgreement();
    agreement.init(keyPair.getPrivate());
    agreement.doPhase(peer, true);
    return agreement.generateSecret();
  }

  private static boolean allZero(byte[] bytes) {
    int or = 0;
    for (byte b : bytes) {
      or |= b;
    }
    return or == 0;
  }

  /** HKDF-SHA256: extract with {@code salt}, expand with {@code info} to {@code length} bytes. */
  static byte[] hkdf(byte[] salt, byte[] inputKey, byte[] info, int length)
      throws GeneralSecurityException {
    byte[] prk = extract(salt, inputKey);
    try {
      return expand(prk, info, length);
    } finally {
      Arrays.fill(prk, (byte) 0);
    }
  }

  /** HKDF-Extract with SHA-256; an empty salt stands for 32 zero bytes (RFC 5869). */
  private static byte[] extract(byte[] salt, byte[] inputKey) throws GeneralSecurityException {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(salt.length == 0 ? new byte[MAC_BYTES] : salt, "HmacSHA256"));
    return mac.doFinal(inputKey);
  }

  /** HKDF-Expand with SHA-256 to {@code length} bytes. */
  private static byte[] expand(byte[] prk, byte[] info, int length)
      throws GeneralSecurityException {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(prk, "HmacSHA256"));
    byte[] out = new byte[length];
    byte[] block = new byte[0];
    for (int done = 0, counter = 1; done < length; counter++) {
      mac.update(block);
      mac.update(info);
      mac.update((byte) counter);
      Arrays.fill(block, (byte) 0);
      block = mac.doFinal();
      int n = Math.min(block.length, length - done);
      System.arraycopy(block, 0, out, done, n);
      done += n;
    }
    // Each block is a copy of key bytes.
    Arrays.fill(block, (byte) 0);
    return out;
  }
}
