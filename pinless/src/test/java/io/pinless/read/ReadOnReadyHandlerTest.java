package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.concurrent.TimeUnit;
import io.pinless.testing.ReadCounter;
import org.junit.jupiter.api.Test;

class ReadOnReadyHandlerTest {
  /** Behaves like Http2ConnectionHandler with AUTO_READ off: asks for a read after each batch. */
  private static final class AsksForReads extends ChannelInboundHandlerAdapter {
    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      ctx.read();
      ctx.fireChannelReadComplete();
    }
  }

  /** The headroom a stage above asks for: an HTTP/2 frame header. */
  private static final int HEADROOM = 9;

  private static final class Setup {
    final ReadCounter counter = new ReadCounter();
    /** The read requests made by the handlers behind the read handler. */
    final ReadCounter asked = new ReadCounter();
    final ReadBudget budget = new ReadBudget(1000);
    final ReadOnReadyHandler handler;
    final EmbeddedChannel ch = new EmbeddedChannel();

    Setup(boolean holdWhileUnwritable) {
      handler = new ReadOnReadyHandler(budget, holdWhileUnwritable);
      handler.policy().headroom(HEADROOM);
      ch.pipeline().addLast(counter, handler, asked, new AsksForReads());
    }
  }

  @Test
  void turnsAutoReadOffAndSetsTheReadSizePolicy() {
    Setup s = new Setup(false);
    assertFalse(s.ch.config().isAutoRead());
    RecvByteBufAllocator.Handle handle = s.ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(s.ch.config());
    assertEquals(io.pinless.read.ReadPolicy.MAX_READ_BYTES, handle.guess(), "reads start at the maximum");
    assertTrue(handle instanceof RecvByteBufAllocator.ExtendedHandle, "epoll needs the extended one");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void readsAreAtMostTheMaximumGiven() {
    EmbeddedChannel ch = new EmbeddedChannel();
    ReadOnReadyHandler reads = new ReadOnReadyHandler(new ReadBudget(1000), false, 32768);
    ch.pipeline().addLast(reads);
    RecvByteBufAllocator.Handle handle = ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    assertEquals(32768, handle.guess());
    ByteBuf buf = handle.allocate(io.netty.buffer.PooledByteBufAllocator.DEFAULT);
    try {
      assertEquals(32768, buf.capacity());
      assertEquals(0, buf.readerIndex(), "no headroom unless a stage above asks for it");
    } finally {
      buf.release();
    }
    reads.policy().headroom(HEADROOM);
    buf = handle.allocate(io.netty.buffer.PooledByteBufAllocator.DEFAULT);
    try {
      assertEquals(HEADROOM, buf.readerIndex(), "the headroom asked for");
      assertEquals(HEADROOM, buf.writerIndex());
    } finally {
      buf.release();
    }
    ch.finishAndReleaseAll();
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> new ReadOnReadyHandler(new ReadBudget(1000), false, 65537));
  }

  /** A stage above that sizes every fresh read and counts the reads it did not size. */
  private static final class SizingTarget implements ReadPolicy.ReadTarget {
    final int readBytes;
    /** The buffer sizes of the reads the transport sized, in order. */
    final java.util.List<Integer> transportSized = new java.util.ArrayList<>();

    SizingTarget(int readBytes) {
      this.readBytes = readBytes;
    }

    @Override
    public ByteBuf nextReadBuffer() {
      return null;
    }

    @Override
    public int nextReadBytes() {
      return readBytes;
    }

    @Override
    public void readSizedByTransport(int bytes) {
      transportSized.add(bytes);
    }
  }

  @Test
  void aReadAStageSizesCanGrowInPlaceToTheNextSizeClass() {
    EmbeddedChannel ch = new EmbeddedChannel();
    ReadOnReadyHandler reads = new ReadOnReadyHandler(new ReadBudget(1000), false);
    ch.pipeline().addLast(reads);
    reads.policy().target(new SizingTarget(128 * 1024));
    RecvByteBufAllocator.Handle handle = ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    ByteBuf buf = handle.allocate(io.netty.buffer.PooledByteBufAllocator.DEFAULT);
    try {
      assertEquals(128 * 1024, buf.writableBytes(), "the read is the size asked for");
      assertEquals(160 * 1024, buf.maxFastWritableBytes(), "the pool's next size class");
    } finally {
      buf.release();
    }
    ch.finishAndReleaseAll();
  }

  @Test
  void aReadWhoseBufferTheTransportPickedIsToldToTheStageAbove() {
    EmbeddedChannel ch = new EmbeddedChannel();
    ReadOnReadyHandler reads = new ReadOnReadyHandler(new ReadBudget(1000), false);
    ch.pipeline().addLast(reads);
    SizingTarget target = new SizingTarget(4096);
    reads.policy().target(target);
    RecvByteBufAllocator.Handle handle = ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    // NIO, epoll, io_uring without a ring: the policy's buffer.
    ByteBuf buf = handle.allocate(io.netty.buffer.PooledByteBufAllocator.DEFAULT);
    read(handle, buf.writableBytes(), 100);
    buf.release();
    assertEquals(java.util.List.of(), target.transportSized);
    // io_uring with a provided-buffer ring: the kernel's buffer, no allocate.
    read(handle, 2 << 20, 100);
    read(handle, 65536, 100);
    assertEquals(java.util.List.of(2 << 20, 65536), target.transportSized);
    ch.finishAndReleaseAll();
  }

  /** One read of a batch: {@code got} of the {@code asked} bytes. */
  private static void read(RecvByteBufAllocator.Handle handle, int asked, int got) {
    handle.attemptedBytesRead(asked);
    handle.lastBytesRead(got);
    handle.incMessagesRead(1);
  }

  /** One batch of one read: {@code got} of what the handle offers. */
  private static void batch(RecvByteBufAllocator.Handle handle, int got, ChannelConfig config) {
    handle.reset(config);
    read(handle, handle.guess() - HEADROOM, got);
    handle.readComplete();
  }

  @Test
  void aShortReadSizesTheNextToWhatItGotAndAFullReadGoesBackToTheMaximum() {
    Setup s = new Setup(false);
    ChannelConfig config = s.ch.config();
    RecvByteBufAllocator.Handle handle = config.getRecvByteBufAllocator().newHandle();
    int max = ReadPolicy.MAX_READ_BYTES;
    batch(handle, 38_000, config);
    assertEquals(40 * 1024, handle.guess(), "the pool's size class of what came and the headroom");
    batch(handle, 38_000, config);
    assertEquals(40 * 1024, handle.guess(), "bursts of the same size keep their buffer size");
    batch(handle, 100, config);
    assertEquals(20 * 1024, handle.guess(), "a read shrinks at most by half per batch");
    for (int i = 0; i < 40; i++) {
      batch(handle, 1, config);
    }
    assertEquals(ReadPolicy.MIN_READ_BYTES, handle.guess(), "never below the minimum");
    batch(handle, handle.guess() - HEADROOM, config);
    assertEquals(max, handle.guess(), "a full read goes back to the maximum at once");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void aBatchOfAFullReadAndAShortOneSizesTheNextToWhatTheWholeBatchGot() {
    Setup s = new Setup(false);
    ChannelConfig config = s.ch.config();
    RecvByteBufAllocator.Handle handle = config.getRecvByteBufAllocator().newHandle();
    for (int i = 0; i < 4; i++) {
      batch(handle, 10_000, config);
    }
    assertEquals(10 * 1024, handle.guess());
    handle.reset(config);
    read(handle, handle.guess() - HEADROOM, handle.guess() - HEADROOM);
    assertTrue(handle.continueReading(), "a full read: the socket may hold more");
    read(handle, handle.guess() - HEADROOM, 20_000);
    handle.readComplete();
    assertEquals(ReadPolicy.sizeClass(HEADROOM + 10 * 1024 - HEADROOM + 20_000), handle.guess(),
        "one buffer for a burst of that size: the next takes one read");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void aBatchGoesOnWhileReadsFillTheirBuffersUpToSixteenAndStopsAtAHold() {
    Setup s = new Setup(false);
    RecvByteBufAllocator.Handle handle = s.ch.config().getRecvByteBufAllocator().newHandle();
    // With AUTO_READ off, Netty's own handle would stop after the first read.
    handle.reset(s.ch.config());
    read(handle, 32768, 32768);
    assertTrue(handle.continueReading(), "a full buffer: the socket may hold more");
    read(handle, 32768, 100);
    assertFalse(handle.continueReading(), "a short read drained the socket");

    handle.reset(s.ch.config());
    for (int i = 1; i < ReadPolicy.MAX_READS_PER_BATCH; i++) {
      read(handle, 32768, 32768);
      assertTrue(handle.continueReading(), "read " + i);
    }
    read(handle, 32768, 32768);
    assertFalse(handle.continueReading(), "at most sixteen reads per batch");

    handle.reset(s.ch.config());
    read(handle, 32768, 32768);
    ByteBuf slice = handedOn(s);
    assertFalse(handle.continueReading(), "the budget is exceeded: stop at once");
    assertFalse(
        ((RecvByteBufAllocator.ExtendedHandle) handle).continueReading(() -> true),
        "and through epoll's entry point too");
    slice.release();
    assertTrue(((RecvByteBufAllocator.ExtendedHandle) handle).continueReading(() -> true));
    s.ch.finishAndReleaseAll();
  }

  @Test
  void isTheOnlyOwnerOfReads() {
    Setup s = new Setup(false);
    assertEquals(1, s.counter.reads, "one read when added to an active channel");
    for (int batch = 0; batch < 5; batch++) {
      s.ch.pipeline().fireChannelRead(Unpooled.EMPTY_BUFFER);
      s.ch.pipeline().fireChannelReadComplete();
    }
    assertEquals(6, s.counter.reads, "exactly one read per batch reaches the channel");
    assertEquals(5, s.asked.reads, "the handler behind asked five times, each in vain");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void removedFromAnOpenChannelItHandsTheReadsBackWithTheReadItHeld() {
    Setup s = new Setup(false);
    ByteBuf slice = handedOn(s);
    s.ch.pipeline().fireChannelReadComplete();
    assertTrue(s.handler.policy().isHoldingRead());
    int reads = s.counter.reads;
    s.ch.pipeline().remove(s.handler);
    assertTrue(s.ch.config().isAutoRead(), "AUTO_READ as it was before the handler came");
    assertFalse(s.ch.config().getRecvByteBufAllocator() instanceof ReadPolicy);
    assertEquals(reads + 1, s.counter.reads, "the channel reads again");
    slice.release();
    s.ch.finishAndReleaseAll();
  }

  @Test
  void removedFromAChannelWhoseHandlersReadByHandItReadsOnceForTheirSwallowedRequests() {
    EmbeddedChannel ch = new EmbeddedChannel();
    ch.config().setAutoRead(false);
    ReadCounter counter = new ReadCounter();
    ReadOnReadyHandler handler = new ReadOnReadyHandler(new ReadBudget(1000), false);
    ch.pipeline().addLast(counter, handler, new AsksForReads());
    ch.pipeline().fireChannelReadComplete();
    int reads = counter.reads;
    ch.pipeline().remove(handler);
    assertFalse(ch.config().isAutoRead(), "AUTO_READ stays off, as it was");
    assertEquals(reads + 1, counter.reads);
    ch.finishAndReleaseAll();
  }

  /**
   * A read buffer of 1001 bytes (over the 1000-byte budget) that downstream holds a slice of.
   *
   * @return owned: the slice downstream holds; releasing it lets the budget's sweep free the read
   */
  private static ByteBuf handedOn(Setup s) {
    ByteBuf read = Unpooled.directBuffer(1001);
    s.budget.track(read);
    ByteBuf slice = read.retainedSlice();
    read.release(); // as the slicer does when it is done with the read
    return slice;
  }

  @Test
  void holdsReadsWhileTheBudgetIsExceededAndResumesOnTheSweepAfterRelease() {
    Setup s = new Setup(false);
    s.ch.freezeTime();
    ByteBuf slice = handedOn(s);
    s.ch.pipeline().fireChannelReadComplete();
    assertEquals(1, s.counter.reads);
    assertTrue(s.handler.policy().isHoldingRead());
    s.ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    s.ch.runScheduledPendingTasks();
    assertEquals(1, s.counter.reads, "still held downstream: still held here");
    ByteBuf read = slice.unwrap();
    slice.release();
    assertEquals(1, read.refCnt(), "only the budget's reference is left");
    s.ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    s.ch.runScheduledPendingTasks();
    assertEquals(2, s.counter.reads, "resumed by the sweep once downstream released");
    assertFalse(s.handler.policy().isHoldingRead());
    assertEquals(0, read.refCnt(), "the sweep gave the read buffer back");
    assertEquals(0, s.budget.retainedBytes());
    s.ch.finishAndReleaseAll();
  }

  @Test
  void aFlushResumesAHeldReadAtOnce() {
    Setup s = new Setup(false);
    ByteBuf slice = handedOn(s);
    s.ch.pipeline().fireChannelReadComplete();
    assertTrue(s.handler.policy().isHoldingRead());
    slice.release();
    s.ch.flush(); // gRPC flushes a WINDOW_UPDATE when the application consumes
    assertEquals(2, s.counter.reads);
    s.ch.finishAndReleaseAll();
  }

  @Test
  void givesUpTheBudgetsReferencesWhenTheChannelCloses() {
    Setup s = new Setup(false);
    ByteBuf slice = handedOn(s);
    ByteBuf read = slice.unwrap();
    s.ch.close();
    assertEquals(1, read.refCnt(), "downstream's slice is all that is left");
    slice.release();
    assertEquals(0, read.refCnt());
    s.ch.finishAndReleaseAll();
  }

  @Test
  void holdsReadsWhileUnwritableWhenAskedTo() {
    Setup s = new Setup(true);
    s.ch.config().setWriteBufferWaterMark(new WriteBufferWaterMark(1, 2));
    s.ch.write(Unpooled.wrappedBuffer(new byte[16]));
    assertFalse(s.ch.isWritable());
    s.ch.pipeline().fireChannelReadComplete();
    assertEquals(1, s.counter.reads, "held: not writable");
    s.ch.flush(); // drains to the embedded channel's outbound queue: writable again
    assertTrue(s.ch.isWritable());
    assertEquals(2, s.counter.reads, "resumed when writable");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void ignoresWritabilityByDefault() {
    Setup s = new Setup(false);
    s.ch.config().setWriteBufferWaterMark(new WriteBufferWaterMark(1, 2));
    s.ch.write(Unpooled.wrappedBuffer(new byte[16]));
    s.ch.pipeline().fireChannelReadComplete();
    assertEquals(2, s.counter.reads);
    s.ch.finishAndReleaseAll();
  }

  @Test
  void readsNothingOnceInactive() {
    Setup s = new Setup(false);
    s.ch.close();
    s.ch.pipeline().fireChannelReadComplete();
    assertEquals(1, s.counter.reads);
    s.ch.finishAndReleaseAll();
  }

  /** Moves the frozen clock {@code millis} ms ahead one ms at a time, running what falls due. */
  private static void stepTime(Setup s, long millis) {
    for (long i = 0; i < millis; i++) {
      s.ch.advanceTimeBy(1, TimeUnit.MILLISECONDS);
      s.ch.runScheduledPendingTasks();
    }
  }

  @Test
  void theSweepTimerBacksOffToItsLongestDelayAndStartsShortAgain() {
    Setup s = new Setup(false);
    s.ch.freezeTime();
    ByteBuf read = Unpooled.directBuffer(100); // under the 1000-byte budget: no read is held
    s.budget.track(read);
    ByteBuf slice = read.retainedSlice();
    read.release();
    s.ch.pipeline().fireChannelReadComplete();
    // Still held downstream: swept at 10, 30, 70, 150, 310, 630 and 1270 ms, then every 1280.
    stepTime(s, 2000);
    slice.release();
    stepTime(s, 549);
    assertEquals(1, s.budget.trackedBuffers(), "the next sweep is due at 2550 ms");
    stepTime(s, 1);
    assertEquals(0, s.budget.trackedBuffers(), "swept at 2550 ms: the delay stopped at 1280");

    ByteBuf read2 = Unpooled.directBuffer(100);
    s.budget.track(read2);
    ByteBuf slice2 = read2.retainedSlice();
    read2.release();
    s.ch.pipeline().fireChannelReadComplete();
    slice2.release();
    stepTime(s, ReadPolicy.SWEEP_MILLIS - 1);
    assertEquals(1, s.budget.trackedBuffers(), "not yet");
    stepTime(s, 1);
    assertEquals(0, s.budget.trackedBuffers(), "a new buffer is swept after the shortest delay");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void aQuietConnectionGivesBackTheBudgetsTableAfterTheLongestSweepDelay() {
    Setup s = new Setup(false);
    s.ch.freezeTime();
    ByteBuf slice = handedOn(s);
    slice.release(); // downstream is done before the batch ends
    s.ch.pipeline().fireChannelReadComplete();
    assertEquals(0, s.budget.trackedBuffers(), "the batch's sweep released the read buffer");
    assertTrue(s.budget.hasTable(), "kept for the next batch");
    s.ch.advanceTimeBy(ReadPolicy.MAX_SWEEP_MILLIS - 1, TimeUnit.MILLISECONDS);
    s.ch.runScheduledPendingTasks();
    assertTrue(s.budget.hasTable(), "not yet");
    s.ch.advanceTimeBy(1, TimeUnit.MILLISECONDS);
    s.ch.runScheduledPendingTasks();
    assertFalse(s.budget.hasTable(), "quiet: the table is given back");
    assertEquals(0, s.budget.slots());
    s.ch.advanceTimeBy(10 * ReadPolicy.MAX_SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    s.ch.runScheduledPendingTasks();
    assertEquals(2, s.counter.reads, "the timers asked for no read");
    s.ch.finishAndReleaseAll();
  }

  @Test
  void aHeldReadBringsAPendingQuietTimerForward() {
    Setup s = new Setup(false);
    s.ch.freezeTime();
    handedOn(s).release();
    s.ch.pipeline().fireChannelReadComplete(); // nothing tracked: a quiet timer, 1280 ms away
    ByteBuf slice = handedOn(s);
    s.ch.pipeline().fireChannelReadComplete(); // over budget: the read is held
    assertTrue(s.handler.policy().isHoldingRead());
    slice.release();
    s.ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    s.ch.runScheduledPendingTasks();
    assertFalse(s.handler.policy().isHoldingRead(), "retried after " + ReadPolicy.SWEEP_MILLIS + " ms");
    assertEquals(3, s.counter.reads);
    s.ch.finishAndReleaseAll();
  }
}
