package io.pinless.connection;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.ReferenceCountUtil;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.http2.ConnectionWindow;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ProcessBudget;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadPolicy;
import io.pinless.testing.ReadCounter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A connection over its read budget holds its peer back with the connection window and goes on
 * reading; incomplete messages do not count against the budget.
 */
class ConnectionHandlerBudgetTest {
  private static final int DATA = 0x0;
  private static final int HEADERS = 0x1;
  private static final int PADDED = 0x8;
  private static final int SETTINGS = 0x4;
  private static final int PING = 0x6;
  private static final int WINDOW_UPDATE = 0x8;

  /** Keeps every frame buffer it gets, as gRPC keeps a message's, and counts PINGs. */
  private static final class Keeper extends ChannelInboundHandlerAdapter {
    final List<ByteBuf> kept = new ArrayList<>();
    int pings;

    /** @param msg owned: kept until {@link #releaseAll} */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf frames = (ByteBuf) msg;
      for (int pos = frames.readerIndex(); pos + 9 <= frames.writerIndex();
          pos += 9 + frames.getUnsignedMedium(pos)) {
        if (frames.getUnsignedByte(pos + 3) == PING) {
          pings++;
        }
      }
      kept.add(frames);
    }

    void releaseAll() {
      kept.forEach(ByteBuf::release);
      kept.clear();
    }
  }

  private final ReadCounter reads = new ReadCounter();
  private final Keeper keeper = new Keeper();
  private final EmbeddedChannel ch = new EmbeddedChannel();
  private final ConnectionHandler handler =
      new ConnectionHandler(new ReadBudget(1000), false, ReadPolicy.MAX_READ_BYTES);

  ConnectionHandlerBudgetTest() {
    ch.pipeline().addLast(reads, handler, keeper);
    handler.install(null, new FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE,
        handler.readPolicy().budget(), false));
  }

  @AfterEach
  void tearDown() {
    keeper.releaseAll();
    ch.finishAndReleaseAll();
  }

  private static ByteBuf frame(ByteBuf out, int type, int flags, int stream, ByteBuf payload) {
    out.writeMedium(payload.readableBytes()).writeByte(type).writeByte(flags).writeInt(stream);
    out.writeBytes(payload);
    payload.release();
    return out;
  }

  /** HEADERS that open {@code stream}: DATA counts only on a stream its peer opened. */
  private static ByteBuf headers(ByteBuf out, int stream) {
    return frame(out, HEADERS, 0x4, stream, Unpooled.EMPTY_BUFFER);
  }

  private static ByteBuf windowUpdate(int stream, int increment) {
    return frame(
        Unpooled.buffer(), WINDOW_UPDATE, 0, stream, Unpooled.buffer().writeInt(increment));
  }

  /** One read batch of {@code in}, in a direct buffer as a socket read gives. */
  private void batch(ByteBuf in) {
    ByteBuf read = Unpooled.directBuffer(in.readableBytes()).writeBytes(in);
    in.release();
    ch.pipeline().fireChannelRead(read);
    ch.pipeline().fireChannelReadComplete();
  }

  /** SETTINGS, then on stream 1 a gRPC message of {@code length} of which {@code sent} bytes. */
  private static ByteBuf message(int length, int sent) {
    ByteBuf in = frame(Unpooled.buffer(), SETTINGS, 0, 0, Unpooled.EMPTY_BUFFER);
    return frame(headers(in, 1), DATA, 0, 1,
        Unpooled.buffer().writeByte(0).writeInt(length).writeZero(sent));
  }

  @Test
  void overTheBudgetItWithholdsConnectionCreditAndStillReadsPings() {
    batch(message(2000, 2000));
    int readsBefore = reads.reads;
    ch.writeAndFlush(windowUpdate(0, 4000));
    ch.writeAndFlush(windowUpdate(1, 4000));
    ByteBuf passed = ch.readOutbound();
    assertEquals(1, passed.getInt(5), "the stream's update passes");
    passed.release();
    assertNull(ch.readOutbound(), "the connection's update is withheld");

    batch(frame(Unpooled.buffer(), PING, 0, 0, Unpooled.buffer().writeLong(7)));
    assertEquals(1, keeper.pings, "a PING is still read while the peer is held");
    assertEquals(readsBefore + 1, reads.reads, "reads go on");

    keeper.releaseAll();
    ch.flush();
    ByteBuf released = ch.readOutbound();
    assertEquals(0, released.getInt(5), "stream 0");
    assertEquals(4000, released.getInt(9), "the withheld credit, once released");
    released.release();
  }

  @Test
  void messagesClaimedButNeverSentOweNoMoreThanTheBudget() {
    // Over the budget, and 200 streams each with a 5-byte prefix claiming 900 bytes (within the
    // limit): 180,000 bytes claimed, far past the peer's window. The hold may owe them no more
    // than one budget of credit, or a peer that lies in its prefixes is never held.
    ByteBuf in = message(40_000, 40_000);
    for (int stream = 3; stream < 3 + 2 * 200; stream += 2) {
      frame(headers(in, stream), DATA, 0, stream, Unpooled.buffer().writeByte(0).writeInt(900));
    }
    batch(in);
    ch.writeAndFlush(windowUpdate(0, 200_000));
    long released = 0;
    for (ByteBuf out; (out = ch.readOutbound()) != null; ) {
      released += out.getInt(9);
      out.release();
    }
    assertTrue(released <= 1000, "credit given while held: " + released);
  }

  @Test
  void emptyDataFramesOnAnIncompleteMessageDoNotRaiseTheAllowance() {
    // Over the budget, then a message started on stream 3 and 20,000 empty DATA frames on it:
    // they cost the peer no window and carry no message byte, so they must not lift the budget.
    ByteBuf in = message(40_000, 40_000);
    frame(headers(in, 3), DATA, 0, 3, Unpooled.buffer().writeByte(0).writeInt(900));
    for (int i = 0; i < 20_000; i++) {
      frame(in, DATA, 0, 3, Unpooled.EMPTY_BUFFER);
    }
    batch(in);
    ch.writeAndFlush(windowUpdate(0, 4000));
    assertNull(ch.readOutbound(), "the connection's update is withheld");
  }

  @Test
  void creditWithheldBeforeAWriteThatIsNoBufferStillGoesOut() {
    batch(message(2000, 2000));
    ch.writeAndFlush(windowUpdate(0, 4000));
    assertNull(ch.readOutbound(), "the connection's update is withheld");
    // A write the window cannot walk: from here on it knows no frame boundary.
    ch.writeAndFlush("not a buffer");
    long released = 0;
    for (Object out; (out = ch.readOutbound()) != null; ) {
      if (out instanceof ByteBuf) {
        released += ((ByteBuf) out).getInt(9);
        ((ByteBuf) out).release();
      }
    }
    keeper.releaseAll();
    ch.runPendingTasks();
    ch.flush();
    for (Object out; (out = ch.readOutbound()) != null; ) {
      released += ((ByteBuf) out).getInt(9);
      ((ByteBuf) out).release();
    }
    assertEquals(4000, released, "the withheld credit is not lost");
  }

  @Test
  void creditCappedForTheProcessStillGoesOutBeforeAWriteThatIsNoBuffer() {
    Capped capped = new Capped();
    capped.ch.writeAndFlush(windowUpdate(0, 4000));
    assertNull(capped.ch.readOutbound(), "65,535 granted is past the cap: the update is withheld");
    capped.ch.writeAndFlush("not a buffer");
    long released = 0;
    for (Object out; (out = capped.ch.readOutbound()) != null; ) {
      if (out instanceof ByteBuf) {
        released += ((ByteBuf) out).getInt(9);
        ((ByteBuf) out).release();
      }
    }
    assertEquals(4000, released, "once the window is unknown, nothing stays withheld");
    capped.close();
    assertEquals(0, capped.process.connections());
  }

  /** A connection whose peer's credit is capped by a pressed process budget. */
  private static final class Capped {
    final ProcessBudget process;
    /**
     * Another connection's credit presses the process before this connection starts, which then
     * may have no more credit than its first window.
     */
    final ReadBudget other;
    final ReadBudget budget;
    final EmbeddedChannel ch = new EmbeddedChannel();

    Capped() {
      this(200_000);
    }

    /** With a process budget of {@code limit}, which the other connection's credit presses. */
    Capped(long limit) {
      process = new ProcessBudget(limit);
      other = new ReadBudget(1 << 30, process);
      budget = new ReadBudget(1 << 30, process);
      other.credit(110_000);
      ConnectionHandler connection =
          new ConnectionHandler(budget, false, ReadPolicy.MAX_READ_BYTES);
      ch.pipeline().addLast(connection);
      connection.install(null, new FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE,
          budget, false));
    }

    /** Moves the channel's clock by {@code millis} in sweep ticks; the credit sent meanwhile. */
    long advance(long millis) {
      long released = 0;
      for (long t = 0; t < millis; t += ReadPolicy.SWEEP_MILLIS) {
        ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        for (ByteBuf out; (out = ch.readOutbound()) != null; ) {
          released += out.getInt(9);
          out.release();
        }
      }
      return released;
    }

    void close() {
      ch.finishAndReleaseAll();
      other.releaseAll();
    }
  }

  @Test
  void theCreditAPeerIsGrantedCountsInTheProcessFromInstallAndAtEachUpdate() {
    ProcessBudget process = new ProcessBudget(1 << 30);
    ReadBudget budget = new ReadBudget(1 << 30, process);
    EmbeddedChannel ch = new EmbeddedChannel();
    ConnectionHandler connection = new ConnectionHandler(budget, false, ReadPolicy.MAX_READ_BYTES);
    ch.pipeline().addLast(connection);
    connection.install(null,
        new FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, false));
    assertEquals(ConnectionWindow.INITIAL_WINDOW_BYTES, process.creditBytes(),
        "HTTP/2's initial window counts before the peer sends a byte");
    ch.writeAndFlush(windowUpdate(0, 100_000));
    assertEquals(ConnectionWindow.INITIAL_WINDOW_BYTES + 100_000, process.creditBytes(),
        "an update that goes out counts at once, before the next read");
    finish(ch);
  }

  /** Another connection of {@code process} whose peer holds {@code credit}. */
  private static ReadBudget creditOf(ProcessBudget process, long credit) {
    ReadBudget other = new ReadBudget(1 << 30, process);
    other.credit(credit);
    return other;
  }

  /** Releases what {@code ch} wrote and what it still holds. */
  private static void finish(EmbeddedChannel ch) {
    for (Object out; (out = ch.readOutbound()) != null; ) {
      ReferenceCountUtil.release(out);
    }
    ch.finishAndReleaseAll();
  }

  @Test
  void aReadsBytesCountAsCommittedWhileAWriteReportsThemSpentBeforeTheyAreTracked() {
    ProcessBudget process = new ProcessBudget(1_000_000);
    ReadBudget other = creditOf(process, 450_000);
    ReadBudget budget = new ReadBudget(1 << 30, process);
    EmbeddedChannel ch = new EmbeddedChannel();
    ConnectionHandler connection = new ConnectionHandler(budget, false, ReadPolicy.MAX_READ_BYTES);
    long[] committed = new long[1];
    List<ByteBuf> kept = new ArrayList<>();
    ch.pipeline().addLast(connection, new ChannelInboundHandlerAdapter() {
      /** @param msg owned: kept until the test ends */
      @Override
      public void channelRead(ChannelHandlerContext ctx, Object msg) {
        kept.add((ByteBuf) msg);
        if (kept.size() == 2) {
          // As grpc-netty may while a read is handed on: a window update, granted at once.
          ctx.writeAndFlush(windowUpdate(0, 1));
          committed[0] = process.committedBytes();
        }
      }
    });
    connection.install(null,
        new FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, false));
    assertTrue(process.isPressed());
    // A message of 100,000 bytes starts, so the connection's cap rises past its first window.
    ByteBuf first = Unpooled.buffer();
    frame(first, DATA, 0, 1, Unpooled.buffer().writeByte(0).writeInt(100_000).writeZero(1000));
    ch.writeInbound(first);
    ch.pipeline().fireChannelReadComplete();
    long before = process.committedBytes();
    // A small DATA frame, copied, then a large one, sliced: the write comes between them.
    ByteBuf second = Unpooled.directBuffer(2 * 9 + 10 + 16_000);
    frame(second, DATA, 0, 1, Unpooled.buffer().writeZero(10));
    frame(second, DATA, 0, 1, Unpooled.buffer().writeZero(16_000));
    ch.writeInbound(second);
    assertEquals(3, kept.size(), "the first read, then the copy and the slice of the second");
    assertTrue(process.creditBytes() < 450_000 * 5 / 4, "the update went out and counts");
    assertTrue(committed[0] >= before, "committed " + committed[0] + " mid-read, " + before
        + " before it: the sliced frame's bytes counted as spent credit and not yet held");
    assertEquals(0, process.receivingBytes(), "none once the read is handed on");
    kept.forEach(ByteBuf::release);
    finish(ch);
    other.releaseAll();
  }

  @Test
  void creditReleasedAsTheWalkEndsCountsBeforeTheCapsPromiseIsDropped() {
    ProcessBudget process = new ProcessBudget(1_000_000);
    ReadBudget budget = new ReadBudget(1 << 30, process);
    ReadBudget other = creditOf(process, 410_000);
    long[] seen = {-1, -1};
    EmbeddedChannel ch = new EmbeddedChannel();
    ch.config().setAllocator(new AbstractByteBufAllocator(false) {
      @Override
      protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return Unpooled.buffer(initialCapacity, maxCapacity);
      }

      @Override
      protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        return Unpooled.directBuffer(initialCapacity, maxCapacity);
      }

      @Override
      public boolean isDirectBufferPooled() {
        return false;
      }

      @Override
      public ByteBuf buffer(int initialCapacity) {
        // The window update is allocated once granted: the counts then are what another event
        // loop's gate would see before the update goes out.
        seen[0] = process.promisedBytes();
        seen[1] = process.creditBytes();
        return super.buffer(initialCapacity);
      }
    });
    ConnectionHandler connection = new ConnectionHandler(budget, false, ReadPolicy.MAX_READ_BYTES);
    ch.pipeline().addLast(connection);
    connection.install(null,
        new FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, false));
    ch.writeAndFlush(windowUpdate(0, 4000));
    assertNull(ch.readOutbound(), "withheld: past the cap");
    long promised = process.promisedBytes();
    long credit = process.creditBytes();
    assertTrue(promised >= 4000, "the cap promises what the update would grant: " + promised);
    ch.writeAndFlush("not a buffer");
    assertTrue(seen[0] + seen[1] >= credit + 4000, "4,000 granted counted as promised or credit: "
        + seen[0] + " + " + seen[1] + ", from " + promised + " + " + credit);
    assertEquals(credit + 4000, process.creditBytes());
    assertEquals(0, process.promisedBytes(), "capped no more");
    finish(ch);
    other.releaseAll();
  }

  @Test
  void aPeerCappedForTheProcessCountsAsSlowedOnce() {
    Capped capped = new Capped();
    long before = Metric.PEERS_SLOWED.value();
    capped.ch.writeAndFlush(windowUpdate(0, 4000));
    assertNull(capped.ch.readOutbound(), "65,535 granted is past the cap: the update is withheld");
    capped.advance(100);
    assertEquals(1, Metric.PEERS_SLOWED.value() - before, "one peer slowed, counted once");
    capped.close();
  }

  @Test
  void anIdleCappedConnectionLooksAgainBackingOffAndStillSendsOnceThereIsRoom() {
    // Alone, this connection commits under a quarter of the limit: even idle, it gets more.
    Capped capped = new Capped(400_000);
    capped.ch.writeAndFlush(windowUpdate(0, 4000));
    assertEquals(0, capped.advance(5000), "withheld while the process is pressed");
    capped.other.releaseAll(); // room: the process is no longer pressed
    assertEquals(0, capped.advance(4 * ReadPolicy.SWEEP_MILLIS),
        "an idle connection's timer has backed off: it is not looked at every tick");
    assertEquals(4000, capped.advance(ReadPolicy.MAX_SWEEP_MILLIS),
        "the withheld credit goes out within the longest sweep delay");
    capped.close();
  }

  @Test
  void aCappedConnectionWithAMessageUnderWayLooksAgainOnTheShortTimer() {
    Capped capped = new Capped();
    ByteBuf in = frame(Unpooled.buffer(), SETTINGS, 0, 0, Unpooled.EMPTY_BUFFER);
    frame(headers(in, 1), DATA, 0, 1,
        Unpooled.buffer().writeByte(0).writeInt(50_000).writeZero(100));
    ByteBuf read = Unpooled.directBuffer(in.readableBytes()).writeBytes(in);
    in.release();
    capped.ch.pipeline().fireChannelRead(read);
    capped.ch.pipeline().fireChannelReadComplete();
    capped.ch.writeAndFlush(windowUpdate(0, 4000));
    assertEquals(0, capped.advance(5000), "withheld while the process is pressed");
    capped.other.releaseAll();
    assertEquals(4000, capped.advance(2 * ReadPolicy.SWEEP_MILLIS),
        "a peer in the middle of a message gets its credit on the next tick");
    capped.close();
  }

  @Test
  void messagesTheApplicationKeepsAfterItsConnectionEndsStayCountedInTheProcess() {
    ProcessBudget process = new ProcessBudget(1 << 30);
    ReadBudget budget = new ReadBudget(1 << 30, process);
    Keeper app = new Keeper();
    EmbeddedChannel ended = new EmbeddedChannel();
    ConnectionHandler connection = new ConnectionHandler(budget, false, ReadPolicy.MAX_READ_BYTES);
    ended.pipeline().addLast(connection, app);
    connection.install(null, new FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE,
        budget, false));
    ByteBuf in = message(2000, 2000);
    ByteBuf read = Unpooled.directBuffer(in.readableBytes()).writeBytes(in);
    in.release();
    ended.pipeline().fireChannelRead(read);
    ended.pipeline().fireChannelReadComplete();
    long held = process.heldBytes();
    assertTrue(held >= 2000, "the message is counted: " + held);
    // The connection ends while the service keeps its message (a peer that resets it). Removing
    // the handler ends it as closing does; an embedded channel's close would also cancel its
    // clock's timers, which a real event loop keeps.
    ended.pipeline().remove(connection);
    assertEquals(0, process.connections(), "the connection left");
    assertEquals(held, process.heldBytes(), "what the service keeps still counts");
    ended.advanceTimeBy(ReadPolicy.MAX_SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    ended.runScheduledPendingTasks();
    assertEquals(held, process.heldBytes(), "a sweep while it is kept takes nothing off");
    app.releaseAll();
    for (int i = 0; i < 10 && process.heldBytes() > 0; i++) {
      ended.advanceTimeBy(ReadPolicy.MAX_SWEEP_MILLIS, TimeUnit.MILLISECONDS);
      ended.runScheduledPendingTasks();
    }
    assertEquals(0, process.heldBytes(), "released, it is taken off on the sweep timer");
    ended.finishAndReleaseAll();
  }

  @Test
  void aBudgetThatClearsOnAnIdleConnectionReleasesTheCreditOnTheSweepTimer() {
    batch(message(2000, 2000));
    ch.writeAndFlush(windowUpdate(0, 4000));
    assertNull(ch.readOutbound(), "the connection's update is withheld");
    keeper.releaseAll(); // on no read, write or flush of this connection
    ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    ch.runScheduledPendingTasks();
    ByteBuf released = ch.readOutbound();
    assertEquals(4000, released.getInt(9), "the withheld credit, on the timer");
    released.release();
  }

  @Test
  void anIncompleteMessageWithinTheLimitIsNotHeldBackByTheBudget() {
    // 1144 bytes over a 1000-byte budget: a 900-byte message, 600 bytes of it in padded frames.
    ByteBuf in = frame(Unpooled.buffer(), SETTINGS, 0, 0, Unpooled.EMPTY_BUFFER);
    frame(headers(in, 1), DATA, PADDED, 1,
        Unpooled.buffer().writeByte(255).writeByte(0).writeInt(900).writeZero(300 + 255));
    frame(in, DATA, PADDED, 1, Unpooled.buffer().writeByte(255).writeZero(300 + 255));
    batch(in);
    ch.writeAndFlush(windowUpdate(0, 4000));
    ByteBuf passed = ch.readOutbound();
    assertEquals(0, passed.getInt(5), "the message needs the credit: it passes");
    passed.release();
    assertFalse(handler.readPolicy().isHoldingRead());
  }
}
