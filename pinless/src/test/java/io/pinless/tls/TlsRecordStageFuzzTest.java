package io.pinless.tls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.ReferenceCountUtil;
import io.pinless.testing.TestCertificates;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;

/**
 * After a real handshake (JDK engines, TLS 1.2 or 1.3), a stream of records built from the
 * fuzzer's bytes, cut at random points, reaches the client's record stage. Property: only the
 * stage's typed error (UNAVAILABLE) comes out, the connection closes on it, nothing leaks, and
 * the plaintext delivered is every valid record's before the first bad one and no more than the
 * valid records carried.
 */
class TlsRecordStageFuzzTest {
  private static final SslContext CLIENT = context(true);
  private static final SslContext SERVER = context(false);
  /** Kinds of piece the stream is built from. */
  private static final int VALID = 0;
  private static final int GARBAGE = 1;
  private static final int TRUNCATED = 2;
  private static final int HANDSHAKE_RECORD = 3;
  private static final int FLIPPED = 4;
  private static final int PLAINTEXT_ALERT = 5;
  private static final int CLOSE_NOTIFY = 6;
  private static final int RENEGOTIATION = 7;
  /** Plaintext that either engine seals into one record, so a bad piece has no good record. */
  private static final int ONE_RECORD_BYTES = 16_000;

  private static SslContext context(boolean client) {
    try {
      return client ? TestCertificates.clientContext(SslProvider.JDK, null)
          : TestCertificates.serverContext(SslProvider.JDK, TestCertificates.SERVER,
              ClientAuth.NONE);
    } catch (SSLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** What the stream carries: its bytes and the plaintext of its valid records. */
  private static final class Stream {
    final ByteArrayOutputStream wire = new ByteArrayOutputStream();
    /** Plaintext of every valid record, in order. */
    final ByteArrayOutputStream valid = new ByteArrayOutputStream();
    /** The plaintext of the valid records before the first bad piece; null while none. */
    byte[] beforeBad;
    /** The peer's close_notify is in the stream: what follows it is dropped. */
    boolean closed;

    void bad() {
      if (beforeBad == null) {
        beforeBad = valid.toByteArray();
      }
    }
  }

  @FuzzTest(maxDuration = "10m")
  void recordStreams(FuzzedDataProvider data) throws Exception {
    String protocol = data.consumeBoolean() ? "TLSv1.3" : "TLSv1.2";
    SSLEngine client = CLIENT.newEngine(PooledByteBufAllocator.DEFAULT, "localhost", 443);
    SSLEngine server = SERVER.newEngine(PooledByteBufAllocator.DEFAULT);
    client.setEnabledProtocols(new String[] {protocol});
    server.setEnabledProtocols(new String[] {protocol});
    TlsRecordStageTest.handshake(client, server);
    Stream stream = build(data, server);
    byte[] wire = stream.wire.toByteArray();

    TlsRecordStageTest.Capture capture = new TlsRecordStageTest.Capture();
    TlsRecordStage stage = new TlsRecordStage(client, null);
    EmbeddedChannel ch = TlsRecordStageTest.channel(stage, capture);
    List<ByteBuf> fed = new ArrayList<>();
    StatusRuntimeException error = null;
    try {
      int at = 0;
      while (at < wire.length && ch.isOpen()) {
        // With the fuzzer's bytes used up, the rest goes in one read.
        int n = data.remainingBytes() == 0 ? wire.length - at
            : Math.min(wire.length - at, data.consumeInt(1, 3 * TlsRecords.MAX_LENGTH));
        ByteBuf piece = ch.alloc().directBuffer(n).writeBytes(wire, at, n);
        fed.add(piece.retain()); // the test's reference: refCnt 1 once the stage let go
        at += n;
        try {
          ch.writeInbound(piece);
        } catch (StatusRuntimeException e) {
          error = e;
          assertFalse(ch.isOpen(), "the connection closes on bad input: " + error);
        }
      }
      try {
        // The peer's close: a record it cut short is the stage's typed error too.
        ch.close();
        ch.checkException();
      } catch (StatusRuntimeException e) {
        error = error != null ? error : e;
      }
      if (error != null) {
        assertEquals(Status.Code.UNAVAILABLE, error.getStatus().getCode(), error.toString());
      }
      byte[] delivered = capture.bytes.toByteArray();
      byte[] valid = stream.valid.toByteArray();
      assertTrue(delivered.length <= valid.length, "more plaintext than the valid records");
      assertTrue(Arrays.equals(delivered, 0, delivered.length, valid, 0, delivered.length),
          "plaintext that no valid record carried");
      if (stream.beforeBad != null) {
        assertTrue(delivered.length >= stream.beforeBad.length,
            "the plaintext before the bad piece: " + delivered.length + " of "
                + stream.beforeBad.length + " bytes");
      } else if (!stream.closed) {
        assertEquals(null, error, "a valid stream fails");
        assertEquals(valid.length, delivered.length, "a valid stream arrives whole");
      }
    } finally {
      ch.finishAndReleaseAll();
      ReferenceCountUtil.release(server);
    }
    assertEquals(0, stage.heldBytes(), "the stage holds nothing once closed");
    for (ByteBuf piece : fed) {
      assertEquals(1, piece.refCnt(), "the stage released every read");
      piece.release();
    }
  }

  /** Builds the stream the server sends, piece by piece, as the fuzzer's bytes choose. */
  private static Stream build(FuzzedDataProvider data, SSLEngine server) throws Exception {
    Stream stream = new Stream();
    int pieces = data.consumeInt(0, 12);
    for (int i = 0; i < pieces && !stream.closed; i++) {
      switch (data.consumeInt(VALID, RENEGOTIATION)) {
        case VALID: {
          byte[] plaintext = pattern(data.consumeInt(0, 40_000), i);
          stream.wire.writeBytes(seal(server, plaintext));
          stream.valid.writeBytes(plaintext);
          break;
        }
        case GARBAGE:
          stream.bad();
          stream.wire.writeBytes(data.consumeBytes(data.consumeInt(1, 64)));
          break;
        case TRUNCATED: {
          byte[] record = seal(server, pattern(data.consumeInt(1, ONE_RECORD_BYTES), i));
          stream.bad();
          stream.wire.write(record, 0, data.consumeInt(0, record.length - 1));
          break;
        }
        case HANDSHAKE_RECORD: {
          byte[] body = data.consumeBytes(data.consumeInt(0, 300));
          stream.bad();
          stream.wire.writeBytes(new byte[] {22, 3, 3, (byte) (body.length >> 8),
              (byte) body.length});
          stream.wire.writeBytes(body);
          break;
        }
        case FLIPPED: {
          byte[] record = seal(server, pattern(data.consumeInt(1, ONE_RECORD_BYTES), i));
          // A bit of the protected fragment: TLS 1.3 ignores the header's version.
          int bit = data.consumeInt(TlsRecords.HEADER_BYTES * 8, record.length * 8 - 1);
          record[bit / 8] ^= (byte) (1 << (bit % 8));
          stream.bad();
          stream.wire.writeBytes(record);
          break;
        }
        case PLAINTEXT_ALERT:
          stream.bad();
          stream.wire.writeBytes(
              new byte[] {21, 3, 3, 0, 2, data.consumeByte(), data.consumeByte()});
          break;
        case CLOSE_NOTIFY:
          server.closeOutbound();
          stream.wire.writeBytes(seal(server, new byte[0]));
          stream.closed = true;
          break;
        default: // RENEGOTIATION
          stream.bad();
          if ("TLSv1.2".equals(TlsRecords.protocol(server))) {
            server.beginHandshake();
            stream.wire.writeBytes(seal(server, new byte[0]));
          } else {
            stream.wire.writeBytes(new byte[] {22, 3, 3, 0, 4, 0, 0, 0, 0});
          }
          stream.closed = true; // the server's engine is mid-handshake: nothing follows
          break;
      }
    }
    return stream;
  }

  /** Records of {@code plaintext} sealed by {@code engine} (or what it sends by itself). */
  private static byte[] seal(SSLEngine engine, byte[] plaintext) throws Exception {
    ByteBuffer out = ByteBuffer.allocate(plaintext.length + (1 << 16));
    ByteBuffer src = ByteBuffer.wrap(plaintext);
    do {
      TlsRecordStageTest.runTasks(engine);
      SSLEngineResult result = engine.wrap(src, out);
      if (result.bytesProduced() == 0) {
        break;
      }
    } while (src.hasRemaining()
        || engine.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP);
    return Arrays.copyOf(out.array(), out.position());
  }

  private static byte[] pattern(int n, int seed) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) {
      b[i] = (byte) (i * 31 + seed);
    }
    return b;
  }
}
