package io.pinless.http2;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.read.ReadBudget;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Property: for random HTTP/2 frame sequences in random reads and batches, the slicer throws
 * nothing, leaks nothing, hands on what a plain parser finds (the same non-DATA frames, and each
 * stream's DATA bytes in order between them) in right-sized buffers, and holds within its bound.
 */
class FrameSlicerFuzzTest {
  private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes();
  /** More streams than joins may be open at once. */
  private static final int[] STREAMS = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19};
  /** Payload lengths at the slicer's thresholds. */
  private static final int[] EDGE_LENGTHS = {0, 1, 8, 9, 10, 1023, 1024, 1025, 4087, 4096, 16384};
  private static final int MAX_FRAMES = 48;
  /** The most one gathered copy or join holds: a header and {@link FrameSlicer#GATHER_BYTES}. */
  private static final int COPY_BOUND = FrameHeader.BYTES + FrameSlicer.GATHER_BYTES;

  /** Keeps what the slicer hands on. */
  private static final class Keep extends ChannelInboundHandlerAdapter {
    final List<ByteBuf> handedOn = new ArrayList<>();

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      handedOn.add((ByteBuf) msg);
    }
  }

  /** An allocator that remembers every buffer it gives, to check each is released. */
  private static final class Recording extends AbstractByteBufAllocator {
    final List<ByteBuf> given = new ArrayList<>();

    Recording() {
      super(true);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
      ByteBuf buf = UnpooledByteBufAllocator.DEFAULT.directBuffer(initialCapacity, maxCapacity);
      given.add(buf);
      return buf;
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
      ByteBuf buf = UnpooledByteBufAllocator.DEFAULT.heapBuffer(initialCapacity, maxCapacity);
      given.add(buf);
      return buf;
    }

    @Override
    public boolean isDirectBufferPooled() {
      return false;
    }

    @Override
    public CompositeByteBuf compositeDirectBuffer(int maxNumComponents) {
      CompositeByteBuf buf = super.compositeDirectBuffer(maxNumComponents);
      given.add(buf);
      return buf;
    }
  }

  @FuzzTest
  void slicesLikeAPlainParser(FuzzedDataProvider data) {
    boolean server = data.consumeBoolean();
    boolean headroom = data.consumeBoolean();
    int maxFrameSize = data.pickValue(new int[] {16384, 16384, 20000, 1 << 16});
    byte[] stream = frames(data, server, maxFrameSize);
    int length = data.consumeBoolean() ? stream.length : data.consumeInt(0, stream.length);

    // Joins may wait across batches as on a pinless connection, given some stream window.
    boolean waits = headroom && data.consumeBoolean();
    long streamWindow = waits ? data.pickValue(new long[] {0, 4096, 65535, 1 << 20}) : 0;
    int waitBound = DataJoins.MAX_JOINS * (FrameHeader.BYTES
        + (int) Math.min(DataJoins.JOIN_CAPACITY, streamWindow / FrameSlicer.WAIT_WINDOW_SHARE));
    ReadBudget budget = new ReadBudget(Long.MAX_VALUE);
    Http2FrameSlicer slicer = waits
        ? new Http2FrameSlicer(server, maxFrameSize, budget, streamWindow)
        : new Http2FrameSlicer(server, maxFrameSize, budget, headroom);
    Keep keep = new Keep();
    EmbeddedChannel ch = new EmbeddedChannel(slicer, keep);
    Recording alloc = new Recording();
    ch.config().setAllocator(alloc);
    List<ByteBuf> reads = new ArrayList<>();
    int fed = 0;
    while (fed < length) {
      int n = Math.min(length - fed, data.remainingBytes() == 0 ? length
          : data.consumeBoolean() ? data.consumeInt(1, 32) : data.consumeInt(1, 40_000));
      int room = headroom && data.consumeBoolean() ? FrameSlicer.HEADROOM_BYTES : 0;
      int extra = data.pickValue(new int[] {0, n, 3 * n, 16384});
      ByteBuf read = alloc.directBuffer(room + n + extra);
      read.writerIndex(room).readerIndex(room).writeBytes(stream, fed, n);
      reads.add(read);
      ch.writeOneInbound(read).syncUninterruptibly();
      fed += n;
      assertTrue(slicer.heldBytes() <= DataJoins.MAX_JOINS * COPY_BOUND
              + heldBound(stream, server, maxFrameSize, fed),
          slicer.heldBytes() + " bytes held within a batch after " + fed);
      if (fed == length || data.consumeBoolean()) {
        ch.flushInbound();
        assertTrue(slicer.heldBytes() <= heldBound(stream, server, maxFrameSize, fed) + waitBound,
            slicer.heldBytes() + " bytes held after a batch ending at " + fed);
      }
    }
    if (waits) {
      // What waits goes on at the next batch's end once nothing may wait: the output is whole.
      slicer.stopWaiting();
      ch.flushInbound();
      assertTrue(slicer.heldBytes() <= heldBound(stream, server, maxFrameSize, length),
          slicer.heldBytes() + " bytes held once nothing waits");
    }
    ch.checkException();

    byte[] out = concatenated(keep.handedOn);
    for (ByteBuf b : keep.handedOn) {
      if (!(b instanceof CompositeByteBuf) && b.unwrap() == null) {
        assertTrue(b.readableBytes() >= b.capacity() - b.capacity() / 8,
            b.readableBytes() + " bytes handed on in a buffer of " + b.capacity());
      }
    }
    byte[] in = Arrays.copyOf(stream, length);
    int skip = server ? PREFACE.length : 0;
    int preface = Math.min(out.length, skip);
    assertArrayEquals(Arrays.copyOf(in, preface), Arrays.copyOf(out, preface), "the preface");
    assertTrue(in.length < skip || out.length >= skip, "a whole preface goes on");
    Parsed want = Parsed.of(in, skip, maxFrameSize);
    Parsed got = Parsed.of(out, preface, maxFrameSize);
    List<String> meaning = want.meaning;
    if (want.cutStream >= 0) {
      meaning = cutFrameMeaning(in, want, got, maxFrameSize, skip);
    }
    assertEquals(meaning, got.meaning);
    if (want.overlong) {
      assertTrue(got.overlong, "an over-long frame goes on as it came");
      assertArrayEquals(Arrays.copyOfRange(in, want.end, in.length),
          Arrays.copyOfRange(out, got.end, out.length));
    } else {
      assertEquals(out.length, got.end, "only whole frames go on");
    }

    keep.handedOn.forEach(ByteBuf::release);
    ch.finishAndReleaseAll();
    assertEquals(0, slicer.heldBytes(), "nothing held after close");
    assertEquals(0, budget.retainedBytes(), "every buffer handed on was released");
    for (ByteBuf b : alloc.given) {
      assertEquals(0, b.refCnt(), "a buffer of " + b.capacity() + " bytes is released");
    }
  }

  /**
   * The meaning to expect when the input ends inside an unpadded DATA frame. What came of it goes
   * on in pieces, less what the slicer keeps: the tail of its stream's DATA since the last frame
   * of another type, at most one gathered copy or, when the frame goes on whole, what came of it.
   */
  private static List<String> cutFrameMeaning(byte[] in, Parsed want, Parsed got,
      int maxFrameSize, int skip) {
    int stream = want.cutStream;
    ByteArrayOutputStream whole = new ByteArrayOutputStream();
    whole.write(in, 0, want.end);
    writeFrame(whole, FrameHeader.TYPE_DATA, 0, stream,
        Arrays.copyOfRange(in, want.end + FrameHeader.BYTES, in.length));
    Parsed all = Parsed.of(whole.toByteArray(), skip, maxFrameSize);
    int held = all.dataBytes.getOrDefault(stream, 0) - got.dataBytes.getOrDefault(stream, 0);
    int received = in.length - want.end - FrameHeader.BYTES;
    assertTrue(held >= 0 && held <= Math.max(COPY_BOUND, received),
        held + " bytes of a cut DATA frame's stream held, " + received + " of it received");
    List<String> meaning = new ArrayList<>(all.meaning);
    if (held > 0) {
      String prefix = "DATA stream " + stream + " ";
      int last = meaning.size() - 1;
      while (!meaning.get(last).startsWith(prefix)) {
        assertTrue(meaning.get(last).startsWith("DATA"), "held bytes follow every other frame");
        last--;
      }
      String data = meaning.get(last);
      assertTrue(data.length() - prefix.length() >= 2 * held && !data.endsWith("]"),
          "held bytes are DATA since the last END_STREAM or padded frame");
      data = data.substring(0, data.length() - 2 * held);
      if (data.length() == prefix.length()) {
        meaning.remove(last);
      } else {
        meaning.set(last, data);
      }
    }
    return meaning;
  }

  /**
   * What the slicer may hold between batches after {@code fed} bytes: nothing at a frame
   * boundary or after an over-long frame; a cut header; inside a frame, the bytes of it received,
   * or one gathered copy.
   */
  private static int heldBound(byte[] stream, boolean server, int maxFrameSize, int fed) {
    int pos = server ? PREFACE.length : 0;
    if (fed < pos) {
      return fed;
    }
    while (pos < fed) {
      if (fed - pos < FrameHeader.BYTES) {
        return fed - pos; // a cut header
      }
      int length = medium(stream, pos);
      if (length > maxFrameSize) {
        return 0; // passed through as it comes
      }
      int end = pos + FrameHeader.BYTES + length;
      if (end > fed) {
        return Math.max(fed - pos, COPY_BOUND);
      }
      pos = end;
    }
    return 0;
  }

  /** A frame stream built from the fuzzer's bytes: valid frames of every type, some hostile. */
  private static byte[] frames(FuzzedDataProvider data, boolean server, int maxFrameSize) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    if (server) {
      out.writeBytes(PREFACE);
    }
    int count = data.consumeInt(0, MAX_FRAMES);
    for (int i = 0; i < count && data.remainingBytes() > 0; i++) {
      int kind = data.consumeInt(0, 15);
      if (kind < 9) {
        int length = dataLength(data, maxFrameSize);
        int flags = data.consumeBoolean() ? FrameHeader.FLAG_END_STREAM : 0;
        byte[] payload = pattern(length, i);
        if (length > 0 && data.consumeInt(0, 5) == 0) {
          flags |= FrameHeader.FLAG_PADDED;
          payload[0] = (byte) data.consumeInt(0, Math.min(255, length - 1));
        }
        writeFrame(out, FrameHeader.TYPE_DATA, flags, data.pickValue(STREAMS), payload);
      } else if (kind < 14) {
        // HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
        // CONTINUATION, or a type HTTP/2 does not know: the slicer treats each alike.
        int type = data.pickValue(new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 0x42});
        int stream = type == 4 || type == 6 || type == 7 ? 0 : data.pickValue(STREAMS);
        writeFrame(out, type, data.consumeInt(0, 255), stream,
            pattern(data.pickValue(new int[] {0, 4, 5, 8, 17, 300, 5000}), i));
      } else if (kind == 14) {
        // A header claiming more than the maximum frame size, then some of its bytes.
        int length = data.consumeInt(maxFrameSize + 1, 0xffffff);
        byte[] f = pattern(FrameHeader.BYTES + data.consumeInt(0, 64), i);
        f[0] = (byte) (length >>> 16);
        f[1] = (byte) (length >>> 8);
        f[2] = (byte) length;
        out.writeBytes(f);
        break;
      } else {
        // A frame of exactly the maximum size.
        writeFrame(out, FrameHeader.TYPE_DATA, 0, data.pickValue(STREAMS),
            pattern(maxFrameSize, i));
      }
    }
    return out.toByteArray();
  }

  private static int dataLength(FuzzedDataProvider data, int maxFrameSize) {
    switch (data.consumeInt(0, 3)) {
      case 0:
        return data.consumeInt(0, 16);
      case 1:
        return data.consumeInt(0, 1100);
      case 2:
        return Math.min(maxFrameSize, data.pickValue(EDGE_LENGTHS));
      default:
        return data.consumeInt(0, maxFrameSize);
    }
  }

  private static void writeFrame(ByteArrayOutputStream out, int type, int flags, int stream,
      byte[] payload) {
    out.write(payload.length >>> 16);
    out.write(payload.length >>> 8);
    out.write(payload.length);
    out.write(type);
    out.write(flags);
    out.write(stream >>> 24);
    out.write(stream >>> 16);
    out.write(stream >>> 8);
    out.write(stream);
    out.writeBytes(payload);
  }

  private static byte[] pattern(int length, int seed) {
    byte[] b = new byte[length];
    for (int i = 0; i < length; i++) {
      b[i] = (byte) (i * 31 + seed * 7 + 1);
    }
    return b;
  }

  private static int medium(byte[] b, int pos) {
    return (b[pos] & 0xff) << 16 | (b[pos + 1] & 0xff) << 8 | (b[pos + 2] & 0xff);
  }

  private static byte[] concatenated(List<ByteBuf> buffers) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (ByteBuf b : buffers) {
      out.writeBytes(ByteBufUtil.getBytes(b));
    }
    return out.toByteArray();
  }

  /**
   * A plain parser's reading of a frame stream, as HTTP/2 flow control and grpc-netty see it:
   * every frame but unpadded DATA exactly, in order; each stream's unpadded DATA bytes (and
   * END_STREAM, as a mark) in order between them, however the frames cut or join them.
   */
  private record Parsed(List<String> meaning, int end, boolean overlong,
      Map<Integer, Integer> dataBytes, int cutStream) {
    static Parsed of(byte[] bytes, int from, int maxFrameSize) {
      List<String> meaning = new ArrayList<>();
      Map<Integer, Integer> dataBytes = new TreeMap<>();
      int cutStream = -1;
      Map<Integer, StringBuilder> pending = new TreeMap<>();
      int pos = from;
      boolean overlong = false;
      while (bytes.length - pos >= FrameHeader.BYTES) {
        int length = medium(bytes, pos);
        if (length > maxFrameSize) {
          overlong = true;
          break;
        }
        int type = bytes[pos + 3] & 0xff;
        int flags = bytes[pos + 4] & 0xff;
        int stream = (bytes[pos + 5] & 0x7f) << 24 | (bytes[pos + 6] & 0xff) << 16
            | (bytes[pos + 7] & 0xff) << 8 | (bytes[pos + 8] & 0xff);
        if (bytes.length - pos - FrameHeader.BYTES < length) {
          if (type == FrameHeader.TYPE_DATA && (flags & FrameHeader.FLAG_PADDED) == 0) {
            cutStream = stream;
          }
          break;
        }
        String payload = HexFormat.of().formatHex(bytes, pos + 9, pos + 9 + length);
        if (type == FrameHeader.TYPE_DATA) {
          StringBuilder s = pending.computeIfAbsent(stream, k -> new StringBuilder());
          if ((flags & FrameHeader.FLAG_PADDED) != 0) {
            s.append("[padded ").append(flags).append(' ').append(payload).append(']');
          } else {
            s.append(payload);
            dataBytes.merge(stream, length, Integer::sum);
            if ((flags & FrameHeader.FLAG_END_STREAM) != 0) {
              s.append("[end]");
            }
          }
        } else {
          flush(pending, meaning);
          meaning.add("type " + type + " flags " + flags + " stream " + stream + " " + payload);
        }
        pos += FrameHeader.BYTES + length;
      }
      flush(pending, meaning);
      return new Parsed(meaning, pos, overlong, dataBytes, cutStream);
    }

    private static void flush(Map<Integer, StringBuilder> pending, List<String> meaning) {
      pending.forEach((stream, s) -> {
        if (s.length() > 0) {
          meaning.add("DATA stream " + stream + " " + s);
        }
      });
      pending.clear();
    }
  }
}
