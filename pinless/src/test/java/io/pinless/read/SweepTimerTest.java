package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.buffer.UnpooledHeapByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.DefaultEventLoop;
import io.netty.channel.local.LocalAddress;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalServerChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The read budget's sweep timer on a real event loop: it keeps no task on the loop's scheduler
 * (one would cost every turn of a busy loop), and still sweeps a quiet connection once
 * downstream lets go.
 */
class SweepTimerTest {
  /** A loop that says whether anything is scheduled on it. */
  private static final class ObservedLoop extends DefaultEventLoop {
    boolean anythingScheduled() {
      return nextScheduledTaskDeadlineNanos() != -1;
    }
  }

  private final ObservedLoop clientLoop = new ObservedLoop();
  private final DefaultEventLoop serverLoop = new DefaultEventLoop();

  @AfterEach
  void stopLoops() throws InterruptedException {
    clientLoop.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    serverLoop.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
  }

  /** A local server, and a client connected to it through {@code handler}. */
  private Channel[] connect(ReadOnReadyHandler handler) throws InterruptedException {
    LocalAddress address = new LocalAddress(SweepTimerTest.class);
    Channel server = new ServerBootstrap().group(serverLoop).channel(LocalServerChannel.class)
        .childHandler(new ChannelInboundHandlerAdapter()).bind(address).sync().channel();
    Channel client = new Bootstrap().group(clientLoop).channel(LocalChannel.class)
        .handler(handler).connect(address).sync().channel();
    return new Channel[] {server, client};
  }

  /**
   * On the client's loop, as the slicer does: tracks a watched read buffer, hands on a slice of
   * it, lets go of the buffer and ends the read batch; then runs {@code after} there.
   *
   * @return owned by the caller: the slice handed on
   */
  private ByteBuf handOnAndEndBatch(Channel client, ReadBudget budget,
      CompletableFuture<Thread> freed, Runnable after) throws Exception {
    return clientLoop.submit(() -> {
      ByteBuf read = watched(freed);
      budget.track(read);
      ByteBuf handedOn = read.retainedSlice();
      read.release();
      client.pipeline().fireChannelReadComplete();
      after.run();
      return handedOn;
    }).get(5, TimeUnit.SECONDS);
  }

  /** A buffer that completes {@code freed} when its last reference goes, on that thread. */
  private static ByteBuf watched(CompletableFuture<Thread> freed) {
    return new UnpooledHeapByteBuf(UnpooledByteBufAllocator.DEFAULT, 100, 100) {
      @Override
      protected void deallocate() {
        super.deallocate();
        freed.complete(Thread.currentThread());
      }
    };
  }

  @Test
  void aQuietConnectionIsSweptWithNothingScheduledOnItsLoop() throws Exception {
    ReadBudget budget = new ReadBudget(1000);
    Channel[] channels = connect(new ReadOnReadyHandler(budget, false));
    try {
      CompletableFuture<Thread> freed = new CompletableFuture<>();
      ByteBuf slice = handOnAndEndBatch(channels[1], budget, freed, () -> {});
      assertEquals(1, clientLoop.submit(budget::trackedBuffers).get(5, TimeUnit.SECONDS),
          "held downstream: still tracked after the batch's sweep");
      assertFalse(clientLoop.submit(clientLoop::anythingScheduled).get(5, TimeUnit.SECONDS),
          "the sweep timer is not on the loop's scheduler");

      slice.release(); // downstream lets go; no read batch follows
      Thread sweptOn = freed.get(5, TimeUnit.SECONDS);
      assertTrue(clientLoop.inEventLoop(sweptOn), "swept on the connection's loop: " + sweptOn);
      assertEquals(0, clientLoop.submit(budget::trackedBuffers).get(5, TimeUnit.SECONDS));
    } finally {
      channels[1].close().sync();
      channels[0].close().sync();
    }
  }

  @Test
  void aRemovedHandlerGivesUpItsReferencesAndItsPendingTimer() throws Exception {
    ReadBudget budget = new ReadBudget(1000);
    ReadOnReadyHandler handler = new ReadOnReadyHandler(budget, false);
    Channel[] channels = connect(handler);
    try {
      CompletableFuture<Thread> freed = new CompletableFuture<>();
      // A sweep timer is pending when the handler goes, which gives up the budget's reference.
      ByteBuf slice = handOnAndEndBatch(channels[1], budget, freed,
          () -> channels[1].pipeline().remove(handler));
      assertEquals(1, slice.refCnt(), "downstream's slice is all that is left");
      assertEquals(0, clientLoop.submit(budget::trackedBuffers).get(5, TimeUnit.SECONDS));
      slice.release();
      assertEquals(Thread.currentThread(), freed.getNow(null), "freed by downstream's release");
    } finally {
      channels[1].close().sync();
      channels[0].close().sync();
    }
  }
}
