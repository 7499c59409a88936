package io.pinless.http2;

import static io.pinless.http2.Http2Recording.clientStream;
import static io.pinless.http2.Http2Recording.clientStreamInFrames;
import static io.pinless.http2.Http2Recording.frames;
import static io.pinless.http2.Http2Recording.meaning;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.read.ProcessBudget;
import io.pinless.read.ReadBudget;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class Http2FrameSlicerTest {
  /** Keeps what the slicer hands on (retained) until the test releases it. */
  private static final class Keep extends ChannelInboundHandlerAdapter {
    final List<ByteBuf> handedOn = new ArrayList<>();
    final List<Object> others = new ArrayList<>();

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      if (msg instanceof ByteBuf) {
        handedOn.add((ByteBuf) msg);
      } else {
        others.add(msg);
      }
    }

    byte[] concatenated() {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (ByteBuf b : handedOn) {
        out.writeBytes(ByteBufUtil.getBytes(b));
      }
      return out.toByteArray();
    }

    void releaseAll() {
      handedOn.forEach(ByteBuf::release);
      handedOn.clear();
    }
  }

  private static final class Run {
    final ReadBudget budget = new ReadBudget(Long.MAX_VALUE);
    final Http2FrameSlicer slicer;
    final Keep keep = new Keep();
    final EmbeddedChannel ch;

    /** Whether reads carry the slicer's headroom (and it splits DATA). */
    final boolean headroom;

    Run(boolean server) {
      this(server, false);
    }

    Run(boolean server, boolean headroom) {
      this(server, headroom, FrameSlicer.DEFAULT_MAX_FRAME_SIZE);
    }

    /** The process-wide DATA counters when the run started: tests run one at a time. */
    final long slicedAtStart = Metric.DATA_BYTES_SLICED.value();
    final long copiedAtStart = Metric.DATA_BYTES_COPIED.value();

    Run(boolean server, boolean headroom, int maxFrameSize) {
      this.headroom = headroom;
      slicer = new Http2FrameSlicer(server, maxFrameSize, budget, headroom);
      ch = new EmbeddedChannel(slicer, keep);
    }

    /** A client-side run with headroom whose joins may wait, given {@code streamWindow}. */
    Run(long streamWindow) {
      this.headroom = true;
      slicer =
          new Http2FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, streamWindow);
      ch = new EmbeddedChannel(slicer, keep);
      // The responses' HEADERS came earlier: DATA counts only on open streams.
      ByteBuf opened = InboundMessagesTest.opened(1, 3, 5, 7);
      slicer.messages().read(opened);
      opened.release();
    }

    /** Feeds {@code stream} as two reads, cut at {@code cut}, of one read batch, with headroom. */
    void feedInOneBatch(byte[] stream, int cut) {
      ByteBuf first = PooledByteBufAllocator.DEFAULT.directBuffer(9 + cut);
      first.writerIndex(9).readerIndex(9).writeBytes(stream, 0, cut);
      ByteBuf second = PooledByteBufAllocator.DEFAULT.directBuffer(9 + stream.length - cut);
      second.writerIndex(9).readerIndex(9).writeBytes(stream, cut, stream.length - cut);
      ch.writeInbound(first, second);
    }

    void feed(byte[] stream, int from, int to) {
      int room = headroom ? FrameSlicer.HEADROOM_BYTES : 0;
      ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(room + to - from);
      read.writerIndex(room).readerIndex(room);
      read.writeBytes(stream, from, to - from);
      ch.writeInbound(read);
    }

    /** Checks every buffer handed on holds whole frames (the first: the whole preface). */
    void assertWholeUnits(boolean server) {
      for (int i = 0; i < keep.handedOn.size(); i++) {
        byte[] unit = ByteBufUtil.getBytes(keep.handedOn.get(i));
        if (server && i == 0) {
          assertEquals(24, unit.length, "the preface is handed on alone");
        } else {
          frames(unit, 0);
        }
      }
    }

    /** DATA frame bytes this run's slicer handed on as slices. */
    long slicedDataBytes() {
      return Metric.DATA_BYTES_SLICED.value() - slicedAtStart;
    }

    /** DATA frame bytes this run's slicer copied. */
    long copiedDataBytes() {
      return Metric.DATA_BYTES_COPIED.value() - copiedAtStart;
    }

    void finish() {
      assertEquals(0, slicer.heldBytes());
      keep.releaseAll();
      assertEquals(0, budget.retainedBytes(), "every byte handed on was released");
      ch.finishAndReleaseAll();
    }
  }

  @Test
  void handsOnWholeFramesAtEverySplit() {
    byte[] stream = clientStream(0, 1, 100, 5000, 16383, 16384, 3, 700);
    frames(stream, 24);
    for (int split = 1; split < stream.length; split += split < 200 ? 1 : 37) {
      Run r = new Run(true);
      r.feed(stream, 0, split);
      r.feed(stream, split, stream.length);
      assertArrayEquals(stream, r.keep.concatenated(), "split " + split);
      r.assertWholeUnits(true);
      r.finish();
    }
  }

  @Test
  void withHeadroomSplitsDataCutByAReadIntoWholeDataFramesAtEverySplit() {
    byte[] stream = clientStream(0, 1, 100, 5000, 16383, 16384, 3, 700);
    List<String> meant = meaning(stream, 24);
    for (int split = 1; split < stream.length; split += split < 200 ? 1 : 37) {
      Run r = new Run(true, true);
      r.feed(stream, 0, split);
      r.feed(stream, split, stream.length);
      r.assertWholeUnits(true);
      assertEquals(meant, meaning(r.keep.concatenated(), 24), "split " + split);
      assertEquals(0, r.slicer.heldBytes(), "no DATA byte is held: pieces go on as they come");
      r.finish();
    }
  }

  @Test
  void withHeadroomEveryReadSizeGivesTheSameFrames() {
    byte[] stream = clientStream(0, 1, 100, 5000, 16384, 12);
    List<String> meant = meaning(stream, 24);
    for (int chunk : new int[] {1, 2, 3, 7, 8, 9, 10, 23, 24, 25, 100, 1000, 4096, 16393, 40000}) {
      Run r = new Run(true, true);
      for (int i = 0; i < stream.length; i += chunk) {
        r.feed(stream, i, Math.min(stream.length, i + chunk));
      }
      r.assertWholeUnits(true);
      assertEquals(meant, meaning(r.keep.concatenated(), 24), "read size " + chunk);
      r.finish();
    }
  }

  @Test
  void withHeadroomABulkFrameCutByTwoReadsIsTwoPlainSlicesAndNoCopy() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int dataStart =
        frames(stream, 0).stream().filter(f -> f.length() == 16384).findFirst().orElseThrow().offset();
    int cut = dataStart + 9 + 6000;
    Run r = new Run(false, true);
    for (int[] range : new int[][] {{0, cut}, {cut, stream.length}}) {
      ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(FrameSlicer.HEADROOM_BYTES + range[1] - range[0]);
      read.writerIndex(FrameSlicer.HEADROOM_BYTES).readerIndex(FrameSlicer.HEADROOM_BYTES);
      read.writeBytes(stream, range[0], range[1] - range[0]);
      int before = r.keep.handedOn.size();
      r.ch.writeInbound(read);
      ByteBuf first = r.keep.handedOn.get(before);
      ByteBuf last = r.keep.handedOn.get(r.keep.handedOn.size() - 1);
      if (range[0] == 0) {
        assertEquals(1, r.keep.handedOn.size(),
            "the frames before the cut and the first piece lie together: one slice, one pass");
        assertSame(root(read), root(last), "the read's last run is a slice of the read buffer");
        assertEquals("PooledSlicedByteBuf", messageSliceClass(last),
            "the slice gRPC takes of each message in a read's last run is a recycled pooled slice"
                + " (of the read buffer itself it would be a new object per message)");
      } else {
        assertSame(root(read), root(first), "a run before a copied frame is a slice of the read");
      }
    }
    r.assertWholeUnits(false);
    assertEquals(meaning(stream, 0), meaning(r.keep.concatenated(), 0));
    List<Integer> dataLengths = new ArrayList<>();
    for (ByteBuf unit : r.keep.handedOn) {
      assertEquals(1, unit.nioBufferCount(), "a plain slice, never a composite");
      for (Http2Recording.Frame f : frames(ByteBufUtil.getBytes(unit), 0)) {
        if (f.type() == 0) {
          dataLengths.add(f.length());
        }
      }
    }
    assertEquals(List.of(6000, 10384, 0), dataLengths, "the frame in two pieces, then END_STREAM");
    assertEquals(9, r.copiedDataBytes(), "only the empty END_STREAM frame is copied");
    r.finish();
  }

  /**
   * The class of the slice gRPC's deframer takes of a message in {@code unit}: grpc-netty's frame
   * reader slices a frame and its DATA payload out of what it is handed (not retained), and the
   * deframer takes a retained slice of the payload per message. Leak-detector wrappers removed.
   *
   * @param unit borrowed: its indexes are left as they are
   */
  private static String messageSliceClass(ByteBuf unit) {
    ByteBuf frame = unit.slice(unit.readerIndex(), unit.readableBytes());
    ByteBuf payload = frame.slice(frame.readerIndex() + 9, 100);
    ByteBuf message = payload.retainedSlice(payload.readerIndex(), 10);
    try {
      ByteBuf b = message;
      while (b.getClass().getSimpleName().endsWith("LeakAwareByteBuf")) {
        b = b.unwrap();
      }
      return b.getClass().getSimpleName();
    } finally {
      message.release();
    }
  }

  /**
   * The buffer {@code buf} is a view of, past slices and leak-detection wrappers.
   *
   * @param buf borrowed
   * @return borrowed: no reference is taken
   */
  private static ByteBuf root(ByteBuf buf) {
    while (buf.unwrap() != null) {
      buf = buf.unwrap();
    }
    return buf;
  }

  @Test
  void aReadThatFillsUnderHalfItsBufferHasItsDataCopiedAndItsBufferReleased() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int cut = stream.length - 6000;
    Run r = new Run(false, true);
    ByteBuf full = PooledByteBufAllocator.DEFAULT.directBuffer(16384);
    full.writerIndex(FrameSlicer.HEADROOM_BYTES).readerIndex(FrameSlicer.HEADROOM_BYTES);
    full.writeBytes(stream, 0, cut);
    r.ch.writeInbound(full);
    assertEquals(0, r.copiedDataBytes(), "two thirds of its buffer: the DATA piece is sliced");
    ByteBuf sparse = PooledByteBufAllocator.DEFAULT.directBuffer(49152);
    sparse.writerIndex(FrameSlicer.HEADROOM_BYTES).readerIndex(FrameSlicer.HEADROOM_BYTES);
    sparse.writeBytes(stream, cut, 6000);
    r.ch.writeInbound(sparse);
    assertEquals(0, sparse.refCnt(), "nothing handed on pins the nearly empty buffer");
    // Every DATA byte of the read, and a header for the cut frame's last piece.
    int dataInRead = 0;
    for (Http2Recording.Frame f : frames(stream, 0)) {
      int from = Math.max(cut, f.offset());
      int to = f.offset() + 9 + f.length();
      if (f.type() == 0 && to > from) {
        dataInRead += to - from;
      }
    }
    assertEquals(9 + dataInRead, r.copiedDataBytes());
    r.assertWholeUnits(false);
    assertEquals(meaning(stream, 0), meaning(r.keep.concatenated(), 0));
    r.finish();
  }

  @Test
  void whileTheProcessBudgetIsPressedAReadUnderFourFifthsFullHasItsDataCopied() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int cut = stream.length - 6000;
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget other = new ReadBudget(Long.MAX_VALUE, process);
    ReadBudget budget = new ReadBudget(Long.MAX_VALUE, process);
    other.credit(60_000);
    assertTrue(process.isPressed());
    Keep keep = new Keep();
    EmbeddedChannel ch = new EmbeddedChannel(
        new Http2FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, true), keep);
    long sliced = Metric.DATA_BYTES_SLICED.value();
    long copied = Metric.DATA_BYTES_COPIED.value();
    ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(16384);
    read.writerIndex(FrameSlicer.HEADROOM_BYTES).readerIndex(FrameSlicer.HEADROOM_BYTES);
    read.writeBytes(stream, 0, cut);
    ch.writeInbound(read);
    assertEquals(0, Metric.DATA_BYTES_SLICED.value() - sliced,
        "two thirds of its buffer, sliced unpressed (above), would pin half as much again");
    assertTrue(Metric.DATA_BYTES_COPIED.value() - copied > 10_000, "its DATA is copied");
    keep.releaseAll();
    ch.finishAndReleaseAll();
    budget.releaseAll();
    other.releaseAll();
  }

  /**
   * io_uring's provided-buffer ring hands each read on as a retained slice of one of its large
   * buffers, the ring's own reference dropped: a slice of the DATA in it would keep all of that
   * buffer. The slicer weighs DATA against the buffer the read derives from, and the budget
   * counts that buffer.
   */
  @Test
  void dataInASliceOfALargeTransportBufferIsCopied() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    Run r = new Run(false, false);
    ByteBuf ring = PooledByteBufAllocator.DEFAULT.directBuffer(2 << 20);
    ring.writeBytes(stream);
    ByteBuf read = ring.retainedSlice(0, stream.length);
    ring.release();
    r.ch.writeInbound(read);
    assertEquals(0, r.slicedDataBytes(), "no DATA slice keeps the 2 MiB buffer");
    long dataBytes = frames(stream, 0).stream()
        .filter(f -> f.type() == 0).mapToLong(f -> 9 + f.length()).sum();
    assertEquals(dataBytes, r.copiedDataBytes(), "every DATA frame is copied");
    r.assertWholeUnits(false);
    assertEquals(meaning(stream, 0), meaning(r.keep.concatenated(), 0));
    r.finish();
  }

  @Test
  void theBudgetCountsTheBufferASliceKeeps() {
    ReadBudget budget = new ReadBudget(Long.MAX_VALUE);
    ByteBuf ring = PooledByteBufAllocator.DEFAULT.directBuffer(2 << 20).writeZero(4096);
    ByteBuf slice = ring.retainedSlice(0, 4096);
    ring.release();
    budget.track(slice);
    assertEquals(2 << 20, budget.retainedBytes(), "a 4 KiB slice keeps its 2 MiB buffer");
    slice.release();
    assertEquals(0, budget.retainedBytes());
    budget.releaseAll();
  }

  @Test
  void smallPiecesOfACutFrameWaitGatheredAndGoOnBeforeALargePieceIsSliced() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int dataStart =
        frames(stream, 0).stream().filter(f -> f.length() == 16384).findFirst().orElseThrow().offset();
    int payload = dataStart + 9;
    Run r = new Run(false, true);
    r.feed(stream, 0, payload + 100);
    for (int i = payload + 100; i < payload + 2100; i += 100) {
      r.feed(stream, i, i + 100);
    }
    assertEquals(9 + 2100, r.slicer.heldBytes(), "21 pieces of 100 bytes wait in one copy");
    r.feed(stream, payload + 2100, stream.length);
    assertEquals(0, r.slicer.heldBytes());
    r.assertWholeUnits(false);
    assertEquals(meaning(stream, 0), meaning(r.keep.concatenated(), 0));
    // The gathered pieces with a header of their own, and the empty END_STREAM frame; the
    // frame's large rest is sliced.
    assertEquals(9 + 2100 + 9, r.copiedDataBytes());
    assertEquals(9 + 16384 - 2100, r.slicedDataBytes());
    r.finish();
  }

  @Test
  void withHeadroomButABufferWithoutItThePayloadIsStillSliced() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int cut = stream.length - 8000;
    Run r = new Run(false, true);
    for (int[] range : new int[][] {{0, cut}, {cut, stream.length}}) {
      // As from an io_uring ring, which the read fills.
      ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(range[1] - range[0]);
      read.writeBytes(stream, range[0], range[1] - range[0]);
      r.ch.writeInbound(read);
    }
    r.assertWholeUnits(false);
    assertEquals(meaning(stream, 0), meaning(r.keep.concatenated(), 0));
    assertEquals(9, r.copiedDataBytes(), "only the empty END_STREAM frame is copied");
    r.finish();
  }

  @Test
  void handsOnWholeFramesAtEveryReadSize() {
    byte[] stream = clientStream(0, 1, 100, 5000, 16384, 12);
    for (int chunk : new int[] {1, 2, 3, 7, 8, 9, 10, 23, 24, 25, 100, 1000, 4096, 16393, 40000}) {
      Run r = new Run(true);
      for (int i = 0; i < stream.length; i += chunk) {
        r.feed(stream, i, Math.min(stream.length, i + chunk));
      }
      assertArrayEquals(stream, r.keep.concatenated(), "read size " + chunk);
      r.assertWholeUnits(true);
      r.finish();
    }
  }

  @Test
  void clientSideHasNoPreface() {
    byte[] stream = Arrays.copyOfRange(clientStream(10, 20), 24, clientStream(10, 20).length);
    Run r = new Run(false);
    r.feed(stream, 0, stream.length);
    assertEquals(1, r.keep.handedOn.size(), "one read of whole frames: one buffer");
    assertArrayEquals(stream, r.keep.concatenated());
    r.finish();
  }

  @Test
  void slicesLargeDataAndCopiesSmallDataSoNoSlicePinsMoreThanFourTimesItsSize() {
    byte[] stream = Arrays.copyOfRange(clientStream(100, 16384), 24, clientStream(100, 16384).length);
    List<Http2Recording.Frame> frames = frames(stream, 0);
    // One 32 KiB read buffer holding everything: just over half of it.
    ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(32768);
    read.writeBytes(stream);
    Run r = new Run(false);
    r.ch.writeInbound(read);
    // The empty END_STREAM DATA frame is copied too: an empty slice would pin the buffer.
    assertEquals(9 + 100 + 9, r.copiedDataBytes(), "the 100-byte payload would pin 32 KiB");
    assertEquals(9 + 16384, r.slicedDataBytes());
    assertEquals(2, read.refCnt(), "the read buffer lives on: the DATA slice and the budget hold it");
    // The large DATA frame's slice pins its 32 KiB buffer: at most 4 times its 16384 bytes.
    assertTrue(32768 <= FrameSlicer.PIN_RATIO * 16384);
    assertArrayEquals(stream, r.keep.concatenated());
    assertTrue(r.budget.retainedBytes() >= stream.length);
    r.finish();
    assertEquals(0, read.refCnt(), "released by the budget once the last slice was");
    assertTrue(frames.size() > 3);
  }

  @Test
  void aFrameSpanningReadsIsOneCompositeOfSlices() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int cut = stream.length - 8000;
    Run r = new Run(false);
    r.feed(stream, 0, cut);
    r.feed(stream, cut, stream.length);
    assertArrayEquals(stream, r.keep.concatenated());
    r.assertWholeUnits(false);
    assertEquals(9 + 16384, r.slicedDataBytes(), "both parts sliced, none copied");
    r.finish();
  }

  @Test
  void aBulkFrameCutNearTheEndOfAFullReadIsSlicedFromBothReadsButCopiedFromAHugeOne() {
    byte[] stream = Arrays.copyOfRange(clientStream(16384), 24, clientStream(16384).length);
    int dataStart =
        frames(stream, 0).stream().filter(f -> f.length() == 16384).findFirst().orElseThrow().offset();
    int cut = dataStart + 100; // only the header and 91 payload bytes in the first read
    // A buffer the read fills half of, and one it fills a thousandth of.
    int full = Integer.highestOneBit(cut) * 2;
    for (int capacity : new int[] {full, 262144}) {
      Run r = new Run(false);
      ByteBuf first = PooledByteBufAllocator.DEFAULT.directBuffer(capacity);
      first.writeBytes(stream, 0, cut);
      r.ch.writeInbound(first);
      ByteBuf second = PooledByteBufAllocator.DEFAULT.directBuffer(stream.length - cut);
      second.writeBytes(stream, cut, stream.length - cut);
      r.ch.writeInbound(second);
      assertArrayEquals(stream, r.keep.concatenated());
      r.assertWholeUnits(false);
      if (capacity == full) {
        // The frame is larger than either buffer, which its reads fill: sliced from both; only
        // the empty END_STREAM DATA frame after it is copied.
        assertEquals(9, r.copiedDataBytes());
        assertEquals(9 + 16384, r.slicedDataBytes());
      } else {
        // A 256 KiB buffer is 16 times the frame and nearly empty: its 100 bytes are copied.
        assertEquals(100 + 9, r.copiedDataBytes());
        assertEquals(9 + 16384 - 100, r.slicedDataBytes());
      }
      r.finish();
    }
  }

  @Test
  void anOverlongFrameIsHandedOnAtOnceForGrpcNettyToRefuse() {
    byte[] header = {0, 0x40, 0x01, 0, 0, 0, 0, 0, 1}; // DATA of 16385 bytes: above the maximum
    Run r = new Run(false);
    r.feed(header, 0, 5);
    assertTrue(r.keep.handedOn.isEmpty());
    r.feed(header, 5, 9);
    assertArrayEquals(header, r.keep.concatenated(), "handed on without waiting for the payload");
    r.feed(new byte[] {1, 2, 3}, 0, 3);
    assertEquals(12, r.keep.concatenated().length, "and everything after it, as it comes");
    r.finish();
  }

  @Test
  void withALargerAdvertisedMaximumFramesLongerThanAReadGoOnInPiecesAtEveryReadSize() {
    int max = 65536;
    byte[] stream = clientStreamInFrames(max, 65536, 100, 40000, 70000, 16384, 7);
    List<String> meant = meaning(stream, 24);
    List<Http2Recording.Frame> data =
        frames(stream, 24).stream().filter(f -> f.type() == 0).toList();
    assertTrue(data.stream().anyMatch(f -> f.length() == max), "frames of the larger size");
    // The frames under 16 KiB (100 B, the 4464 B tail of the 70000, 7 B, the empty END_STREAM
    // one), each copied whole or in two pieces with a header each.
    int small =
        data.stream().filter(f -> f.length() < 16384).mapToInt(f -> 2 * 9 + f.length()).sum();
    for (int chunk : new int[] {9, 100, 4096, 16393, 40000, 49152, 65545, 100000}) {
      Run r = new Run(true, true, max);
      for (int i = 0; i < stream.length; i += chunk) {
        r.feed(stream, i, Math.min(stream.length, i + chunk));
      }
      r.assertWholeUnits(true);
      assertEquals(meant, meaning(r.keep.concatenated(), 24), "read size " + chunk);
      if (chunk >= 4096 && 9 + chunk <= FrameSlicer.PIN_RATIO * (9 + 16384)) {
        // Reads of up to 64 KiB: the pieces of the frames of 16 KiB and more are sliced, as the
        // frame is at least a quarter of the read buffer, but for pieces under GATHER_BYTES,
        // gathered into a copy: at most one such piece where a read ends.
        int gatheredAtMost = (stream.length / chunk + 1) * (9 + FrameSlicer.GATHER_BYTES);
        assertTrue(r.copiedDataBytes() <= small + gatheredAtMost,
            "read size " + chunk + ": copied " + r.copiedDataBytes() + " > " + small + " + "
                + gatheredAtMost);
      }
      assertEquals(0, r.slicer.heldBytes(), "no DATA byte is held once the frames are whole");
      r.finish();
    }
  }

  @Test
  void anOverlongFrameAboveALargerAdvertisedMaximumIsHandedOnAtOnce() {
    byte[] allowed = {1, 0, 0, 0, 0, 0, 0, 0, 1}; // DATA of 65536 bytes: the maximum, accepted
    byte[] header = {1, 0, 1, 0, 0, 0, 0, 0, 1}; // DATA of 65537 bytes: above it
    Run r = new Run(false, true, 65536);
    r.feed(allowed, 0, 9);
    assertTrue(r.keep.handedOn.isEmpty(), "a frame within the maximum waits for its payload");
    r.feed(new byte[65536], 0, 65536);
    r.feed(header, 0, 9);
    assertEquals(9 + 65536 + 9, r.keep.concatenated().length,
        "the over-long frame's header is handed on without waiting for its payload");
    r.finish();
  }

  @Test
  void releasesAPartialFrameOnClose() {
    byte[] stream = Arrays.copyOfRange(clientStream(9000), 24, clientStream(9000).length);
    Run r = new Run(false);
    r.feed(stream, 0, stream.length - 10);
    assertTrue(r.slicer.heldBytes() > 0);
    r.ch.close();
    r.finish();
  }

  @Test
  void survivesRandomStreamsAndSplits() {
    SplittableRandom random = new SplittableRandom(0x5117ce);
    for (int iteration = 0; iteration < 300; iteration++) {
      int[] sizes = new int[1 + random.nextInt(6)];
      for (int i = 0; i < sizes.length; i++) {
        sizes[i] = random.nextInt(3) == 0 ? random.nextInt(16385) : random.nextInt(300);
      }
      byte[] stream = clientStream(sizes);
      if (random.nextInt(4) == 0) {
        stream[24 + random.nextInt(stream.length - 24)] ^= (byte) random.nextInt(1, 256);
      }
      boolean mutated = !Arrays.equals(stream, clientStream(sizes));
      Run r = new Run(true, random.nextBoolean());
      int pos = 0;
      while (pos < stream.length) {
        int n = Math.min(stream.length - pos, 1 + random.nextInt(random.nextBoolean() ? 30 : 70000));
        r.feed(stream, pos, pos + n);
        pos += n;
      }
      byte[] out = r.keep.concatenated();
      if (!r.headroom) {
        assertTrue(out.length <= stream.length);
        assertArrayEquals(Arrays.copyOf(stream, out.length), out, "iteration " + iteration);
      } else if (!mutated) {
        assertEquals(meaning(stream, 24), meaning(out, 24), "iteration " + iteration);
      }
      r.ch.close();
      r.finish();
    }
  }

  /** A frame's bytes: header, then {@code payload}. */
  private static byte[] frame(int type, int flags, int stream, byte[] payload) {
    byte[] f = new byte[9 + payload.length];
    f[0] = (byte) (payload.length >>> 16);
    f[1] = (byte) (payload.length >>> 8);
    f[2] = (byte) payload.length;
    f[3] = (byte) type;
    f[4] = (byte) flags;
    f[5] = (byte) (stream >>> 24);
    f[6] = (byte) (stream >>> 16);
    f[7] = (byte) (stream >>> 8);
    f[8] = (byte) stream;
    System.arraycopy(payload, 0, f, 9, payload.length);
    return f;
  }

  private static byte[] concat(List<byte[]> parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    parts.forEach(out::writeBytes);
    return out.toByteArray();
  }

  /** Each stream's DATA payload in {@code bytes} (whole frames), in order, and its frame sizes. */
  private static Map<Integer, ByteArrayOutputStream> dataByStream(
      byte[] bytes, Map<Integer, List<Integer>> lengths) {
    Map<Integer, ByteArrayOutputStream> data = new TreeMap<>();
    for (Http2Recording.Frame f : frames(bytes, 0)) {
      if (f.type() == 0) {
        int stream = java.nio.ByteBuffer.wrap(bytes, f.offset() + 5, 4).getInt();
        data.computeIfAbsent(stream, k -> new ByteArrayOutputStream())
            .write(bytes, f.offset() + 9, f.length());
        lengths.computeIfAbsent(stream, k -> new ArrayList<>()).add(f.length());
      }
    }
    return data;
  }

  @Test
  void smallDataFramesOfStreamsTakingTurnsGoOnJoinedPerStream() {
    List<byte[]> parts = new ArrayList<>();
    for (int i = 0; i < 500; i++) {
      for (int stream : new int[] {1, 3, 5}) {
        parts.add(frame(0, 0, stream, Http2Recording.pattern(10, i + stream)));
      }
    }
    parts.add(frame(0, 1, 3, Http2Recording.pattern(7, 99)));
    parts.add(frame(3, 0, 5, new byte[] {0, 0, 0, 8})); // RST_STREAM of stream 5
    byte[] stream = concat(parts);
    Run r = new Run(false, true);
    r.feed(stream, 0, stream.length);
    assertEquals(0, r.slicer.heldBytes(), "a join never waits for another read batch");
    r.assertWholeUnits(false);
    Map<Integer, List<Integer>> sent = new TreeMap<>();
    Map<Integer, List<Integer>> handed = new TreeMap<>();
    Map<Integer, ByteArrayOutputStream> want = dataByStream(stream, sent);
    Map<Integer, ByteArrayOutputStream> got = dataByStream(r.keep.concatenated(), handed);
    for (int s : want.keySet()) {
      assertArrayEquals(want.get(s).toByteArray(), got.get(s).toByteArray(), "stream " + s);
      List<Integer> lengths = handed.get(s);
      for (int i = 0; i < lengths.size() - 1; i++) {
        assertTrue(lengths.get(i) >= FrameSlicer.JOIN_BYTES, "stream " + s + ": " + lengths);
      }
      assertTrue(lengths.size() <= 3, "10-byte frames go on as a few joined ones: " + lengths);
    }
    List<String> meant = meaning(r.keep.concatenated(), 0);
    List<String> stream3 = meant.stream().filter(m -> m.startsWith("DATA stream 3")).toList();
    assertTrue(stream3.get(stream3.size() - 1).startsWith("DATA stream 3 ended"),
        "END_STREAM ends the last joined frame");
    assertEquals(1, meant.stream().filter(m -> m.contains("ended")).count());
    assertTrue(meant.get(meant.size() - 1).startsWith("type 3 flags 0 stream 5"),
        "a stream's joined DATA goes on before the frames after it");
    r.finish();
  }

  /** A gRPC message's 5-byte prefix for {@code length} bytes, uncompressed. */
  private static byte[] grpcPrefix(int length) {
    return new byte[] {0, (byte) (length >>> 24), (byte) (length >>> 16), (byte) (length >>> 8),
        (byte) length};
  }

  /** DATA payload bytes handed on so far for {@code stream}, frame by frame. */
  private static List<Integer> handedLengths(Run r, int stream) {
    Map<Integer, List<Integer>> handed = new TreeMap<>();
    dataByStream(r.keep.concatenated(), handed);
    return handed.getOrDefault(stream, List.of());
  }

  @Test
  void smallFramesOfAnIncompleteMessageWaitAcrossBatchesUntilTheirJoinIsFull() {
    Run r = new Run(1 << 20);
    byte[] first = frame(0, 0, 1, concat(List.of(grpcPrefix(9000), Http2Recording.pattern(95, 1))));
    r.feed(first, 0, first.length);
    assertEquals(List.of(), handedLengths(r, 1), "100 bytes of a 9005-byte message wait");
    assertEquals(9 + 100, r.slicer.heldBytes(), "a header's room and the payload wait");
    for (int i = 0; i < 39; i++) {
      byte[] f = frame(0, 0, 1, Http2Recording.pattern(100, i + 2));
      r.feed(f, 0, f.length);
    }
    assertEquals(List.of(), handedLengths(r, 1), "4000 bytes still wait, one batch after another");
    assertEquals(9 + 4000, r.slicer.heldBytes());
    byte[] f = frame(0, 0, 1, Http2Recording.pattern(100, 50));
    r.feed(f, 0, f.length);
    assertEquals(List.of(4000), handedLengths(r, 1), "a full join goes on as one frame");
    assertEquals(9 + 100, r.slicer.heldBytes(), "the next one waits");
    r.ch.close();
    r.finish();
  }

  @Test
  void theLastBytesOfAMessageNeverWait() {
    Run r = new Run(1 << 20);
    byte[] first = frame(0, 0, 1, concat(List.of(grpcPrefix(150), Http2Recording.pattern(50, 1))));
    r.feed(first, 0, first.length);
    assertEquals(List.of(), handedLengths(r, 1));
    // Completes the message and starts the next: the join holds a whole message's end.
    byte[] second = frame(0, 0, 1, concat(List.of(Http2Recording.pattern(100, 2), grpcPrefix(9))));
    r.feed(second, 0, second.length);
    assertEquals(List.of(160), handedLengths(r, 1), "a message's end goes on at its batch's end");
    assertEquals(0, r.slicer.heldBytes());
    r.finish();
  }

  @Test
  void aJoinWaitsOnlyWhileSmallAgainstTheStreamWindow() {
    Run r = new Run(4096);
    byte[] small =
        frame(0, 0, 1, concat(List.of(grpcPrefix(5000), Http2Recording.pattern(395, 1))));
    r.feed(small, 0, small.length);
    assertEquals(List.of(), handedLengths(r, 1), "400 bytes are under 1/8 of a 4 KiB window");
    byte[] more = frame(0, 0, 1, Http2Recording.pattern(200, 2));
    r.feed(more, 0, more.length);
    assertEquals(List.of(600), handedLengths(r, 1), "600 bytes are not: they go on");
    r.finish();

    Run unknown = new Run(0);
    unknown.feed(small, 0, small.length);
    assertEquals(List.of(400), handedLengths(unknown, 1), "an unknown window: nothing waits");
    unknown.finish();
  }

  @Test
  void aWaitingJoinGoesOnBeforeTheNextFrameThatIsNotData() {
    Run r = new Run(1 << 20);
    byte[] data = frame(0, 0, 3, concat(List.of(grpcPrefix(5000), Http2Recording.pattern(45, 1))));
    r.feed(data, 0, data.length);
    assertEquals(List.of(), handedLengths(r, 3));
    byte[] ping = frame(6, 0, 0, new byte[8]);
    r.feed(ping, 0, ping.length);
    List<String> meant = meaning(r.keep.concatenated(), 0);
    assertEquals(2, meant.size(), meant.toString());
    assertTrue(meant.get(0).startsWith("DATA stream 3"), meant.toString());
    assertTrue(meant.get(1).startsWith("type 6"), meant.toString());
    r.finish();
  }

  /**
   * An empty DATA frame of a stream with no message under way goes on at its batch's end: a
   * connection with no incomplete message holds nothing between batches. Found by
   * FrameSlicerFuzzTest: a join of no bytes waited, even with nothing allowed to.
   */
  @Test
  void anEmptyJoinNeverWaits() {
    Run r = new Run(1 << 20);
    byte[] empty = frame(0, 0, 1, new byte[0]);
    r.feed(empty, 0, empty.length);
    assertEquals(0, r.slicer.heldBytes(), "nothing waits");
    assertEquals(List.of(0), handedLengths(r, 1));
    r.finish();
  }

  @Test
  void aWaitingJoinIsReleasedWithTheChannel() {
    Run r = new Run(1 << 20);
    byte[] data = frame(0, 0, 1, concat(List.of(grpcPrefix(5000), Http2Recording.pattern(45, 1))));
    r.feed(data, 0, data.length);
    assertTrue(r.slicer.heldBytes() > 0);
    r.ch.close();
    assertEquals(0, r.slicer.heldBytes());
    r.finish();
  }

  @Test
  void aJoinTakesTheHeadOfALargerFrameOfItsStreamAndTheRestIsSliced() {
    byte[] stream = concat(List.of(frame(0, 0, 1, Http2Recording.pattern(100, 1)),
        frame(0, 0, 1, Http2Recording.pattern(100, 2)),
        frame(0, 1, 1, Http2Recording.pattern(16384, 3))));
    Run r = new Run(false, true);
    r.feed(stream, 0, stream.length);
    Map<Integer, List<Integer>> handed = new TreeMap<>();
    Map<Integer, ByteArrayOutputStream> got = dataByStream(r.keep.concatenated(), handed);
    assertEquals(List.of(FrameSlicer.JOIN_BYTES, 200 + 16384 - FrameSlicer.JOIN_BYTES),
        handed.get(1));
    assertArrayEquals(dataByStream(stream, new TreeMap<>()).get(1).toByteArray(),
        got.get(1).toByteArray());
    assertEquals(meaning(stream, 0), meaning(r.keep.concatenated(), 0));
    assertEquals(9 + 16384 - (FrameSlicer.JOIN_BYTES - 200), r.slicedDataBytes(),
        "the rest of the large frame is a slice of the read");
    r.finish();
  }

  @Test
  void joinsSpanTheReadsOfOneBatchAndACutFrameKeepsBackEnoughForItsLastPiece() {
    List<byte[]> parts = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      parts.add(frame(0, 0, 1, Http2Recording.pattern(10, i)));
    }
    parts.add(frame(0, 0, 1, Http2Recording.pattern(16384, 7)));
    for (int i = 0; i < 60; i++) {
      parts.add(frame(0, 0, 1, Http2Recording.pattern(10, i)));
    }
    byte[] stream = concat(parts);
    int cut = 60 * 19 + 9 + 16374; // the large frame's last 10 bytes go in the second read
    Run r = new Run(false, true);
    r.feedInOneBatch(stream, cut);
    assertEquals(0, r.slicer.heldBytes());
    r.assertWholeUnits(false);
    Map<Integer, List<Integer>> handed = new TreeMap<>();
    Map<Integer, ByteArrayOutputStream> got = dataByStream(r.keep.concatenated(), handed);
    assertArrayEquals(dataByStream(stream, new TreeMap<>()).get(1).toByteArray(),
        got.get(1).toByteArray());
    int join = FrameSlicer.JOIN_BYTES;
    assertEquals(List.of(join, 16374 - (join - 600) - (join - 10), join, 600), handed.get(1),
        "the joined small frames take the large frame's head; its first piece keeps back what"
            + " its 10-byte last piece needs to go on JOIN_BYTES long; the small frames after it"
            + " join, in the next read of the batch");
    r.finish();
  }

  /**
   * A message may start in the last bytes of any piece, and gRPC copies two small pieces in a
   * row: a cut frame's rest that comes alone, in a batch of its own, still goes on JOIN_BYTES long.
   */
  @Test
  void aCutFramesSmallRestInABatchOfItsOwnGoesOnJoinBytesLong() {
    byte[] stream = concat(List.of(frame(0, 0, 1, Http2Recording.pattern(16384, 3)),
        frame(0, 0, 1, Http2Recording.pattern(16384, 4))));
    for (int rest : new int[] {1, 10, FrameSlicer.JOIN_BYTES - 1}) {
      Run r = new Run(false, true);
      int cut = 9 + 16384 - rest;
      r.feed(stream, 0, cut);
      r.feed(stream, cut, 9 + 16384);
      r.feed(stream, 9 + 16384, stream.length);
      Map<Integer, List<Integer>> handed = new TreeMap<>();
      Map<Integer, ByteArrayOutputStream> got = dataByStream(r.keep.concatenated(), handed);
      assertArrayEquals(dataByStream(stream, new TreeMap<>()).get(1).toByteArray(),
          got.get(1).toByteArray());
      assertEquals(List.of(16384 - FrameSlicer.JOIN_BYTES, FrameSlicer.JOIN_BYTES, 16384),
          handed.get(1), "rest " + rest);
      assertEquals(9 + FrameSlicer.JOIN_BYTES, r.copiedDataBytes(),
          "only the last piece is copied: rest " + rest);
      r.finish();
    }
  }

  @Test
  void aReadEndingInsideAFrameHeaderLeavesTheJoinsOpenForThatFrame() {
    List<byte[]> parts = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      parts.add(frame(0, 0, 1, Http2Recording.pattern(10, i)));
    }
    byte[] stream = concat(parts);
    int cut = 49 * 19 + 4; // inside the 50th frame's header, after 490 joined bytes
    Run r = new Run(false, true);
    r.feedInOneBatch(stream, cut);
    assertEquals(0, r.slicer.heldBytes());
    Map<Integer, List<Integer>> handed = new TreeMap<>();
    Map<Integer, ByteArrayOutputStream> got = dataByStream(r.keep.concatenated(), handed);
    assertArrayEquals(dataByStream(stream, new TreeMap<>()).get(1).toByteArray(),
        got.get(1).toByteArray());
    assertEquals(List.of(2000), handed.get(1), "one join across the cut header");
    r.finish();
  }

  /**
   * A hostile peer sends 1-byte DATA frames taking turns across streams, and reads cut them
   * anywhere. A join that a cut frame takes over still goes on in a buffer at most 1/8 larger than
   * its bytes: gRPC holds every piece until its message is whole, so a 4 KiB buffer carrying 1 KiB
   * would cost four bytes per payload byte.
   */
  @Test
  void joinsTakenOverByCutFramesGoOnRightSized() {
    List<byte[]> parts = new ArrayList<>();
    for (int i = 0; i < 3000; i++) {
      for (int stream : new int[] {1, 3, 5, 7}) {
        parts.add(frame(0, 0, stream, new byte[] {(byte) (i + stream)}));
      }
    }
    byte[] stream = concat(parts);
    Run r = new Run(false, true);
    List<ByteBuf> reads = new ArrayList<>();
    for (int from = 0; from < stream.length; from += 7) {
      int n = Math.min(7, stream.length - from);
      ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(FrameSlicer.HEADROOM_BYTES + n);
      read.writerIndex(FrameSlicer.HEADROOM_BYTES).readerIndex(FrameSlicer.HEADROOM_BYTES);
      reads.add(read.writeBytes(stream, from, n));
    }
    r.ch.writeInbound(reads.toArray());
    assertEquals(dataByStream(stream, new TreeMap<>()).get(5).toString(),
        dataByStream(r.keep.concatenated(), new TreeMap<>()).get(5).toString());
    for (ByteBuf out : r.keep.handedOn) {
      assertTrue(out.readableBytes() >= out.capacity() - out.capacity() / 8,
          out.readableBytes() + " bytes handed on in a buffer of " + out.capacity());
    }
    r.finish();
  }

  @Test
  void passesOtherMessagesThrough() {
    Run r = new Run(false);
    r.ch.writeInbound("event");
    assertEquals(List.of("event"), r.keep.others);
    r.finish();
  }
}
