package io.pinless.alts;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.Random;

/**
 * What AES-GCM alone costs on this machine: records of one size sealed, or opened, by BoringSSL's
 * one-shot calls through Conscrypt ({@link ConscryptAead}) on reused direct buffers, and nothing
 * else. It is the cipher's share of a record layer's floor: no framing, no buffer handling, no
 * copies.
 *
 * <p>{@link #open} opens one sealed record over and over, so its input stays in the cache, as a
 * record just read from a socket is. One instance per thread.
 */
public final class AeadCost {
  /** What an ALTS frame adds to its record's plaintext: length, type and tag. */
  public static final int ALTS_FRAME_OVERHEAD_BYTES = AltsFrames.OVERHEAD_BYTES;

  private static final int NONCE_BYTES = 12;

  private final ConscryptAead calls;
  private final byte[] key;
  private final byte[] nonce = new byte[NONCE_BYTES];
  /** The nonce {@link #sealed} was sealed with. */
  private final byte[] sealedNonce = new byte[NONCE_BYTES];
  private final int recordBytes;
  private final ByteBuffer plain;
  private final ByteBuffer sealed;
  private final ByteBuffer opened;
  private final ByteBuffer sealInto;

  /**
   * AES-GCM with a key of {@code keyBytes} (16 or 32) over records of {@code recordBytes} of
   * plaintext.
   *
   * @throws IllegalStateException if Conscrypt's native calls are not available
   */
  public AeadCost(int keyBytes, int recordBytes) throws Throwable {
    if (keyBytes != 16 && keyBytes != 32) {
      throw new IllegalArgumentException("AES-GCM keys are 16 or 32 bytes, not " + keyBytes);
    }
    ConscryptAead found = ConscryptAead.loadOrNull();
    if (found == null) {
      throw new IllegalStateException("Conscrypt's native AEAD calls are not available");
    }
    calls = new ConscryptAead(found.seal, found.open,
        keyBytes == 16 ? found.aes128Gcm : aes256Gcm());
    this.recordBytes = recordBytes;
    Random random = new Random(keyBytes + recordBytes);
    key = new byte[keyBytes];
    random.nextBytes(key);
    byte[] bytes = new byte[recordBytes];
    random.nextBytes(bytes);
    plain = ByteBuffer.allocateDirect(recordBytes).put(bytes).flip();
    sealed = ByteBuffer.allocateDirect(recordBytes + AesGcm.TAG_BYTES);
    sealInto = ByteBuffer.allocateDirect(recordBytes + AesGcm.TAG_BYTES);
    opened = ByteBuffer.allocateDirect(recordBytes);
    sealed.limit(calls.seal(key, sealedNonce, plain, sealed));
  }

  /** BoringSSL's {@code EVP_AEAD} for AES-256-GCM, looked up as {@link ConscryptAead} does. */
  private static long aes256Gcm() throws Throwable {
    Class<?> nativeCrypto = Class.forName("org.conscrypt.NativeCrypto");
    return (long) MethodHandles.privateLookupIn(nativeCrypto, MethodHandles.lookup())
        .findStatic(nativeCrypto, "EVP_aead_aes_256_gcm", MethodType.methodType(long.class))
        .invokeExact();
  }

  /** Seals whole records until at least {@code bytes} of plaintext are sealed; returns those. */
  public long seal(long bytes) throws GeneralSecurityException {
    long done = 0;
    while (done < bytes) {
      nonce[0]++;
      sealInto.clear();
      calls.seal(key, nonce, plain, sealInto);
      done += recordBytes;
    }
    return done;
  }

  /** Opens the sealed record until at least {@code bytes} of plaintext are opened; returns those. */
  public long open(long bytes) throws GeneralSecurityException {
    long done = 0;
    while (done < bytes) {
      opened.clear();
      done += calls.open(key, sealedNonce, sealed, opened, null);
    }
    return done;
  }
}
