package io.pinless.alts;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import javax.crypto.AEADBadTagException;
import javax.crypto.BadPaddingException;

/**
 * AES-128-GCM through Conscrypt's one-shot native AEAD calls on direct buffers, without its JCE
 * layer. This is the one place pinless reaches into Conscrypt below its public API: the calls
 * ({@code org.conscrypt.NativeCrypto.EVP_AEAD_CTX_seal_buf} and {@code _open_buf}, the same ones
 * Conscrypt's own {@code Cipher} ends in for direct buffers) are package-private, so they are
 * looked up once with a private lookup into Conscrypt's package. That works while Conscrypt is on
 * the class path (an unnamed module); when the lookup or the self-test fails (a Conscrypt without
 * them, or one on the module path that does not open its package) {@link #loadOrNull} says so
 * once, in a WARNING and {@link io.pinless.PinlessMetrics.Metric#ALTS_CRYPTO_FALLBACKS}, and
 * records go through the {@code Cipher} instead.
 *
 * <p>Why: a {@code Cipher} must be re-initialised for every record's nonce, and each init
 * allocates (a {@code GCMParameterSpec} and its nonce copy, Conscrypt's copies of key and nonce,
 * about 170 bytes of heap per record); these calls take the key and nonce as arrays the caller
 * reuses and allocate nothing on the Java heap. BoringSSL expands the key inside the call, as it
 * does behind the {@code Cipher} on every {@code doFinal}.
 *
 * <p>Neither call moves a buffer's position: the input is {@code [position, limit)} of {@code in}
 * and the output goes to {@code out} from its position on, {@code out}'s remaining space the most
 * it may write.
 */
final class ConscryptAead {
  private static final int TAG_BYTES = AesGcm.TAG_BYTES;

  final MethodHandle seal;
  final MethodHandle open;
  /** BoringSSL's {@code EVP_AEAD} for AES-128-GCM, a static table's address. */
  final long aes128Gcm;

  ConscryptAead(MethodHandle seal, MethodHandle open, long aes128Gcm) {
    this.seal = seal;
    this.open = open;
    this.aes128Gcm = aes128Gcm;
  }

  /** Makes an instance of the calls below; it may fail in any way. */
  interface Loader {
    ConscryptAead load() throws Throwable;
  }

  /**
   * The native calls once they pass {@link #selfTest()}, or null when this Conscrypt does not
   * offer them to us; records then go through the {@code Cipher}, which is always correct, and
   * the reason is reported once ({@link CryptoFallback#NATIVE_AEAD}).
   */
  static ConscryptAead loadOrNull() {
    return loadOrNull(ConscryptAead::lookUp, CryptoFallback.NATIVE_AEAD);
  }

  /** What {@code loader} makes once it passes its self-test, or null after {@code fallback}. */
  static ConscryptAead loadOrNull(Loader loader, CryptoFallback fallback) {
    try {
      ConscryptAead aes = loader.load();
      aes.selfTest();
      return aes;
    } catch (Throwable t) {
      if (t instanceof VirtualMachineError && !(t instanceof StackOverflowError)) {
        throw (VirtualMachineError) t;
      }
      fallback.report(t);
      return null;
    }
  }

  /** The calls, looked up in Conscrypt's package; not yet tested. */
  static ConscryptAead lookUp() throws Throwable {
    Class<?> nativeCrypto = Class.forName("org.conscrypt.NativeCrypto");
    MethodHandles.Lookup lookup =
        MethodHandles.privateLookupIn(nativeCrypto, MethodHandles.lookup());
    MethodType op = MethodType.methodType(int.class, long.class, byte[].class, int.class,
        ByteBuffer.class, byte[].class, ByteBuffer.class, byte[].class);
    MethodHandle seal = lookup.findStatic(nativeCrypto, "EVP_AEAD_CTX_seal_buf", op);
    MethodHandle open = lookup.findStatic(nativeCrypto, "EVP_AEAD_CTX_open_buf", op);
    long aead = (long) lookup.findStatic(nativeCrypto, "EVP_aead_aes_128_gcm",
        MethodType.methodType(long.class)).invokeExact();
    return new ConscryptAead(seal, open, aead);
  }

  /**
   * Seals {@code in}'s remaining bytes with {@code key} (16 bytes) and {@code nonce} (12) into
   * {@code out}: ciphertext then tag. Returns the bytes written.
   */
  int seal(byte[] key, byte[] nonce, ByteBuffer in, ByteBuffer out)
      throws GeneralSecurityException {
    return seal(key, nonce, in, out, null);
  }

  /**
   * Same as {@link #seal(byte[], byte[], ByteBuffer, ByteBuffer)} with additional authenticated
   * data ({@code aad}; null for none).
   */
  int seal(byte[] key, byte[] nonce, ByteBuffer in, ByteBuffer out, byte[] aad)
      throws GeneralSecurityException {
    try {
      return (int) seal.invokeExact(aes128Gcm, key, TAG_BYTES, out, nonce, in, aad);
    } catch (GeneralSecurityException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException("Conscrypt's seal failed", t);
    }
  }

  /**
   * Authenticates and decrypts {@code in}'s remaining bytes (ciphertext then tag) into {@code
   * out}; returns the plaintext length. Nothing in {@code out} is meaningful unless it returns.
   *
   * @throws AEADBadTagException if the tag does not verify
   */
  int open(byte[] key, byte[] nonce, ByteBuffer in, ByteBuffer out, byte[] aad)
      throws GeneralSecurityException {
    try {
      return (int) open.invokeExact(aes128Gcm, key, TAG_BYTES, out, nonce, in, aad);
    } catch (BadPaddingException e) {
      // BoringSSL reports a tag that does not verify as a bad decrypt
      AEADBadTagException bad = new AEADBadTagException("tag does not verify");
      bad.initCause(e);
      throw bad;
    } catch (GeneralSecurityException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException("Conscrypt's open failed", t);
    }
  }

  /**
   * NIST's AES-128-GCM test case 3 (16-byte tag), sealed, opened, and opened again with one bit
   * of the tag and then of the ciphertext flipped: the calls do what we think, and refuse what
   * they must.
   *
   * @throws IllegalStateException if the calls get any of it wrong
   */
  void selfTest() throws GeneralSecurityException {
    byte[] key = hex("feffe9928665731c6d6a8f9467308308");
    byte[] nonce = hex("cafebabefacedbaddecaf888");
    byte[] plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
        + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255");
    byte[] expected = hex("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
        + "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985"
        + "4d5c2af327cd64a62cf35abd2ba6fab4");
    ByteBuffer in = ByteBuffer.allocateDirect(plaintext.length).put(plaintext).flip();
    ByteBuffer sealed = ByteBuffer.allocateDirect(expected.length);
    int n = seal(key, nonce, in, sealed);
    byte[] got = new byte[n];
    sealed.get(got);
    if (!java.util.Arrays.equals(expected, got)) {
      throw new IllegalStateException("Conscrypt's native seal does not match NIST's vector");
    }
    ByteBuffer opened = ByteBuffer.allocateDirect(plaintext.length);
    int length = open(key, nonce, sealed.flip(), opened, null);
    byte[] back = new byte[plaintext.length];
    opened.get(back);
    if (length != plaintext.length || !java.util.Arrays.equals(plaintext, back)) {
      throw new IllegalStateException("Conscrypt's native open does not give NIST's plaintext");
    }
    refusesForgery(key, nonce, expected, expected.length - 1, "tag");
    refusesForgery(key, nonce, expected, 0, "ciphertext");
  }

  /** Opens {@code sealed} with bit 0 of byte {@code at} flipped; it must be refused. */
  private void refusesForgery(byte[] key, byte[] nonce, byte[] sealed, int at, String what)
      throws GeneralSecurityException {
    ByteBuffer forged = ByteBuffer.allocateDirect(sealed.length).put(sealed).flip();
    forged.put(at, (byte) (sealed[at] ^ 1));
    try {
      open(key, nonce, forged, ByteBuffer.allocateDirect(sealed.length), null);
    } catch (AEADBadTagException e) {
      return;
    }
    throw new IllegalStateException("Conscrypt's native open accepted a forged " + what);
  }

  private static byte[] hex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return b;
  }
}
