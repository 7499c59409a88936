package io.pinless.alts;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.pinless.PinlessMetrics;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import javax.crypto.AEADBadTagException;
import org.junit.jupiter.api.Test;

/**
 * Conscrypt's native AES-GCM calls are used only when their self-test passes, forged tags
 * included, and a fallback is logged once and counted.
 */
class ConscryptAeadTest {
  /** The real calls, which the broken ones below wrap. */
  private static final ConscryptAead REAL = real();

  private static ConscryptAead real() {
    try {
      return ConscryptAead.lookUp();
    } catch (Throwable t) {
      throw new AssertionError("Conscrypt's native calls must load here", t);
    }
  }

  /** Opens as the real call does, but takes any tag: what the self-test must catch. */
  static int openIgnoringTheTag(long aead, byte[] key, int tagBytes, ByteBuffer out, byte[] nonce,
      ByteBuffer in, byte[] aad) throws GeneralSecurityException {
    try {
      return REAL.open(key, nonce, in.duplicate(), out, aad);
    } catch (AEADBadTagException e) {
      return in.remaining() - tagBytes;
    }
  }

  /** The real calls with {@link #openIgnoringTheTag} as their open. */
  private static ConscryptAead ignoringTags() throws ReflectiveOperationException {
    MethodHandle open = MethodHandles.lookup().findStatic(ConscryptAeadTest.class,
        "openIgnoringTheTag", MethodType.methodType(int.class, long.class, byte[].class,
            int.class, ByteBuffer.class, byte[].class, ByteBuffer.class, byte[].class));
    return new ConscryptAead(REAL.seal, open, REAL.aes128Gcm);
  }

  @Test
  void theRealCallsPassTheSelfTest() throws Exception {
    REAL.selfTest();
    assertNotNull(ConscryptAead.loadOrNull());
  }

  @Test
  void theSelfTestRefusesAnOpenThatTakesAForgedTag() throws Exception {
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> ignoringTags().selfTest());
    assertTrue(e.getMessage().contains("forged"), e.getMessage());
  }

  @Test
  void aFailedSelfTestFallsBackLoggedOnceAndCountedEachTime() throws Exception {
    Logger logger = Logger.getLogger(CryptoFallback.class.getName());
    List<LogRecord> logged = new ArrayList<>();
    Handler capture = new Handler() {
      @Override
      public void publish(LogRecord record) {
        logged.add(record);
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    logger.addHandler(capture);
    try {
      CryptoFallback fallback = new CryptoFallback("test calls are not usable");
      long before = PinlessMetrics.Metric.ALTS_CRYPTO_FALLBACKS.value();
      assertNull(ConscryptAead.loadOrNull(ConscryptAeadTest::ignoringTags, fallback));
      assertNull(ConscryptAead.loadOrNull(ConscryptAeadTest::ignoringTags, fallback));
      assertEquals(before + 2, PinlessMetrics.Metric.ALTS_CRYPTO_FALLBACKS.value());
      assertEquals(1, logged.size(), "logged once");
      LogRecord record = logged.get(0);
      assertEquals(Level.WARNING, record.getLevel());
      assertTrue(record.getMessage().startsWith("test calls are not usable: ")
          && record.getMessage().contains("forged"), record.getMessage());
      assertNotNull(record.getThrown());
    } finally {
      logger.removeHandler(capture);
    }
  }

  @Test
  void aLoaderThatThrowsFallsBackToo() {
    CryptoFallback fallback = new CryptoFallback("test calls are not usable");
    long before = PinlessMetrics.Metric.ALTS_CRYPTO_FALLBACKS.value();
    assertNull(ConscryptAead.loadOrNull(() -> {
      throw new NoSuchMethodException("EVP_AEAD_CTX_open_buf");
    }, fallback));
    assertEquals(before + 1, PinlessMetrics.Metric.ALTS_CRYPTO_FALLBACKS.value());
  }
}
