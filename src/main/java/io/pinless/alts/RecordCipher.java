package io.pinless.alts;

import io.netty.util.concurrent.FastThreadLocal;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The AEAD of one ALTS record protocol: turns a record counter into the AES-GCM key and nonce for
 * that record, and seals or opens the record with them. Holds no buffer.
 *
 * <ul>
 *   <li>{@code ALTSRP_GCM_AES128}: key = the 16-byte key; nonce = counter.
 *   <li>{@code ALTSRP_GCM_AES128_REKEY}: key bytes {@code kdf[32] || mask[12]}; record key =
 *       first 16 bytes of HMAC-SHA256(kdf, counter[2..8) || 0x01), derived again only when
 *       counter bytes 2..7 change (every 2^16 records) with a {@link Mac} reused by every
 *       connection of the thread (keyed for the derivation and wiped after it, so an idle
 *       connection holds no HMAC state); nonce = counter XOR mask.
 * </ul>
 */
final class RecordCipher {
  private static final int KDF_KEY_BYTES = 32;
  private static final int NONCE_BYTES = 12;
  private static final int AES128_KEY_BYTES = 16;

  private final AesGcm aes;
  /** The rekey protocol's KDF key and nonce mask ({@code kdf || mask}); null for AES128. */
  private final byte[] rekeyMaterial;
  /** Per thread: the HMAC-SHA256 that derives record keys, keyed only while it does. */
  private static final FastThreadLocal<Mac> KDF =
      new FastThreadLocal<>() {
        @Override
        protected Mac initialValue() throws GeneralSecurityException {
          return Mac.getInstance("HmacSHA256");
        }
      };

  /** What the thread's {@link #KDF} is keyed with between derivations. */
  private static final SecretKeySpec ZERO_KDF_KEY =
      new SecretKeySpec(new byte[KDF_KEY_BYTES], "HmacSHA256");
  /** Per thread: scratch for the masked nonce ([0]) and the HMAC output ([1], wiped after use). */
  private static final FastThreadLocal<byte[][]> SCRATCH =
      new FastThreadLocal<>() {
        @Override
        protected byte[][] initialValue() {
          return new byte[][] {new byte[NONCE_BYTES], new byte[32]};
        }
      };

  /** The counter bytes 2..7 that {@link #recordKey} was derived for, big-endian (rekey only). */
  private long keyCounter;
  /** The AES key of the current record (16 bytes; rewritten in place on a key change). */
  private byte[] recordKey;
  /** True after {@link #destroy()}. */
  private boolean destroyed;

  RecordCipher(AltsRecordProtocol protocol, byte[] key, AesGcm aes) {
    if (key == null || key.length < protocol.keyLength()) {
      throw new IllegalArgumentException(
          protocol + " needs a key of at least " + protocol.keyLength() + " bytes, got "
              + (key == null ? "null" : key.length));
    }
    this.aes = aes;
    if (protocol == AltsRecordProtocol.ALTSRP_GCM_AES128) {
      if (key.length != AES128_KEY_BYTES) {
        throw new IllegalArgumentException(
            "ALTSRP_GCM_AES128 needs a 16-byte key, got " + key.length);
      }
      this.rekeyMaterial = null;
      this.recordKey = key.clone();
    } else {
      this.rekeyMaterial = Arrays.copyOf(key, KDF_KEY_BYTES + NONCE_BYTES);
      this.recordKey = new byte[AES128_KEY_BYTES];
      deriveKey(new byte[NONCE_BYTES]);
    }
  }

  /**
   * Encrypts {@code plaintexts[0..count)} as the record numbered {@code counter} into {@code
   * out}: ciphertext then tag.
   */
  void seal(byte[] counter, ByteBuffer[] plaintexts, int count, ByteBuffer out)
      throws GeneralSecurityException {
    aes.seal(prepare(counter), nonceFor(counter), plaintexts, count, out);
  }

  /**
   * Encrypts {@code plaintext}'s remaining bytes as the record numbered {@code counter} into
   * {@code out}: ciphertext then tag.
   */
  void seal(byte[] counter, ByteBuffer plaintext, ByteBuffer out)
      throws GeneralSecurityException {
    aes.seal(prepare(counter), nonceFor(counter), plaintext, out);
  }

  /** Whether a plaintext of several pieces should be gathered into one buffer before sealing. */
  boolean sealsWholeBuffersOnly() {
    return aes.sealsWholeBuffersOnly();
  }

  /**
   * Decrypts the record numbered {@code counter} from {@code ciphertextAndTag} into {@code out}.
   *
   * @throws javax.crypto.AEADBadTagException if the tag does not verify
   */
  void open(byte[] counter, ByteBuffer ciphertextAndTag, ByteBuffer out)
      throws GeneralSecurityException {
    aes.open(prepare(counter), nonceFor(counter), ciphertextAndTag, out);
  }

  /**
   * One-shot seal ({@code Cipher.ENCRYPT_MODE}) or open of {@code input} as the record numbered
   * {@code counter}, with additional authenticated data (records use none; vectors do).
   */
  byte[] crypt(int mode, byte[] counter, byte[] aad, byte[] input)
      throws GeneralSecurityException {
    return aes.crypt(mode, prepare(counter), nonceFor(counter), aad, input);
  }

  /** The name of the AES-GCM provider in use. */
  String providerName() {
    return aes.providerName();
  }

  /** Wipes the key material this object holds; every later use fails. */
  void destroy() {
    destroyed = true;
    if (rekeyMaterial != null) {
      Arrays.fill(rekeyMaterial, (byte) 0);
    }
    // This thread's scratch may hold this connection's last masked nonce.
    Arrays.fill(SCRATCH.get()[0], (byte) 0);
    Arrays.fill(recordKey, (byte) 0);
    // The thread's cipher may still hold this connection's last record key.
    aes.forget();
  }

  private byte[] prepare(byte[] counter) {
    if (destroyed) {
      throw new IllegalStateException("record cipher was destroyed");
    }
    if (rekeyMaterial != null && !sameKeyCounter(counter)) {
      deriveKey(counter);
    }
    return recordKey;
  }

  private byte[] nonceFor(byte[] counter) {
    if (rekeyMaterial == null) {
      return counter;
    }
    byte[] nonce = SCRATCH.get()[0];
    for (int i = 0; i < NONCE_BYTES; i++) {
      nonce[i] = (byte) (counter[i] ^ rekeyMaterial[KDF_KEY_BYTES + i]);
    }
    return nonce;
  }

  private boolean sameKeyCounter(byte[] counter) {
    return keyCounterOf(counter) == keyCounter;
  }

  /** Counter bytes 2..7, the part that selects the record key, as a number. */
  private static long keyCounterOf(byte[] counter) {
    long value = 0;
    for (int i = 2; i < 8; i++) {
      value = (value << 8) | (counter[i] & 0xff);
    }
    return value;
  }

  private void deriveKey(byte[] counter) {
    keyCounter = keyCounterOf(counter);
    byte[] macOut = SCRATCH.get()[1];
    Mac kdf = KDF.get();
    try {
      kdf.init(new SecretKeySpec(rekeyMaterial, 0, KDF_KEY_BYTES, "HmacSHA256"));
      kdf.update(counter, 2, 6);
      kdf.update((byte) 0x01);
      kdf.doFinal(macOut, 0);
      // Leave no key of this connection in the thread's HMAC.
      kdf.init(ZERO_KDF_KEY);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 refused a 32-byte key or its output buffer", e);
    }
    System.arraycopy(macOut, 0, recordKey, 0, AES128_KEY_BYTES);
    Arrays.fill(macOut, (byte) 0);
  }
}
