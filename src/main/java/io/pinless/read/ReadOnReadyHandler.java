package io.pinless.read;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandler;
import io.netty.channel.ChannelOutboundHandler;
import io.netty.channel.ChannelPipelineException;
import io.netty.channel.ChannelPromise;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.util.UncheckedBooleanSupplier;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The one place that decides when a connection's socket is read. Put it first in the pipeline: it
 * turns {@code AUTO_READ} off, asks for one read when the channel becomes active and one after
 * each read batch, and swallows the {@code read()} requests of every handler behind it (grpc-netty's
 * {@code Http2ConnectionHandler} asks after every batch when {@code AUTO_READ} is off).
 *
 * <p>It holds the next read back while the channel is not writable (when enabled) and while the
 * {@link ReadBudget} is exceeded, and asks for it as soon as both clear: writability is an event;
 * the budget is swept (buffers released downstream stop counting) after every read batch, on
 * every flush that passes (gRPC flushes window updates as the application consumes), and every
 * while it tracks anything on a timer that starts at {@link #SWEEP_MILLIS} ms and backs off to
 * {@link #MAX_SWEEP_MILLIS} (busy connections sweep on every batch; the timer is for connections
 * that went quiet, and for a held read, which it retries every {@link #SWEEP_MILLIS} ms), so an
 * idle connection's last buffers go back to the pool at most that long after the application
 * releases them. Once a timer's sweep finds nothing tracked, the budget gives back its tracking
 * table ({@link ReadBudget#trim}): a connection that has gone quiet holds no table.
 *
 * <p>It gives up the budget's references when the channel closes.
 *
 * <p>Read sizes: Netty's transports take a buffer from the allocator only once the socket is
 * readable (NIO and epoll after readiness; io_uring with a provided-buffer ring, where the kernel
 * picks the buffer when data arrives), so a connection with nothing to read holds no read buffer.
 * Each read is sized by an adaptive policy between {@link #MIN_READ_BYTES} and the maximum
 * ({@link #MAX_READ_BYTES} unless given): reads start at the maximum, halve after two read
 * batches in a row that each read at most half a buffer, and go back to the maximum as soon as a
 * read fills its buffer. A read batch (what one
 * readiness event drains before {@code channelReadComplete}) goes on for up to
 * {@link #MAX_READS_PER_BATCH} reads while each read fills its buffer and neither hold applies:
 * with {@code AUTO_READ} off Netty's own policy would stop every batch after one read, costing a
 * trip through the event loop's selector for each buffer.
 *
 * <p>It can run one more handler, or an inbound and an outbound one, inside its own pipeline entry
 * ({@link #host}), which saves a handler context per connection end: pinless's connections run
 * their frame slicer there (plaintext) or their record decoder and encoder (ALTS).
 *
 * <p>Memory: this handler holds no buffer.
 */
public final class ReadOnReadyHandler extends ChannelDuplexHandler {
  /** 1 KiB: small enough that a trickle of small frames does not take large buffers. */
  public static final int MIN_READ_BYTES = 1024;
  /**
   * 48 KiB, a pool size class: three 16 KiB HTTP/2 frames nearly fit, and every DATA frame of
   * 12 KiB or more is at least a quarter of it, so {@link io.pinless.http2.Http2FrameSlicer} may
   * slice gRPC's bulk frames (16 KiB, or a little less where the sender's flow-control window cut
   * them) instead of copying them, as a slice pins at most four times its size. Larger than
   * grpc-go's 32.5 KiB because each read costs the decoders behind a pass (measured over
   * plaintext: 32 KiB reads allocated 15% more heap per downloaded byte than stock grpc-netty,
   * which reads up to 64 KiB). Reads start at the maximum, shrink (to {@link #MIN_READ_BYTES})
   * for trickles and grow back to it.
   */
  public static final int MAX_READ_BYTES = 48 * 1024;
  /**
   * 32 KiB, near grpc-go's 32.5 KiB, for ALTS connections while nothing behind this handler sizes
   * the reads (the handshake). Once the record decoder is in place it asks for reads of one whole
   * frame ({@link ReadTarget#nextReadBytes}): a read then decrypts into a buffer of one record,
   * from which every DATA frame of a quarter of a record or more may be sliced. (Fixed 48 KiB
   * reads of 16 KiB records had decrypted three records into one buffer and copied 13% of the
   * DATA bytes; fixed 32 KiB reads of 48 KiB records copied 63% of the ciphertext out of the
   * reads that cut records.)
   */
  public static final int ALTS_READ_BYTES = 32 * 1024;
  /**
   * 9 bytes, an HTTP/2 frame header: every read buffer starts this far in, so that {@link
   * io.pinless.http2.Http2FrameSlicer} can write a DATA header in front of a payload that a read
   * cut and hand the piece on as one slice. Reads are this much shorter than their buffers.
   */
  public static final int HEADROOM_BYTES = 9;
  /** 16 reads, Netty's default per batch: a batch reads at most 768 KiB before yielding. */
  public static final int MAX_READS_PER_BATCH = 16;

  /** While the budget tracks buffers, it is swept this often (besides every batch and flush). */
  public static final long SWEEP_MILLIS = 10;
  /** The longest the sweep timer waits: it doubles each time from {@link #SWEEP_MILLIS}. */
  public static final long MAX_SWEEP_MILLIS = 1280;

  /** How many times the sweep delay doubles: 10 ms to {@link #MAX_SWEEP_MILLIS}. */
  private static final int MAX_SWEEP_BACKOFF = 7;

  /** 64 KiB: the largest read any handler may be given, as in Netty's adaptive reads. */
  private static final int LARGEST_READ_BYTES = 64 * 1024;

  private final ReadBudget budget;
  /** The largest read asked for. */
  private final int maxReadBytes;
  private final boolean holdWhileUnwritable;
  /** Where the next read goes, when a handler behind knows; null for a fresh buffer. */
  private ReadTarget target;
  private ChannelHandlerContext ctx;
  /** A read is wanted but held back by writability or the budget. */
  private boolean readOwed;
  /** The inbound handler run inside this entry, behind the read policy ({@link #host}), or null. */
  private ChannelInboundHandler inbound;
  /** The outbound handler run inside this entry ({@link #host}), or null. */
  private ChannelOutboundHandler outbound;
  /** The scheduled {@link #sweepNow}; null when none. */
  private ScheduledFuture<?> sweepTimer;
  /**
   * The sweep timer's next delay while buffers are tracked, {@link #SWEEP_MILLIS} doubled this
   * many times (a byte: the handler is kept at 48 bytes).
   */
  private byte sweepBackoff;
  /**
   * The read policy installed on the channel, which is also the sweep timer's task: one object
   * for both, as a connection keeps it for its life.
   */
  private final BatchHandle reads;

  /**
   * Creates a handler that holds reads while {@code budget} is exceeded and, if {@code
   * holdWhileUnwritable}, while the channel is not writable.
   */
  public ReadOnReadyHandler(ReadBudget budget, boolean holdWhileUnwritable) {
    this(budget, holdWhileUnwritable, MAX_READ_BYTES);
  }

  /**
   * Creates a handler as above whose reads are at most {@code maxReadBytes} (from 1 KiB to 64 KiB;
   * {@link #ALTS_READ_BYTES} where records are decrypted behind it).
   */
  public ReadOnReadyHandler(ReadBudget budget, boolean holdWhileUnwritable, int maxReadBytes) {
    if (maxReadBytes < MIN_READ_BYTES || maxReadBytes > LARGEST_READ_BYTES) {
      throw new IllegalArgumentException("maxReadBytes must be 1 KiB to 64 KiB: " + maxReadBytes);
    }
    this.budget = budget;
    this.holdWhileUnwritable = holdWhileUnwritable;
    this.maxReadBytes = maxReadBytes;
    this.reads = new BatchHandle();
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    ctx.channel().config().setAutoRead(false);
    // With an io_uring buffer ring the kernel picks the buffer and this policy is unused.
    ctx.channel().config().setRecvByteBufAllocator(reads);
    if (ctx.channel().isActive()) {
      readIfReady();
    }
  }

  /**
   * Runs {@code handler} inside this entry, right behind the read policy, as if it were the next
   * handler of the pipeline but without a pipeline entry (a handler context, 64 bytes per
   * connection end) of its own. It gets {@code handlerAdded} at once and {@code handlerRemoved}
   * with this entry; an inbound handler gets {@code channelRead} and {@code channelInactive}, an
   * outbound one {@code write}, {@code flush} and {@code close}; each is called with this entry's
   * context, and every other event passes it by. So it must need no other callback: {@link
   * io.pinless.http2.Http2FrameSlicer} is such a handler, and pinless's credentials run it here on
   * plaintext connections. Call at most once (or {@link #host(ChannelInboundHandler,
   * ChannelOutboundHandler)} once), on the channel's event loop, after this handler was added.
   *
   * @throws ChannelPipelineException if {@code handler}'s {@code handlerAdded} throws (it is then
   *     not hosted)
   * @throws IllegalStateException if this handler already hosts one
   * @throws IllegalArgumentException if {@code handler} is neither inbound nor outbound
   */
  public void host(ChannelHandler handler) {
    host(
        handler instanceof ChannelInboundHandler ? (ChannelInboundHandler) handler : null,
        handler instanceof ChannelOutboundHandler ? (ChannelOutboundHandler) handler : null);
  }

  /**
   * Runs two handlers inside this entry, as {@link #host(ChannelHandler)} runs one: {@code
   * inbound} gets the inbound events listed there and {@code outbound} the outbound ones; {@code
   * handlerAdded} goes to the inbound one first, {@code handlerRemoved} to the outbound one first.
   * pinless's ALTS credentials run a connection end's {@link io.pinless.alts.AltsRecordDecoder}
   * (with the frame slicer inside it) and {@link io.pinless.alts.AltsRecordEncoder} here, without
   * the {@link io.pinless.alts.AltsRecordCodec} object that pairs them elsewhere. Either may be
   * null, not both; they may be the same object (it is then added and removed once).
   *
   * @throws ChannelPipelineException if a {@code handlerAdded} throws (neither is then hosted,
   *     and an inbound one already added has had {@code handlerRemoved})
   * @throws IllegalStateException if this handler already hosts one
   * @throws IllegalArgumentException if both are null
   */
  public void host(ChannelInboundHandler inbound, ChannelOutboundHandler outbound) {
    if (this.inbound != null || this.outbound != null) {
      throw new IllegalStateException("already hosts " + hosted());
    }
    if (inbound == null && outbound == null) {
      throw new IllegalArgumentException("nothing to host");
    }
    ChannelHandler adding = inbound;
    try {
      if (inbound != null) {
        inbound.handlerAdded(ctx);
      }
      if (outbound != null && outbound != inbound) {
        adding = outbound;
        outbound.handlerAdded(ctx);
      }
    } catch (Exception e) {
      if (adding != inbound && inbound != null) {
        try {
          inbound.handlerRemoved(ctx);
        } catch (Exception suppressed) {
          e.addSuppressed(suppressed);
        }
      }
      throw new ChannelPipelineException(
          adding.getClass().getName() + ".handlerAdded() has thrown an exception", e);
    }
    this.inbound = inbound;
    this.outbound = outbound;
  }

  /** The inbound handler run inside this entry ({@link #host}), else the outbound one, or null. */
  public ChannelHandler hosted() {
    return inbound != null ? inbound : outbound;
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) throws Exception {
    try {
      try {
        if (outbound != null && outbound != inbound) {
          outbound.handlerRemoved(ctx);
        }
      } finally {
        if (inbound != null) {
          inbound.handlerRemoved(ctx);
        }
      }
    } finally {
      budget.releaseAll();
      cancelSweep();
    }
  }

  /** @param msg owned: handed to the hosted handler, else fired on */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
    if (inbound != null) {
      inbound.channelRead(ctx, msg);
    } else {
      ctx.fireChannelRead(msg);
    }
  }

  /** @param msg owned: handed to the hosted handler, else written on */
  @Override
  public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise)
      throws Exception {
    if (outbound != null) {
      outbound.write(ctx, msg, promise);
    } else {
      ctx.write(msg, promise);
    }
  }

  @Override
  public void close(ChannelHandlerContext ctx, ChannelPromise promise) throws Exception {
    if (outbound != null) {
      outbound.close(ctx, promise);
    } else {
      ctx.close(promise);
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) throws Exception {
    try {
      if (inbound != null) {
        inbound.channelInactive(ctx);
      } else {
        ctx.fireChannelInactive();
      }
    } finally {
      budget.releaseAll();
      cancelSweep();
    }
  }

  private void cancelSweep() {
    if (sweepTimer != null) {
      sweepTimer.cancel(false);
      sweepTimer = null;
    }
  }

  @Override
  public void flush(ChannelHandlerContext ctx) throws Exception {
    if (outbound != null) {
      outbound.flush(ctx);
    } else {
      ctx.flush();
    }
    if (readOwed) {
      budget.sweep();
      readIfReady();
    }
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    ctx.fireChannelActive();
    readIfReady();
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    ctx.fireChannelReadComplete();
    budget.sweep();
    readIfReady();
    sweepLater();
  }

  @Override
  public void channelWritabilityChanged(ChannelHandlerContext ctx) {
    ctx.fireChannelWritabilityChanged();
    resume();
  }

  /** Swallows read requests from the handlers behind this one: reading is decided here. */
  @Override
  public void read(ChannelHandlerContext ctx) {}

  private void resume() {
    if (readOwed) {
      readIfReady();
    }
  }

  /**
   * Sweeps the budget, retries a held read, and comes back while anything is still tracked; with
   * nothing tracked and no read held, gives back the budget's table.
   */
  private void sweepNow() {
    sweepTimer = null;
    // A held read is checked often; otherwise the timer backs off, and starts short again once
    // nothing is tracked.
    sweepBackoff = readOwed ? 0 : (byte) Math.min(sweepBackoff + 1, MAX_SWEEP_BACKOFF);
    budget.sweep();
    resume();
    if (!readOwed) {
      budget.trim();
    }
    sweepLater();
  }

  /**
   * Schedules the next timer sweep if one is needed: soon for a held read; after the backing-off
   * delay while buffers are tracked; after {@link #MAX_SWEEP_MILLIS} to give back the budget's
   * table once nothing is tracked. An earlier timer already scheduled is kept, a later one
   * brought forward.
   */
  private void sweepLater() {
    if (budget.trackedBuffers() == 0) {
      sweepBackoff = 0;
    }
    long delay;
    if (readOwed) {
      delay = SWEEP_MILLIS;
    } else if (budget.trackedBuffers() > 0) {
      delay = SWEEP_MILLIS << sweepBackoff;
    } else if (budget.hasTable()) {
      delay = MAX_SWEEP_MILLIS;
    } else {
      return;
    }
    if (!ctx.channel().isActive()) {
      return;
    }
    if (sweepTimer != null) {
      if (sweepTimer.getDelay(TimeUnit.MILLISECONDS) <= delay) {
        return;
      }
      sweepTimer.cancel(false);
    }
    sweepTimer = ctx.executor().schedule(reads, delay, TimeUnit.MILLISECONDS);
  }

  /** False while a hold applies: the channel is not writable (when enabled) or over budget. */
  private boolean mayRead() {
    return !(holdWhileUnwritable && !ctx.channel().isWritable()) && !budget.isExceeded();
  }

  private void readIfReady() {
    if (!ctx.channel().isActive()) {
      return;
    }
    if (!mayRead()) {
      readOwed = true;
      sweepLater();
      return;
    }
    readOwed = false;
    ctx.read();
  }

  /**
   * A handler behind this one that may supply the buffer the next read goes into, such as a
   * record decoder whose record a read cut short.
   */
  public interface ReadTarget {
    /**
     * The buffer the next read should fill from its writer index, or null for a fresh one.
     *
     * @return owned by the read loop (retained for it), which fires it on like any read buffer
     */
    ByteBuf nextReadBuffer();

    /**
     * How many bytes a fresh read should ask for, when {@link #nextReadBuffer} gave none: more
     * than 0 (at most 64 KiB are asked for) to size it from what the target expects next, such
     * as the rest of a cut record and one whole record behind it; 0 to leave it to the handler's
     * own read size. A buffer sized so has no {@link #HEADROOM_BYTES} in front: the target reads
     * it, nothing behind the target sees it.
     */
    default int nextReadBytes() {
      return 0;
    }
  }

  /** Sets (or, with null, clears) where reads go; call on the channel's event loop. */
  public void readTarget(ReadTarget target) {
    this.target = target;
  }

  /** True while a read is held back. */
  boolean isHoldingRead() {
    return readOwed;
  }

  /**
   * The channel's read policy, this handler's own (not a wrapper of Netty's adaptive one, whose
   * handle, calculator and supplier cost each connection end 112 bytes; this one is 32): reads of
   * {@link #size} bytes, which starts at the maximum, halves after two batches in a row that read
   * at most half of it (down to
   * {@link #MIN_READ_BYTES}) and goes back to the maximum as soon as a read fills its buffer;
   * batches go on while reads fill their buffers, up to {@link #MAX_READS_PER_BATCH}, and stop as
   * soon as a hold applies.
   */
  private final class BatchHandle
      implements RecvByteBufAllocator.ExtendedHandle, RecvByteBufAllocator, Runnable {
    /** The size of the next read. */
    private int size = maxReadBytes;
    /** What the transport tried to read into the last buffer. */
    private int attemptedBytes;
    /** What the last read got (negative at the end of stream). */
    private int lastBytes;
    /** Reads in the current batch (at most {@link #MAX_READS_PER_BATCH} before it stops). */
    private byte readsInBatch;
    /** The last batch read at most half of {@link #size}: one more such batch halves it. */
    private boolean shrinkNext;

    /** The channel's one handle: this object (a channel asks once and keeps it). */
    @Override
    public RecvByteBufAllocator.Handle newHandle() {
      return this;
    }

    /** The sweep timer's task. */
    @Override
    public void run() {
      sweepNow();
    }

    @Override
    public void reset(ChannelConfig config) {
      readsInBatch = 0;
      lastBytes = 0;
      attemptedBytes = 0;
    }

    /**
     * @return owned by the channel's read loop: the target's buffer, a fresh one of the size the
     *     target asks for, or a fresh one, empty, with {@link #HEADROOM_BYTES} before it
     */
    @Override
    public ByteBuf allocate(ByteBufAllocator alloc) {
      ReadTarget into = target;
      if (into != null) {
        ByteBuf buf = into.nextReadBuffer();
        if (buf != null) {
          return buf;
        }
        int wanted = into.nextReadBytes();
        if (wanted > 0) {
          // The target consumes what it sized: no headroom, and a pool size class of its own.
          return alloc.ioBuffer(Math.min(wanted, LARGEST_READ_BYTES));
        }
      }
      ByteBuf buf = alloc.ioBuffer(size);
      return buf.writerIndex(HEADROOM_BYTES).readerIndex(HEADROOM_BYTES);
    }

    @Override
    public int guess() {
      return size;
    }

    @Override
    public void incMessagesRead(int reads) {
      readsInBatch = (byte) Math.min(readsInBatch + reads, MAX_READS_PER_BATCH);
    }

    @Override
    public void lastBytesRead(int bytes) {
      lastBytes = bytes;
      if (bytes > 0 && bytes == attemptedBytes) {
        size = maxReadBytes;
        shrinkNext = false;
      }
    }

    @Override
    public int lastBytesRead() {
      return lastBytes;
    }

    @Override
    public void attemptedBytesRead(int bytes) {
      attemptedBytes = bytes;
    }

    @Override
    public int attemptedBytesRead() {
      return attemptedBytes;
    }

    @Override
    public boolean continueReading() {
      return readsInBatch < MAX_READS_PER_BATCH
          && lastBytes > 0
          && lastBytes == attemptedBytes
          && mayRead();
    }

    @Override
    public boolean continueReading(UncheckedBooleanSupplier maybeMoreData) {
      return readsInBatch < MAX_READS_PER_BATCH
          && lastBytes > 0
          && maybeMoreData.get()
          && mayRead();
    }

    /**
     * A batch that went on past its first read had full reads (the size is the maximum); one of a
     * single read of at most half the size counts towards halving it.
     */
    @Override
    public void readComplete() {
      if (readsInBatch == 1 && lastBytes >= 0 && lastBytes <= size / 2) {
        if (shrinkNext) {
          size = Math.max(MIN_READ_BYTES, size / 2);
        }
        shrinkNext = !shrinkNext;
      } else {
        shrinkNext = false;
      }
    }
  }
}
