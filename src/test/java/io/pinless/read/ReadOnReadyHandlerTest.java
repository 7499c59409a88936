package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.Unpooled;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;

class ReadOnReadyHandlerTest {
  /** Counts the read requests that reach the channel (it sits at the head). */
  private static final class ReadCounter extends ChannelOutboundHandlerAdapter {
    int reads;

    @Override
    public void read(ChannelHandlerContext ctx) {
      reads++;
      ctx.read();
    }
  }

  /** Behaves like Http2ConnectionHandler with AUTO_READ off: asks for a read after each batch. */
  private static final class AsksForReads extends ChannelInboundHandlerAdapter {
    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      ctx.read();
      ctx.fireChannelReadComplete();
    }
  }

  private static final class Setup {
    final ReadCounter counter = new ReadCounter();
    final ReadBudget budget = new ReadBudget(1000);
    final ReadOnReadyHandler handler;
    final EmbeddedChannel ch = new EmbeddedChannel();

    Setup(boolean holdWhileUnwritable) {
      handler = new ReadOnReadyHandler(budget, holdWhileUnwritable);
      ch.pipeline().addLast(counter, handler, new AsksForReads());
    }
  }

  @Test
  void turnsAutoReadOffAndSetsTheReadSizePolicy() {
    Setup s = new Setup(false);
    assertFalse(s.ch.config().isAutoRead());
    assertTrue(s.ch.config().getRecvByteBufAllocator() instanceof AdaptiveRecvByteBufAllocator);
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
    assertEquals(5, s.handler.readsSwallowed(), "the handler behind asked five times, in vain");
    assertEquals(6, s.handler.readsRequested());
    s.ch.finishAndReleaseAll();
  }

  @Test
  void holdsReadsWhileTheBudgetIsExceededAndResumesWhenReleased() {
    Setup s = new Setup(false);
    s.budget.add(1001);
    s.ch.pipeline().fireChannelReadComplete();
    assertEquals(1, s.counter.reads);
    assertTrue(s.handler.isHoldingRead());
    s.budget.release(1);
    s.ch.runPendingTasks();
    assertEquals(2, s.counter.reads, "resumed once the budget is back at its limit");
    assertFalse(s.handler.isHoldingRead());
    s.budget.release(1000);
    s.ch.runPendingTasks();
    assertEquals(2, s.counter.reads, "no extra read when nothing was held");
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
}
