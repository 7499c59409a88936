package io.pinless.alts;

import io.netty.util.concurrent.FastThreadLocal;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.security.Provider;
import java.util.IdentityHashMap;
import java.util.Map;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * AES-GCM with a 16-byte tag over a {@link Cipher} that is built once per thread and provider and
 * re-initialised, with the record's key and nonce, for every record (a new nonce needs a new init
 * anyway; building a {@code Cipher} per record would cost far more). Sharing it between the
 * connections of an event loop keeps an idle ALTS connection from holding cipher objects of its
 * own: each call runs to its end on one thread, and nothing of a record is left in the cipher
 * for the next but the key, which {@link #forget()} overwrites.
 *
 * <p>The provider is Conscrypt (BoringSSL) when it is on the classpath and usable, else the JDK's.
 * Conscrypt seals and opens whole direct buffers in one native call (5.3 GB/s here against the
 * JDK's 2.5 GB/s on direct buffers) but buffers everything given to {@code update}, so with
 * Conscrypt a record is always one {@code doFinal} over a contiguous buffer.
 *
 * <p>Aliasing: the plaintexts given to {@link #seal} must not overlap {@code out}; the input and
 * output of {@link #open} must not overlap.
 */
final class AesGcm {
  /** GCM tag length in bytes; ALTS uses the full 128-bit tag. */
  static final int TAG_BYTES = 16;

  /** Per thread: the ciphers, and what they last encrypted for. */
  private static final FastThreadLocal<PerThread> PER_THREAD =
      new FastThreadLocal<>() {
        @Override
        protected PerThread initialValue() {
          return new PerThread();
        }
      };

  /** One thread's ciphers and their state. */
  private static final class PerThread {
    /** The cipher of each provider (the key null: the JDK's default). */
    final Map<Provider, Cipher> ciphers = new IdentityHashMap<>(2);
    /** How many zero-key inits ran: the nonce of the next one. */
    long zeroKeyInits;
    /**
     * The instance that last encrypted on this thread. Providers refuse to encrypt twice in a row
     * under one key and nonce; that check stays meaningful within one connection (its counter
     * never repeats), and is reset when another connection encrypts next.
     */
    AesGcm lastEncryptor;
  }

  /** A key of zeros: what {@link #forget()} leaves in this thread's cipher. */
  private static final SecretKeySpec ZERO_KEY = new SecretKeySpec(new byte[16], "AES");

  /** The provider asked for; null for the JDK's default. */
  private final Provider provider;
  /** True when the provider is Conscrypt, which must see a record as one contiguous buffer. */
  private final boolean oneShotOnly;

  /** Uses the preferred provider ({@link CryptoProvider#preferred()}). */
  AesGcm() {
    this(CryptoProvider.preferred());
  }

  /** Uses {@code provider}, or the JDK's default when it is null. */
  AesGcm(Provider provider) {
    this.provider = provider;
    this.oneShotOnly = provider != null && provider.getName().startsWith("Conscrypt");
    cipher(); // fails here, not at the first record, if the provider has no AES-GCM
  }

  /** This thread's cipher for the provider, built on first use. */
  private Cipher cipher() {
    return cipher(PER_THREAD.get());
  }

  private Cipher cipher(PerThread thread) {
    Map<Provider, Cipher> ciphers = thread.ciphers;
    Cipher cipher = ciphers.get(provider);
    if (cipher == null) {
      try {
        cipher =
            provider == null
                ? Cipher.getInstance("AES/GCM/NoPadding")
                : Cipher.getInstance("AES/GCM/NoPadding", provider);
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException("AES/GCM/NoPadding is not available", e);
      }
      ciphers.put(provider, cipher);
    }
    return cipher;
  }

  /**
   * Overwrites the key this thread's cipher was last initialised with (it may be a record key of
   * the caller's) with a key of zeros.
   */
  void forget() {
    PerThread thread = PER_THREAD.get();
    initWithZeroKey(thread, cipher(thread));
    if (thread.lastEncryptor == this) {
      thread.lastEncryptor = null;
    }
  }

  /**
   * Encrypt mode, with a nonce this thread never used with the zero key: providers remember the
   * last key and nonce they encrypted under, and this makes them forget the previous user's.
   */
  private static void initWithZeroKey(PerThread thread, Cipher cipher) {
    byte[] nonce = new byte[12];
    long n = thread.zeroKeyInits++;
    for (int i = 0; i < 8; i++) {
      nonce[i] = (byte) (n >>> (8 * i));
    }
    try {
      cipher.init(Cipher.ENCRYPT_MODE, ZERO_KEY, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-GCM refused a 16-byte key", e);
    }
  }

  /** This thread's cipher, ready for this instance to init in {@code mode}. */
  private Cipher cipherFor(int mode) {
    PerThread thread = PER_THREAD.get();
    Cipher cipher = cipher(thread);
    if (mode == Cipher.ENCRYPT_MODE && thread.lastEncryptor != this) {
      if (thread.lastEncryptor != null) {
        initWithZeroKey(thread, cipher);
      }
      thread.lastEncryptor = this;
    }
    return cipher;
  }

  /** The provider asked for; null for the JDK's default. */
  Provider provider() {
    return provider;
  }

  /** The name of the provider in use, for reports. */
  String providerName() {
    return cipher().getProvider().getName();
  }

  /**
   * Encrypts the concatenation of {@code plaintexts[0..count)} into {@code out}, followed by the
   * tag. Every plaintext's position is advanced to its limit; {@code out}'s by the plaintext
   * length plus {@link #TAG_BYTES}.
   */
  void seal(SecretKeySpec key, byte[] nonce, ByteBuffer[] plaintexts, int count, ByteBuffer out)
      throws GeneralSecurityException {
    if (count > 1 && oneShotOnly) {
      // Conscrypt would buffer every update() on the heap: gather the pieces into the frame
      // buffer and seal them in place in one native call instead.
      int start = out.position();
      for (int i = 0; i < count; i++) {
        out.put(plaintexts[i]);
      }
      int plaintextBytes = out.position() - start;
      out.position(start);
      sealInPlace(key, nonce, out, plaintextBytes);
      return;
    }
    Cipher cipher = cipherFor(Cipher.ENCRYPT_MODE);
    cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    if (count == 1) {
      cipher.doFinal(plaintexts[0], out);
    } else {
      for (int i = 0; i < count; i++) {
        cipher.update(plaintexts[i], out);
      }
      cipher.doFinal(EMPTY, out);
    }
  }

  /**
   * Whether {@link #sealInPlace} is the cheaper way to seal a plaintext of several pieces:
   * copying the pieces into the frame first (Conscrypt, which seals only whole buffers).
   */
  boolean prefersSealInPlace() {
    return oneShotOnly;
  }

  /**
   * Encrypts the {@code plaintextBytes} bytes at {@code region}'s position in place, followed by
   * the tag; advances the position past the tag.
   */
  void sealInPlace(SecretKeySpec key, byte[] nonce, ByteBuffer region, int plaintextBytes)
      throws GeneralSecurityException {
    Cipher cipher = cipherFor(Cipher.ENCRYPT_MODE);
    cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    ByteBuffer in = region.duplicate();
    in.limit(region.position() + plaintextBytes);
    cipher.doFinal(in, region);
  }

  /**
   * Decrypts and authenticates {@code ciphertextAndTag} into {@code out}; nothing counts as
   * written unless the tag verifies. Advances the input's position to its limit and {@code out}'s
   * by the plaintext length.
   *
   * @throws javax.crypto.AEADBadTagException if the tag does not verify
   */
  void open(SecretKeySpec key, byte[] nonce, ByteBuffer ciphertextAndTag, ByteBuffer out)
      throws GeneralSecurityException {
    Cipher cipher = cipherFor(Cipher.DECRYPT_MODE);
    cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    cipher.doFinal(ciphertextAndTag, out);
  }

  /** Same as {@link #seal} and {@link #open} with additional authenticated data, for vectors. */
  byte[] crypt(int mode, SecretKeySpec key, byte[] nonce, byte[] aad, byte[] input)
      throws GeneralSecurityException {
    Cipher cipher = cipherFor(mode);
    cipher.init(mode, key, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    if (aad.length > 0) {
      cipher.updateAAD(aad);
    }
    return cipher.doFinal(input);
  }

  private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);
}
