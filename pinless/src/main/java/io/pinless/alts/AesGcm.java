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
 * AES-128-GCM with a 16-byte tag, for records: each call takes the record's 16-byte key and
 * 12-byte nonce as arrays the caller keeps (so a connection holds its key as bytes it can wipe).
 *
 * <p>Two engines. With Conscrypt on the class path, records are sealed and opened by its native
 * one-shot calls ({@link ConscryptAead}): no {@code Cipher}, nothing allocated on the Java heap
 * per record. Otherwise (the JDK, or a Conscrypt that does not offer those calls) a {@link Cipher}
 * built once per thread and provider is re-initialised with the record's key and nonce for every
 * record (a new nonce needs a new init; building a {@code Cipher} per record would cost far more).
 * Sharing it between the connections of an event loop keeps an idle ALTS connection from holding
 * cipher objects of its own: each call runs to its end on one thread, and nothing of a record is
 * left in the cipher for the next but the key, which {@link #forget()} overwrites.
 *
 * <p>Conscrypt (either way) seals and opens only whole direct buffers in one native call, about
 * twice as fast as the JDK on direct buffers; through its {@code Cipher} it would buffer
 * everything given to {@code update} on the heap, so with Conscrypt a record should reach
 * {@link #seal} as one buffer ({@link #sealsWholeBuffersOnly()}).
 *
 * <p>Aliasing: the plaintexts given to {@link #seal} must not overlap {@code out}; the input and
 * output of {@link #open} must not overlap.
 */
final class AesGcm {
  /** GCM tag length in bytes; ALTS uses the full 128-bit tag. */
  static final int TAG_BYTES = 16;
  /** AES-128's key length in bytes. */
  static final int KEY_BYTES = 16;

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
   * One provider's cipher on one thread, the key object it was last given (rebuilt only when the
   * key bytes change, as when connections take turns on the thread), and the key and nonce of its
   * last encryption: providers refuse to encrypt twice in a row under one key and nonce, which is
   * right within a connection (its counter never repeats) but must not trip when two record
   * ciphers with equal keys (tests have them; handshakes never give two connections one key) take
   * turns on a thread.
   */
  private static final class Slot {
    final Cipher cipher;
    /** The bytes of {@link #spec}. */
    final byte[] specBytes = new byte[KEY_BYTES];
    /** The key last given to the cipher; null when none or after {@link #forget()}. */
    SecretKeySpec spec;
    /** The key and nonce of the last encryption. */
    final byte[] lastKey = new byte[KEY_BYTES];
    final byte[] lastNonce = new byte[12];

    Slot(Cipher cipher) {
      this.cipher = cipher;
    }
  }

  /** A key of zeros: what {@link #forget()} leaves in this thread's cipher. */
  private static final SecretKeySpec ZERO_KEY = new SecretKeySpec(new byte[KEY_BYTES], "AES");

  /** The provider asked for; null for the JDK's default. */
  private final Provider provider;
  /** Conscrypt's native calls, or null to go through the {@code Cipher}. */
  private final ConscryptAead nativeAead;
  /** True when the provider is Conscrypt, which must see a record as one contiguous buffer. */
  private final boolean wholeBuffersOnly;

  /** Holds the one instance for the preferred provider, built on first use. */
  private static final class Preferred {
    static final AesGcm INSTANCE = new AesGcm(CryptoProvider.preferred());
  }

  /**
   * The instance for the preferred provider, shared by every record cipher (it holds nothing of
   * a connection's), so a connection carries no object of its own for it.
   */
  static AesGcm preferred() {
    return Preferred.INSTANCE;
  }

  /**
   * Uses {@code provider}, or the JDK's default when it is null; with Conscrypt, its native calls
   * when they load.
   */
  AesGcm(Provider provider) {
    this(provider, isConscrypt(provider) ? ConscryptAead.loadOrNull() : null);
  }

  /** Uses {@code provider}, and {@code nativeAead} for records when it is not null. */
  AesGcm(Provider provider, ConscryptAead nativeAead) {
    this.provider = provider;
    this.nativeAead = nativeAead;
    this.wholeBuffersOnly = isConscrypt(provider);
    slot(PER_THREAD.get()); // fails here, not at the first record, if the provider has no AES-GCM
  }

  private static boolean isConscrypt(Provider provider) {
    return provider != null && provider.getName().startsWith("Conscrypt");
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
   * Overwrites what this thread's cipher keeps of the last key it was given (it may be a record
   * key of the caller's) with a key of zeros. The native calls keep nothing between calls.
   */
  void forget() {
    PerThread thread = PER_THREAD.get();
    Slot slot = thread.slots.get(provider);
    if (slot != null) {
      initWithZeroKey(thread, slot);
    }
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
    slot.spec = null;
    Arrays.fill(slot.specBytes, (byte) 0);
    Arrays.fill(slot.lastKey, (byte) 0);
    System.arraycopy(nonce, 0, slot.lastNonce, 0, nonce.length);
  }

  /** This thread's cipher, initialised in {@code mode} with {@code key} and {@code nonce}. */
  private Cipher init(int mode, byte[] key, byte[] nonce) throws GeneralSecurityException {
    PerThread thread = PER_THREAD.get();
    Slot slot = slot(thread);
    if (mode == Cipher.ENCRYPT_MODE) {
      // Another record cipher's equal key and nonce (never so between two handshakes' keys):
      // make the provider forget the last encryption rather than take this one for a repeat.
      if (Arrays.equals(nonce, slot.lastNonce) && Arrays.equals(key, slot.lastKey)) {
        initWithZeroKey(thread, slot);
      }
      System.arraycopy(key, 0, slot.lastKey, 0, KEY_BYTES);
      System.arraycopy(nonce, 0, slot.lastNonce, 0, slot.lastNonce.length);
    }
    if (slot.spec == null || !Arrays.equals(key, slot.specBytes)) {
      slot.spec = new SecretKeySpec(key, "AES");
      System.arraycopy(key, 0, slot.specBytes, 0, KEY_BYTES);
    }
    slot.cipher.init(mode, slot.spec, new GCMParameterSpec(TAG_BYTES * 8, nonce));
    return slot.cipher;
  }

  /** The provider asked for; null for the JDK's default. */
  Provider provider() {
    return provider;
  }

  /** The name of the provider in use, for reports. */
  String providerName() {
    String name = slot(PER_THREAD.get()).cipher.getProvider().getName();
    return nativeAead != null ? name + " (native calls)" : name;
  }

  /**
   * Encrypts the concatenation of {@code plaintexts[0..count)} into {@code out}, followed by the
   * tag. Every plaintext's position is advanced to its limit; {@code out}'s by the plaintext
   * length plus {@link #TAG_BYTES}. With {@link #sealsWholeBuffersOnly()}, several pieces are
   * first copied into one temporary buffer: callers with many pieces should gather them first.
   */
  void seal(byte[] key, byte[] nonce, ByteBuffer[] plaintexts, int count, ByteBuffer out)
      throws GeneralSecurityException {
    if (count > 1 && wholeBuffersOnly) {
      int total = 0;
      for (int i = 0; i < count; i++) {
        total += plaintexts[i].remaining();
      }
      ByteBuffer whole = ByteBuffer.allocateDirect(total);
      for (int i = 0; i < count; i++) {
        whole.put(plaintexts[i]);
      }
      seal(key, nonce, whole.flip(), out);
      return;
    }
    if (count == 1) {
      seal(key, nonce, plaintexts[0], out);
      return;
    }
    Cipher cipher = init(Cipher.ENCRYPT_MODE, key, nonce);
    for (int i = 0; i < count; i++) {
      cipher.update(plaintexts[i], out);
    }
    cipher.doFinal(EMPTY, out);
  }

  /**
   * Encrypts {@code plaintext}'s remaining bytes into {@code out}, followed by the tag; advances
   * {@code plaintext}'s position to its limit and {@code out}'s by the bytes written.
   */
  void seal(byte[] key, byte[] nonce, ByteBuffer plaintext, ByteBuffer out)
      throws GeneralSecurityException {
    if (nativeAead != null && plaintext.isDirect() && out.isDirect()) {
      int written = nativeAead.seal(key, nonce, plaintext, out);
      plaintext.position(plaintext.limit());
      out.position(out.position() + written);
      return;
    }
    init(Cipher.ENCRYPT_MODE, key, nonce).doFinal(plaintext, out);
  }

  /**
   * Whether a plaintext of several pieces should reach {@link #seal} as one buffer (Conscrypt):
   * the caller then gathers it into a buffer of its own choosing.
   */
  boolean sealsWholeBuffersOnly() {
    return wholeBuffersOnly;
  }

  /**
   * Decrypts and authenticates {@code ciphertextAndTag} into {@code out}; nothing counts as
   * written unless the tag verifies. Advances the input's position to its limit and {@code out}'s
   * by the plaintext length.
   *
   * @throws javax.crypto.AEADBadTagException if the tag does not verify
   */
  void open(byte[] key, byte[] nonce, ByteBuffer ciphertextAndTag, ByteBuffer out)
      throws GeneralSecurityException {
    if (nativeAead != null && ciphertextAndTag.isDirect() && out.isDirect()) {
      int written = nativeAead.open(key, nonce, ciphertextAndTag, out, null);
      ciphertextAndTag.position(ciphertextAndTag.limit());
      out.position(out.position() + written);
      return;
    }
    init(Cipher.DECRYPT_MODE, key, nonce).doFinal(ciphertextAndTag, out);
  }

  /** Same as {@link #seal} and {@link #open} with additional authenticated data, for vectors. */
  byte[] crypt(int mode, byte[] key, byte[] nonce, byte[] aad, byte[] input)
      throws GeneralSecurityException {
    if (nativeAead != null) {
      ByteBuffer in = ByteBuffer.allocateDirect(input.length).put(input).flip();
      ByteBuffer out = ByteBuffer.allocateDirect(input.length + TAG_BYTES);
      int n = mode == Cipher.ENCRYPT_MODE
          ? nativeAead.seal(key, nonce, in, out, aad)
          : nativeAead.open(key, nonce, in, out, aad);
      byte[] result = new byte[n];
      out.get(result);
      return result;
    }
    Cipher cipher = init(mode, key, nonce);
    if (aad.length > 0) {
      cipher.updateAAD(aad);
    }
    return cipher.doFinal(input);
  }

  private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);
}
