package io.pinless.read;

import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.RecvByteBufAllocator;

/**
 * The one place that decides when a connection's socket is read. Put it first in the pipeline: it
 * turns {@code AUTO_READ} off, asks for one read when the channel becomes active and one after
 * each read batch, and swallows the {@code read()} requests of every handler behind it (grpc-netty's
 * {@code Http2ConnectionHandler} asks after every batch when {@code AUTO_READ} is off).
 *
 * <p>It holds the next read back while the channel is not writable (when enabled) and while the
 * {@link ReadBudget} is exceeded, and asks for it as soon as both clear.
 *
 * <p>Read sizes: Netty's transports take a buffer from the allocator only once the socket is
 * readable (NIO and epoll after readiness; io_uring with a provided-buffer ring, where the kernel
 * picks the buffer when data arrives), so a connection with nothing to read holds no read buffer.
 * Each read is sized by an adaptive policy between {@link #MIN_READ_BYTES} and
 * {@link #MAX_READ_BYTES}, starting at {@link #INITIAL_READ_BYTES}.
 *
 * <p>Memory: this handler holds no buffer.
 */
public final class ReadOnReadyHandler extends ChannelDuplexHandler {
  /** 1 KiB: small enough that a trickle of small frames does not take large buffers. */
  public static final int MIN_READ_BYTES = 1024;
  /**
   * 32 KiB, near grpc-go's 32.5 KiB: two 16 KiB frames or records nearly fit, it is a pool size
   * class (the buffer pins no more than its capacity), and a 16 KiB HTTP/2 frame is at least a
   * quarter of it, so {@link io.pinless.http2.Http2FrameSlicer} may slice every bulk DATA frame
   * instead of copying it.
   */
  public static final int INITIAL_READ_BYTES = 32 * 1024;
  /** 32 KiB: reads shrink (to {@link #MIN_READ_BYTES}) for trickles and grow back to this. */
  public static final int MAX_READ_BYTES = 32 * 1024;

  private final ReadBudget budget;
  private final boolean holdWhileUnwritable;
  private ChannelHandlerContext ctx;
  /** A read is wanted but held back by writability or the budget. */
  private boolean readOwed;
  /** How many reads this handler asked the channel for: the test of single ownership. */
  private long readsRequested;
  /** How many read requests from handlers behind it it swallowed. */
  private long readsSwallowed;

  /**
   * Creates a handler that holds reads while {@code budget} is exceeded and, if {@code
   * holdWhileUnwritable}, while the channel is not writable.
   */
  public ReadOnReadyHandler(ReadBudget budget, boolean holdWhileUnwritable) {
    this.budget = budget;
    this.holdWhileUnwritable = holdWhileUnwritable;
  }

  /** The read-size policy this handler installs on its channel. */
  public static RecvByteBufAllocator readSizes() {
    return new AdaptiveRecvByteBufAllocator(MIN_READ_BYTES, INITIAL_READ_BYTES, MAX_READ_BYTES);
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    ctx.channel().config().setAutoRead(false);
    // With an io_uring buffer ring the kernel picks the buffer and this policy is unused.
    ctx.channel().config().setRecvByteBufAllocator(readSizes());
    budget.onBelowLimit(() -> ctx.executor().execute(this::resume));
    if (ctx.channel().isActive()) {
      readIfReady();
    }
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    budget.onBelowLimit(null);
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    ctx.fireChannelActive();
    readIfReady();
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    ctx.fireChannelReadComplete();
    readIfReady();
  }

  @Override
  public void channelWritabilityChanged(ChannelHandlerContext ctx) {
    ctx.fireChannelWritabilityChanged();
    resume();
  }

  /** Swallows read requests from the handlers behind this one: reading is decided here. */
  @Override
  public void read(ChannelHandlerContext ctx) {
    readsSwallowed++;
  }

  private void resume() {
    if (readOwed) {
      readIfReady();
    }
  }

  private void readIfReady() {
    if (!ctx.channel().isActive()) {
      return;
    }
    if ((holdWhileUnwritable && !ctx.channel().isWritable()) || budget.isExceeded()) {
      readOwed = true;
      return;
    }
    readOwed = false;
    readsRequested++;
    ctx.read();
  }

  /** How many reads this handler asked the channel for. */
  long readsRequested() {
    return readsRequested;
  }

  /** How many read requests from behind it this handler swallowed. */
  long readsSwallowed() {
    return readsSwallowed;
  }

  /** True while a read is held back. */
  boolean isHoldingRead() {
    return readOwed;
  }
}
