package io.pinless.alts;

import io.netty.util.concurrent.FastThreadLocal;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.security.Provider;
import java.util.Arrays;
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

  /** Per thread: the cipher of each provider, and what it last encrypted under. */
  private static final FastThreadLocal<PerThread> PER_THREAD =
      new FastThreadLocal<>() {
        @Override
        protected PerThread initialValue() {
          return new PerThread();
        }
      };

  /** One thread's ciphers. */
  private static final class PerThread {
    /** The cipher of each provider (the key null: the JDK's default). */
    final Map<Provider, Slot> slots = new IdentityHashMap<>(2);
    /** How many zero-key inits ran: the nonce of the next one. */
    long zeroKeyInits;
  }

  /**
   * One provider's cipher on one thread, and the key and nonce of its last encryption: providers
   * refuse to encrypt twice in a row under one key and nonce, which is right within a connection
   * (its counter never repeats) but must not trip when two record ciphers with equal keys (tests
   * have them; handshakes never give two connections one key) take turns on a thread.
   */
  private static final class Slot {
    final Cipher cipher;
    /** The key of the last encryption; compared by identity first, by value only when needed. */
    SecretKeySpec lastKey;
    byte[] lastNonce = new byte[12];

    Slot(Cipher cipher) {
      this.cipher = cipher;
    }
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

  /** Holds the one instance for the preferred provider, built on first use. */
  private static final class Preferred {
    static final AesGcm INSTANCE = new AesGcm();
  }

  /**
   * The instance for the preferred provider, shared by every record cipher (it holds nothing of
   * a connection's), so a connection carries no object of its own for it.
   */
  static AesGcm preferred() {
    return Preferred.INSTANCE;
  }

  /** Uses {@code provider}, or the JDK's default when it is null. */
  AesGcm(Provider provider) {
    this.provider = provider;
    this.oneShotOnly = provider != null && provider.getName().startsWith("Conscrypt");
    slot(PER_THREAD.get()); // fails here, not at the first record, if the provider has no AES-GCM
  }

  /** This thread's cipher for the provider, built on first use. */
  private Slot slot(PerThread thread) {
    Slot slot = thread.slots.get(provider);
    if (slot == null) {
      try {
        slot = new Slot(provider == null
            ? Cipher.getInstance("AES/GCM/NoPadding")
            : Cipher.getInstance("AES/GCM/NoPadding", provider));
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException("AES/GCM/NoPadding is not available", e);
      }
      thread.slots.put(provider, slot);
    }
    return slot;
  }

  /**
   * Overwrites the key this thread's cipher was last initialised with (it may be a record key of
   * the caller's) with a key of zeros.
   */
  void forget() {
    PerThread thread = PER_THREAD.get();
    initWithZeroKey(thread, slot(thread));
  }

  /** Encrypt mode, with a nonce this thread never used with the zero key. */
  private static void initWithZeroKey(PerThread thread, Slot slot) {
    byte[] nonce = new byte[12];
    long n = thread.zeroKeyInits++;
    for (int i = 0; i < 8; i++) {
      nonce[i] = (byte) (n >>> (8 * i));
    }
    try {
      slot.cipher.init(Cipher.ENCRYPT_MODE, ZERO_KEY, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-GCM refused a 16-byte key", e);
    }
    slot.lastKey = ZERO_KEY;
    slot.lastNonce = nonce;
  }

  /** This thread's cipher, initialised in {@code mode} with {@code key} and {@code nonce}. */
  private Cipher init(int mode, SecretKeySpec key, byte[] nonce) throws GeneralSecurityException {
    PerThread thread = PER_THREAD.get();
    Slot slot = slot(thread);
    if (mode == Cipher.ENCRYPT_MODE) {
      // Another record cipher's equal key and nonce (never so between two handshakes' keys):
      // make the provider forget the last encryption rather than take this one for a repeat.
      if (key != slot.lastKey && Arrays.equals(nonce, slot.lastNonce) && key.equals(slot.lastKey)) {
        initWithZeroKey(thread, slot);
      }
      slot.lastKey = key;
      if (nonce.length == slot.lastNonce.length) {
        System.arraycopy(nonce, 0, slot.lastNonce, 0, nonce.length);
      } else {
        slot.lastNonce = nonce.clone();
      }
    }
    slot.cipher.init(mode, key, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    return slot.cipher;
  }

  /** The provider asked for; null for the JDK's default. */
  Provider provider() {
    return provider;
  }

  /** The name of the provider in use, for reports. */
  String providerName() {
    return slot(PER_THREAD.get()).cipher.getProvider().getName();
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
    Cipher cipher = init(Cipher.ENCRYPT_MODE, key, nonce);
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
    Cipher cipher = init(Cipher.ENCRYPT_MODE, key, nonce);
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
    Cipher cipher = init(Cipher.DECRYPT_MODE, key, nonce);
    cipher.doFinal(ciphertextAndTag, out);
  }

  /** Same as {@link #seal} and {@link #open} with additional authenticated data, for vectors. */
  byte[] crypt(int mode, SecretKeySpec key, byte[] nonce, byte[] aad, byte[] input)
      throws GeneralSecurityException {
    Cipher cipher = init(mode, key, nonce);
    if (aad.length > 0) {
      cipher.updateAAD(aad);
    }
    return cipher.doFinal(input);
  }

  private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);
}
