package io.pinless.alts;

import io.netty.util.concurrent.FastThreadLocal;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.GeneralSecurityException;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The AEAD of one direction of one ALTS record protocol, with that direction's record counter:
 * turns a record counter into the AES-GCM key and nonce for that record, and seals or opens the
 * record with them. Holds no buffer.
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
final class RecordCipher extends AltsCounter {
  private static final int KDF_KEY_BYTES = 32;
  private static final int NONCE_BYTES = 12;
  private static final int AES128_KEY_BYTES = 16;

  /** The record key and the rekey material as big-endian longs and ints in byte arrays. */
  private static final VarHandle LONG_BE =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle INT_BE =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);

  private final AesGcm aes;
  /** Whether this is the rekey protocol (else the key is fixed and the nonce is the counter). */
  private final boolean rekey;
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
  /**
   * Per thread: scratch for the masked nonce ({@link #NONCE}), the HMAC output ({@link #MAC_OUT},
   * wiped after use), the record key handed to the cipher ({@link #KEY}) and the KDF key handed to
   * the HMAC ({@link #KDF_KEY}, wiped after use).
   */
  private static final FastThreadLocal<byte[][]> SCRATCH =
      new FastThreadLocal<>() {
        @Override
        protected byte[][] initialValue() {
          return new byte[][] {
            new byte[NONCE_BYTES], new byte[32], new byte[AES128_KEY_BYTES], new byte[KDF_KEY_BYTES]
          };
        }
      };

  private static final int NONCE = 0;
  private static final int MAC_OUT = 1;
  private static final int KEY = 2;
  private static final int KDF_KEY = 3;

  /*
   * The key bytes live in fields, not arrays: an idle connection has four record ciphers (two
   * directions at each end), and two arrays each (the rekey material, the record key) cost 96 bytes
   * where these fields make the object 48 bytes larger. They are copied into this thread's scratch
   * for each call.
   */
  /** The counter bytes 2..7 that the record key was derived for, big-endian (rekey only). */
  private long keyCounter;
  /** The AES key of the current record, bytes 0..7 and 8..15. */
  private long key0;
  private long key1;
  /** The rekey protocol's KDF key, bytes 0..7, 8..15, 16..23 and 24..31. */
  private long kdf0;
  private long kdf1;
  private long kdf2;
  private long kdf3;
  /** The rekey protocol's nonce mask, bytes 0..7 and 8..11. */
  private long mask0;
  private int mask1;
  /** True after {@link #destroy()}. */
  private boolean destroyed;

  /** A cipher whose counter numbers client-to-server records. */
  RecordCipher(AltsRecordProtocol protocol, byte[] key, AesGcm aes) {
    this(protocol, key, aes, false);
  }

  /**
   * A cipher whose counter numbers the records of one direction: server-to-client ones carry 0x80
   * in byte 11.
   */
  RecordCipher(AltsRecordProtocol protocol, byte[] key, AesGcm aes, boolean serverToClient) {
    super(protocol.counterBytes(), serverToClient);
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
      this.rekey = false;
      key0 = longAt(key, 0);
      key1 = longAt(key, 8);
    } else {
      this.rekey = true;
      kdf0 = longAt(key, 0);
      kdf1 = longAt(key, 8);
      kdf2 = longAt(key, 16);
      kdf3 = longAt(key, 24);
      mask0 = longAt(key, KDF_KEY_BYTES);
      mask1 = (int) INT_BE.get(key, KDF_KEY_BYTES + 8);
      deriveKey(new byte[NONCE_BYTES]);
    }
  }

  private static long longAt(byte[] bytes, int offset) {
    return (long) LONG_BE.get(bytes, offset);
  }

  /**
   * Encrypts {@code plaintexts[0..count)} as the record numbered {@code counter} into {@code
   * out}: ciphertext then tag.
   */
  void seal(byte[] counter, ByteBuffer[] plaintexts, int count, ByteBuffer out)
      throws GeneralSecurityException {
    byte[][] scratch = SCRATCH.get();
    aes.seal(keyFor(counter, scratch), nonceFor(counter, scratch), plaintexts, count, out);
  }

  /**
   * Encrypts {@code plaintext}'s remaining bytes as the record numbered {@code counter} into
   * {@code out}: ciphertext then tag.
   */
  void seal(byte[] counter, ByteBuffer plaintext, ByteBuffer out)
      throws GeneralSecurityException {
    byte[][] scratch = SCRATCH.get();
    aes.seal(keyFor(counter, scratch), nonceFor(counter, scratch), plaintext, out);
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
    byte[][] scratch = SCRATCH.get();
    aes.open(keyFor(counter, scratch), nonceFor(counter, scratch), ciphertextAndTag, out);
  }

  /**
   * One-shot seal ({@code Cipher.ENCRYPT_MODE}) or open of {@code input} as the record numbered
   * {@code counter}, with additional authenticated data (records use none; vectors do).
   */
  byte[] crypt(int mode, byte[] counter, byte[] aad, byte[] input)
      throws GeneralSecurityException {
    byte[][] scratch = SCRATCH.get();
    return aes.crypt(mode, keyFor(counter, scratch), nonceFor(counter, scratch), aad, input);
  }

  /** The name of the AES-GCM provider in use. */
  String providerName() {
    return aes.providerName();
  }

  /** Wipes the key material this object holds; every later use fails. */
  void destroy() {
    destroyed = true;
    key0 = key1 = kdf0 = kdf1 = kdf2 = kdf3 = mask0 = 0;
    mask1 = 0;
    // This thread's scratch may hold this connection's last masked nonce and record key.
    byte[][] scratch = SCRATCH.get();
    Arrays.fill(scratch[NONCE], (byte) 0);
    Arrays.fill(scratch[KEY], (byte) 0);
    // The thread's cipher may still hold this connection's last record key.
    aes.forget();
  }

  /** The record key for {@code counter}, in this thread's {@code scratch} (one lookup a record). */
  private byte[] keyFor(byte[] counter, byte[][] scratch) {
    if (destroyed) {
      throw new IllegalStateException("record cipher was destroyed");
    }
    if (rekey && keyCounterOf(counter) != keyCounter) {
      deriveKey(counter);
    }
    byte[] key = scratch[KEY];
    LONG_BE.set(key, 0, key0);
    LONG_BE.set(key, 8, key1);
    return key;
  }

  private byte[] nonceFor(byte[] counter, byte[][] scratch) {
    if (!rekey) {
      return counter;
    }
    byte[] nonce = scratch[NONCE];
    LONG_BE.set(nonce, 0, longAt(counter, 0) ^ mask0);
    INT_BE.set(nonce, 8, (int) INT_BE.get(counter, 8) ^ mask1);
    return nonce;
  }

  /** Counter bytes 2..7, the part that selects the record key, as a number. */
  private static long keyCounterOf(byte[] counter) {
    return longAt(counter, 0) & 0xffff_ffff_ffffL;
  }

  private void deriveKey(byte[] counter) {
    keyCounter = keyCounterOf(counter);
    byte[][] scratch = SCRATCH.get();
    byte[] macOut = scratch[MAC_OUT];
    byte[] kdfKey = scratch[KDF_KEY];
    LONG_BE.set(kdfKey, 0, kdf0);
    LONG_BE.set(kdfKey, 8, kdf1);
    LONG_BE.set(kdfKey, 16, kdf2);
    LONG_BE.set(kdfKey, 24, kdf3);
    Mac kdf = KDF.get();
    try {
      kdf.init(new SecretKeySpec(kdfKey, "HmacSHA256"));
      kdf.update(counter, 2, 6);
      kdf.update((byte) 0x01);
      kdf.doFinal(macOut, 0);
      // Leave no key of this connection in the thread's HMAC.
      kdf.init(ZERO_KDF_KEY);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 refused a 32-byte key or its output buffer", e);
    } finally {
      Arrays.fill(kdfKey, (byte) 0);
    }
    key0 = longAt(macOut, 0);
    key1 = longAt(macOut, 8);
    Arrays.fill(macOut, (byte) 0);
  }
}
