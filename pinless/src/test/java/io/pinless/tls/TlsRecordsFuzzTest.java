package io.pinless.tls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.grpc.StatusRuntimeException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.CorruptedFrameException;
import io.pinless.connection.TestRecordLayer;
import io.pinless.testing.PoolBytes;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * TLS record framing ahead of the engine (TLS headers through the record framing): only typed
 * errors, no buffer left allocated, whole records equal to a reference splitter's, and held bytes
 * within four times the bytes of the cut record received (64 at least) after every read.
 *
 * <p>Records carry their body as plaintext; a body of all 0xEE bytes fails to open, as a record
 * that does not decrypt. Reads come as a connection's would: into the cut record's own buffer when
 * the framing offers it, else into a fresh one of the size it asks for, cut where the fuzzer says.
 */
class TlsRecordsFuzzTest {
  /** One arena and no thread caches, so live buffers are counted exactly per input. */
  private static final PooledByteBufAllocator ALLOC =
      new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);

  @FuzzTest
  void headerStreams(FuzzedDataProvider data) {
    byte[] stream;
    if (data.consumeBoolean()) {
      stream = data.consumeBytes(data.consumeInt(0, 100_000));
    } else {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (int k = data.consumeInt(0, 6); k > 0; k--) {
        int length = data.consumeBoolean()
            ? data.consumeInt(0, 64) : data.consumeInt(0, TlsRecords.MAX_LENGTH + 8);
        int type = data.consumeBoolean() ? 23 : data.consumeInt(0, 255);
        int minor = data.consumeBoolean() ? 3 : data.consumeInt(0, 255);
        out.write(type);
        out.write(data.consumeBoolean() ? 3 : data.consumeInt(0, 255));
        out.write(minor);
        out.write(length >>> 8);
        out.write(length);
        byte fill = data.consumeBoolean() ? TestRecordLayer.POISON : data.consumeByte();
        byte[] body = new byte[length];
        Arrays.fill(body, fill);
        if (length > 0 && fill == TestRecordLayer.POISON && data.consumeBoolean()) {
          body[length - 1] = 1;
        }
        out.writeBytes(body);
      }
      stream = out.toByteArray();
      if (stream.length > 0 && data.consumeBoolean()) {
        stream = Arrays.copyOf(stream, data.consumeInt(0, stream.length - 1));
      }
    }
    int[] reads = new int[data.consumeInt(0, 24)];
    for (int i = 0; i < reads.length; i++) {
      // 0: a read that brings nothing, whose buffer the read loop releases unread.
      reads[i] = data.consumeBoolean() ? data.consumeInt(0, 8) : data.consumeInt(1, 70_000);
    }
    check(stream, reads);
  }

  /** A framing with TLS's header check, as the TLS record stage has. */
  private static TestRecordLayer tlsFraming() {
    return new TestRecordLayer(TlsRecords.HEADER_BYTES,
        header -> TlsRecords.HEADER_BYTES + TlsRecords.checkHeader((int) (header >>> 32) & 0xff,
            (int) (header >>> 24) & 0xff, (int) (header >>> 16) & 0xff, (int) header & 0xffff));
  }

  private static void check(byte[] stream, int[] reads) {
    Reference ref = Reference.split(stream);
    long liveBefore = PoolBytes.liveBuffers(ALLOC);
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(tlsFraming());
    EmbeddedChannel ch = new EmbeddedChannel(h);
    ch.config().setAllocator(ALLOC);
    List<ByteBuf> fed = new ArrayList<>();
    int offset = 0;
    for (int i = 0; offset < stream.length; i++) {
      ByteBuf read = h.layer.nextReadBuffer();
      if (read == null) {
        int size = h.layer.nextReadBytes();
        read = ALLOC.directBuffer(size > 0 ? Math.min(size, 256 * 1024) : 2048);
      }
      int n = Math.min(stream.length - offset, read.writableBytes());
      if (i < reads.length) {
        n = Math.min(n, reads[i]);
      }
      fed.add(read);
      if (n == 0) {
        read.release();
        continue;
      }
      read.writeBytes(stream, offset, n);
      ch.writeInbound(read);
      offset += n;
      int held = h.layer.heldBytes();
      if (h.errors.isEmpty()) {
        int received = offset - ref.recordStartAtOrBefore(offset);
        assertTrue(held <= Math.max(64, 4 * received),
            held + " bytes held with " + received + " of the record received");
      } else {
        assertEquals(0, held, "held after a fatal error");
      }
    }
    ch.close();
    for (RuntimeException e : h.errors) {
      if (!(e instanceof StatusRuntimeException || e instanceof CorruptedFrameException)) {
        throw new AssertionError("an untyped error", e);
      }
    }
    assertArrayEquals(ref.bodies, h.plaintext.toByteArray(), "bodies differ from the reference");
    assertEquals(ref.end < stream.length ? 1 : 0, h.errors.size(), h.errors::toString);
    ch.finishAndReleaseAll();
    assertEquals(0, h.layer.heldBytes());
    for (ByteBuf read : fed) {
      assertEquals(0, read.refCnt(), "a read buffer is still retained");
    }
    assertEquals(liveBefore, PoolBytes.liveBuffers(ALLOC), "pooled buffers left allocated");
  }

  /** A plain splitter: header rules of RFC 8446 5.1 as TLS 1.2 and 1.3 accept them. */
  private static final class Reference {
    final byte[] bodies;
    /** Where the good records end. */
    final int end;
    final int[] starts;

    private Reference(byte[] bodies, int end, int[] starts) {
      this.bodies = bodies;
      this.end = end;
      this.starts = starts;
    }

    int recordStartAtOrBefore(int offset) {
      int start = 0;
      for (int s : starts) {
        if (s <= offset) {
          start = s;
        }
      }
      return start;
    }

    static Reference split(byte[] b) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      List<Integer> starts = new ArrayList<>();
      int offset = 0;
      while (b.length - offset >= 5) {
        int type = b[offset] & 0xff;
        int major = b[offset + 1] & 0xff;
        int minor = b[offset + 2] & 0xff;
        int length = (b[offset + 3] & 0xff) << 8 | (b[offset + 4] & 0xff);
        boolean good = type >= 20 && type <= 23 && major == 3 && minor <= 4
            && length <= (1 << 14) + 2048;
        if (!good || offset + 5 + length > b.length || poisoned(b, offset + 5, length)) {
          break;
        }
        starts.add(offset);
        out.write(b, offset + 5, length);
        offset += 5 + length;
      }
      starts.add(offset);
      return new Reference(out.toByteArray(), offset,
          starts.stream().mapToInt(Integer::intValue).toArray());
    }

    private static boolean poisoned(byte[] b, int at, int length) {
      for (int i = 0; i < length; i++) {
        if (b[at + i] != TestRecordLayer.POISON) {
          return false;
        }
      }
      return length > 0;
    }
  }
}
