package io.pinless.read;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;
import io.netty.util.UncheckedBooleanSupplier;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.ScheduledFuture;
import io.pinless.PinlessMetrics.Metric;
import java.util.Collections;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * When a connection's socket is read, and how much. A handler drives it from its pipeline entry
 * ({@link ReadOnReadyHandler} alone, or {@code io.pinless.connection.ConnectionHandler} with the
 * stages above it); it knows nothing of what the bytes carry.
 *
 * <p>When: {@code AUTO_READ} is off; the policy asks for one read when the channel becomes active
 * and one after each read batch. It holds the next read back while the {@link ReadBudget} is
 * exceeded and, when enabled, while the channel is not writable, and asks for it as soon as both
 * clear. The driving handler swallows every other handler's {@code read()}.
 *
 * <p>With a {@link Valve} (an HTTP/2 connection that sees its frames), the budget holds the peer
 * instead of the reads: while the budget is exceeded the valve withholds flow-control credit, and
 * reads go on, so control frames (PING, SETTINGS, GOAWAY) are read and answered. The budget then
 * allows what incomplete messages pin ({@link Valve#allowanceBytes}): gRPC releases nothing of a
 * message until it is whole, so counting it would stop the message that frees it. Reads are held
 * for the budget only while the peer has sent more than the credit it was given. The first time
 * the budget holds a connection back, the policy logs a warning (at most one per {@link
 * #WARNING_INTERVAL_NANOS} in the process): an application that keeps zero-copy messages
 * unreleased otherwise stalls its streams silently.
 *
 * <p>Budget sweeps: after every read batch, on every flush while a read is held (gRPC flushes
 * window updates as the application consumes), and on a timer while the budget tracks anything.
 * The timer starts at {@link #SWEEP_MILLIS} and doubles up to {@link #MAX_SWEEP_MILLIS}; a held
 * read, or a held peer with a message under way or buffers tracked, is retried every {@link
 * #SWEEP_MILLIS} (a held peer with neither backs off too). A timer sweep that finds nothing
 * tracked gives back the budget's table, so a quiet connection holds none. After the connection
 * ends, an {@link EndedSweep} sweeps on while the application still holds what the budget counts
 * for a process's budget ({@link ReadBudget#end}), and the policy leaves the budget alone. The
 * timer is not the event loop's: a task scheduled on a loop makes every turn of it read the clock
 * and every wait for its sockets arm a kernel timer, a cost a busy download pays for as long as
 * it runs. The timers are on one wheel for the process ({@link HashedWheelTimer}, a daemon thread
 * ticking every {@link #TICK_MILLIS} ms), and a timer that fires hands the sweep to the
 * connection's loop.
 * A channel whose loop keeps a clock of its own ({@link EmbeddedChannel}, in tests) uses that
 * loop's scheduler instead, so its clock decides when sweeps fall due.
 *
 * <p>How much: Netty's transports take a buffer only once the socket is readable (NIO, epoll and
 * Netty 4.2's io_uring after readiness; io_uring with a provided-buffer ring when data arrives,
 * in one of the ring's buffers, which the policy does not size: it tells the stage above, {@link
 * ReadTarget#readSizedByTransport}). Reads start at the maximum. A batch whose last read left
 * its buffer short sizes the next read to what the whole batch got, rounded up to the pool's
 * size class (at least half the size before, at least {@link #MIN_READ_BYTES}): a peer that
 * sends in bursts gets one buffer a whole burst fits, so a burst takes one read and not a full
 * one and then the rest, and a read that stalls mid-message pins little more than it holds. A
 * read that fills its buffer goes back to the maximum at once. A batch goes on for up to {@link
 * #MAX_READS_PER_BATCH} reads while each read fills its buffer and no hold applies. A stage
 * above may size reads itself ({@link ReadTarget}) and may ask for free bytes before each fresh
 * buffer's reader index ({@link #headroom}).
 *
 * <p>The policy is also the channel's {@link RecvByteBufAllocator}, its handle and its sweep
 * timer's task: one object per connection end (Netty's adaptive handle with its calculator and
 * supplier costs 112 bytes).
 *
 * <p>Memory: the policy holds no buffer. Confined to the channel's event loop, but for its timers'
 * firing, which only hands the sweep to that loop.
 */
public final class ReadPolicy
    implements RecvByteBufAllocator.ExtendedHandle, RecvByteBufAllocator, TimerTask {
  /** 1 KiB: small enough that a trickle of small frames does not take large buffers. */
  public static final int MIN_READ_BYTES = 1024;
  /**
   * 48 KiB, a pool size class: three 16 KiB HTTP/2 frames nearly fit, and a DATA frame of 12 KiB
   * or more is at least a quarter of it, so the frame slicer slices gRPC's bulk frames. Larger
   * than grpc-go's 32.5 KiB because each read costs the decoders behind it a pass.
   */
  public static final int MAX_READ_BYTES = 48 * 1024;
  /** 64 KiB: the largest read the policy asks for by itself, as in Netty's adaptive reads. */
  public static final int LARGEST_READ_BYTES = 64 * 1024;
  /**
   * 132 KiB: the largest read a stage above may ask for, a whole 128 KiB ALTS record with the
   * small rest of a cut one before it. Reading a record whole saves copying its head.
   */
  public static final int LARGEST_TARGET_READ_BYTES = 132 * 1024;
  /** 16 reads, Netty's default per batch. */
  public static final int MAX_READS_PER_BATCH = 16;
  /** While the budget tracks buffers, it is swept this often (besides every batch and flush). */
  public static final long SWEEP_MILLIS = 10;
  /** The longest the sweep timer waits: it doubles each time from {@link #SWEEP_MILLIS}. */
  public static final long MAX_SWEEP_MILLIS = 1280;
  /** How many times the sweep delay doubles: 10 ms to {@link #MAX_SWEEP_MILLIS}. */
  static final int MAX_SWEEP_BACKOFF = 7;
  /** The sweep timers' resolution: a timer fires at most this much after it is due. */
  public static final long TICK_MILLIS = 10;

  /** The process's sweep timers, off the event loops; the wheel's thread starts on first use. */
  private static final class Wheel {
    static final Timer TIMER = new HashedWheelTimer(
        new DefaultThreadFactory("pinless-sweeps", true), TICK_MILLIS, TimeUnit.MILLISECONDS, 128);
  }

  /** One budget warning per 10 minutes in the process at most: each connection would repeat it. */
  static final long WARNING_INTERVAL_NANOS = TimeUnit.MINUTES.toNanos(10);
  private static final Logger logger = Logger.getLogger(ReadPolicy.class.getName());
  /** When the next budget warning may be logged ({@link System#nanoTime}); 0 at first. */
  static final AtomicLong nextWarningNanos = new AtomicLong();

  /**
   * Holds a connection's peer back by flow control, for a policy that then goes on reading. Called
   * on the channel's event loop.
   */
  public interface Valve {
    /** Bytes past the limit the budget allows now: what the messages still arriving pin. */
    long allowanceBytes();

    /** Holds the peer back while {@code exceeded}, lets it go once not; true while holding it. */
    boolean holdPeer(boolean exceeded);

    /** True when the peer has sent more than the credit it was given: reads are held then. */
    boolean peerOverdrawn();

    /** The flow-control credit the peer may still use: granted and not yet sent. */
    default long creditBytes() {
      return 0;
    }

    /** The most a read the policy sizes needs now; {@link Long#MAX_VALUE} for no bound. */
    default long readLimitBytes() {
      return Long.MAX_VALUE;
    }

    /**
     * True while some message has arrived in part. A held peer with none, on a connection that
     * holds nothing, waits for room elsewhere: the policy then looks again on its backing-off
     * timer, not every {@link #SWEEP_MILLIS}, so idle connections of a pressed process cost
     * little.
     */
    default boolean messagesUnderWay() {
      return true;
    }
  }

  /** A stage above that may supply the next read's buffer or size. */
  public interface ReadTarget {
    /**
     * The buffer the next read should fill from its writer index, or null for a fresh one.
     *
     * @return owned by the read loop (retained for it), which fires it on like any read buffer
     */
    ByteBuf nextReadBuffer();

    /**
     * The size of a fresh read (capped at {@link #LARGEST_TARGET_READ_BYTES}), or 0 to leave it
     * to the policy. A buffer sized so has no headroom: the target itself reads it. From a pool it
     * can grow in place by a quarter ({@link ByteBuf#maxFastWritableBytes}), so a record the read
     * cuts may stay in it.
     */
    int nextReadBytes();

    /**
     * The next read is not the policy's: the transport picked its buffer, of {@code bytes}
     * (io_uring with a provided-buffer ring), so neither method above sized it.
     */
    default void readSizedByTransport(int bytes) {}
  }

  private final ReadBudget budget;
  private final boolean holdWhileUnwritable;
  /** The largest read the policy asks for by itself. */
  private final int maxReadBytes;
  /** The size of the next read the policy sizes. */
  private int size;
  private ChannelHandlerContext ctx;
  /** Free bytes before the reader index of each fresh buffer the policy sizes. */
  private int headroom;
  /** Where the next read goes, when a stage above knows; null for a fresh buffer. */
  private ReadTarget target;
  /** A read is wanted but held back by writability or the budget. */
  private boolean readOwed;
  /** Holds the peer back instead of the reads while the budget is exceeded; null for none. */
  private Valve valve;
  /** The valve is holding the peer back. */
  private boolean valveHolding;
  /** This connection has logged its budget warning (or the process had one too recently). */
  private boolean warned;
  /** Where sweep timers run; set on attach. */
  private Timer timer;
  /** The channel's read handle before {@link #attach}, for {@link #handBack}. */
  private RecvByteBufAllocator channelReads;
  /** The channel's AUTO_READ before {@link #attach}. */
  private boolean channelAutoRead;
  /** The connection ended ({@link #detach}). */
  private boolean detached;
  /** The pending sweep timer; null when none. */
  private Timeout sweepTimer;
  /** The delay {@link #sweepTimer} was set for: it fires no later than that from now. */
  private long sweepTimerDelay;
  /** The sweep timer's next delay: {@link #SWEEP_MILLIS} doubled this many times. */
  private byte sweepBackoff;
  /** What the transport tried to read into the last buffer. */
  private int attemptedBytes;
  /** {@link #allocate} gave the read under way its buffer. */
  private boolean allocated;
  /** The channel's pool rounds sizes up by more than a quarter: {@link #roomyBuffer} is off. */
  private boolean coarsePool;
  /** What the last read got (negative at the end of stream). */
  private int lastBytes;
  /** Reads in the current batch. */
  private byte readsInBatch;
  /** Bytes the current batch's reads got. */
  private int batchBytes;

  /**
   * A policy that holds reads while {@code budget} is exceeded and, if {@code
   * holdWhileUnwritable}, while the channel is not writable, with reads of at most {@code
   * maxReadBytes} (1 KiB to 64 KiB).
   */
  public ReadPolicy(ReadBudget budget, boolean holdWhileUnwritable, int maxReadBytes) {
    if (maxReadBytes < MIN_READ_BYTES || maxReadBytes > LARGEST_READ_BYTES) {
      throw new IllegalArgumentException("maxReadBytes must be 1 KiB to 64 KiB: " + maxReadBytes);
    }
    this.budget = budget;
    this.holdWhileUnwritable = holdWhileUnwritable;
    this.maxReadBytes = maxReadBytes;
    this.size = maxReadBytes;
  }

  /** The budget this policy reads against. */
  public ReadBudget budget() {
    return budget;
  }

  /** Leaves {@code bytes} free before the reader index of each fresh buffer it sizes. */
  public void headroom(int bytes) {
    if (bytes < 0 || bytes >= MIN_READ_BYTES) {
      throw new IllegalArgumentException("headroom must be 0 to 1023 bytes: " + bytes);
    }
    headroom = bytes;
  }

  /**
   * Sets (or, with null, clears) the valve that holds the peer back while the budget is exceeded,
   * instead of the reads.
   */
  public void valve(Valve valve) {
    this.valve = valve;
  }

  /** Sets (or, with null, clears) the stage that sizes reads. */
  public void target(ReadTarget target) {
    this.target = target;
  }

  /** Takes over the channel's reads from {@code ctx}, the driving handler's context. */
  public void attach(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    this.timer = ctx.channel() instanceof EmbeddedChannel
        ? new LoopTimer(ctx.executor()) : Wheel.TIMER;
    channelReads = ctx.channel().config().getRecvByteBufAllocator();
    channelAutoRead = ctx.channel().config().isAutoRead();
    ctx.channel().config().setAutoRead(false);
    // With an io_uring buffer ring the kernel picks the buffer: allocate is not called.
    ctx.channel().config().setRecvByteBufAllocator(this);
    readIfReady();
  }

  /** The channel became active: the first read. */
  public void channelActive() {
    if (!detached) {
      readIfReady();
    }
  }

  /** A read batch ended: sweep, read again, and keep the timer going while anything is tracked. */
  public void batchEnded() {
    if (detached) {
      return; // the budget is the ended connection's sweep's
    }
    budget.sweep();
    checkValve();
    readIfReady();
    sweepLater();
  }

  /** A flush passed: gRPC may have released buffers and sent window updates. */
  public void flushed() {
    if (detached) {
      return; // the budget is the ended connection's sweep's
    }
    if (readOwed) {
      budget.sweep();
      readIfReady();
    }
    checkValve();
    if (valveHolding) {
      sweepLater();
    }
  }

  /** Writability changed: a held read may go. */
  public void writabilityChanged() {
    if (readOwed && !detached) {
      readIfReady();
    }
  }

  /**
   * The connection ended: gives up the budget's references, or hands the buffers the application
   * still holds that a process's budget counts to an {@link EndedSweep}.
   */
  public void detach() {
    if (detached) {
      return;
    }
    detached = true;
    if (sweepTimer != null) {
      sweepTimer.cancel();
      sweepTimer = null;
    }
    if (budget.end()) {
      EndedSweep.start(budget, ctx.executor(), timer);
    }
  }

  /**
   * The driving handler left the pipeline: the connection ends as with {@link #detach}, and an
   * open channel gets its reads back as they were before {@link #attach}. With AUTO_READ off, one
   * read goes, for the requests of the handlers behind, which the policy swallowed.
   */
  public void handBack() {
    detach();
    if (ctx == null || !ctx.channel().isOpen()
        || ctx.channel().config().getRecvByteBufAllocator() != this) {
      return;
    }
    ctx.channel().config().setRecvByteBufAllocator(channelReads);
    if (channelAutoRead) {
      ctx.channel().config().setAutoRead(true);
    } else {
      ctx.channel().read();
    }
  }

  /** True while a read is held back. */
  public boolean isHoldingRead() {
    return readOwed;
  }

  /**
   * A sweep timer fired: on the wheel's thread, hands the sweep to the connection's loop.
   */
  @Override
  public void run(Timeout timeout) {
    EventExecutor loop = ctx.executor();
    if (loop.inEventLoop()) {
      sweepNow(timeout);
      return;
    }
    try {
      loop.execute(() -> sweepNow(timeout));
    } catch (RejectedExecutionException e) {
      // The loop is shutting down: its channels close, and detach gives up the references.
    }
  }

  /**
   * Sweeps, retries a held read, and comes back while anything is tracked; nothing when {@code
   * fired} is no longer the pending timer (cancelled or replaced while it was firing).
   */
  private void sweepNow(Timeout fired) {
    if (fired != sweepTimer) {
      return;
    }
    sweepTimer = null;
    sweepBackoff = looksSoon() ? 0 : (byte) Math.min(sweepBackoff + 1, MAX_SWEEP_BACKOFF);
    budget.sweep();
    checkValve();
    if (readOwed) {
      readIfReady();
    }
    if (!readOwed && !valveHolding) {
      budget.trim();
    }
    sweepLater();
  }

  /**
   * Sets the next timer sweep if one is needed: soon for a held read, after the backing-off
   * delay while buffers are tracked, after {@link #MAX_SWEEP_MILLIS} to give back the budget's
   * table. A pending timer set for no longer a delay is kept (it is due sooner still, and keeping
   * it costs a busy connection nothing per batch); one set for longer is replaced.
   */
  private void sweepLater() {
    if (budget.trackedBuffers() == 0 && !valveHolding) {
      sweepBackoff = 0;
    }
    long delay;
    if (looksSoon()) {
      delay = SWEEP_MILLIS;
    } else if (valveHolding || budget.trackedBuffers() > 0) {
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
      if (sweepTimerDelay <= delay) {
        return;
      }
      sweepTimer.cancel();
    }
    sweepTimer = timer.newTimeout(this, delay, TimeUnit.MILLISECONDS);
    sweepTimerDelay = delay;
  }


  /**
   * True while a read is held, or the peer is held with a message under way or buffers tracked:
   * what holds it may clear at any time, so the timer looks every {@link #SWEEP_MILLIS}.
   */
  private boolean looksSoon() {
    return readOwed
        || valveHolding && (budget.trackedBuffers() > 0 || valve.messagesUnderWay());
  }

  /** False while a hold applies. */
  private boolean mayRead() {
    if (holdWhileUnwritable && !ctx.channel().isWritable()) {
      return false;
    }
    if (valve == null) {
      return !budget.isExceeded();
    }
    return !(valve.peerOverdrawn() && budget.isExceeded(valve.allowanceBytes()));
  }

  /** Has the valve hold the peer back while the budget is exceeded, and let it go once not. */
  private void checkValve() {
    if (valve == null || !ctx.channel().isActive()) {
      return;
    }
    boolean held = valveHolding;
    budget.credit(valve.creditBytes());
    valveHolding = valve.holdPeer(budget.isExceeded(valve.allowanceBytes()));
    if (valveHolding && !held) {
      Metric.PEERS_SLOWED.add(1);
      warnHeld();
    }
  }

  /**
   * Logs, once per connection and at most once per {@link #WARNING_INTERVAL_NANOS} in the
   * process, that the connection's own budget holds it back.
   */
  private void warnHeld() {
    if (warned || budget.retainedBytes() <= budget.limitBytes()) {
      return; // held for the process's budget, which logs for itself
    }
    warned = true;
    long now = System.nanoTime();
    long next = nextWarningNanos.get();
    if (next != 0 && now - next < 0 || !nextWarningNanos.compareAndSet(next,
        now + WARNING_INTERVAL_NANOS | 1)) {
      return;
    }
    logger.log(Level.WARNING, "pinless: a connection holds {0} received bytes the application "
        + "has not released, over its read budget of {1} bytes (pinless.read.budgetBytes); its "
        + "peer waits until they are released. Release every zero-copy message with "
        + "ZeroCopyMarshaller.release (or close its Lease) once done with it.",
        new Object[] {Long.toString(budget.retainedBytes()), Long.toString(budget.limitBytes())});
  }

  private void readIfReady() {
    if (!ctx.channel().isActive()) {
      return;
    }
    if (!mayRead()) {
      if (!readOwed) {
        readOwed = true;
        Metric.READS_HELD.add(1);
        if (ctx.channel().isWritable() || !holdWhileUnwritable) {
          warnHeld();
        }
      }
      sweepLater();
      return;
    }
    readOwed = false;
    ctx.read();
  }

  // The channel's read handle.

  /** The channel's one handle: this object (one small object per connection end). */
  @Override
  public RecvByteBufAllocator.Handle newHandle() {
    return this;
  }

  @Override
  public void reset(ChannelConfig config) {
    readsInBatch = 0;
    batchBytes = 0;
    lastBytes = 0;
    attemptedBytes = 0;
  }

  /**
   * @return owned by the channel's read loop: the target's buffer, a fresh one of the size the
   *     target asks for, or a fresh one of the policy's size with the headroom before it
   */
  @Override
  public ByteBuf allocate(ByteBufAllocator alloc) {
    allocated = true;
    ReadTarget into = target;
    if (into != null) {
      ByteBuf buf = into.nextReadBuffer();
      if (buf != null) {
        return buf;
      }
      int wanted = into.nextReadBytes();
      if (wanted > 0) {
        int bytes = Math.min(wanted, LARGEST_TARGET_READ_BYTES);
        return alloc.isDirectBufferPooled() && !coarsePool
            ? roomyBuffer(alloc, bytes) : alloc.ioBuffer(bytes);
      }
    }
    int bytes = size;
    if (valve != null) {
      // A read sized to the credit the peer holds pins no more than what may come.
      long limit = valve.readLimitBytes();
      if (limit < bytes) {
        bytes = (int) Math.max(MIN_READ_BYTES, limit + headroom);
      }
    }
    ByteBuf buf = alloc.ioBuffer(bytes);
    return buf.writerIndex(headroom).readerIndex(headroom);
  }

  /**
   * A buffer of {@code bytes} that can grow in place by a quarter: a pool's buffer of that much
   * more, shrunk (in place) to the read. A pool that rounds that request up by more than a quarter
   * (powers of two) would pin too much for it: its buffers are taken plain from then on.
   *
   * @return owned by the caller
   */
  private ByteBuf roomyBuffer(ByteBufAllocator alloc, int bytes) {
    int roomy = bytes + bytes / 4;
    ByteBuf buf = alloc.ioBuffer(roomy);
    if (buf.maxFastWritableBytes() <= roomy + roomy / 4) {
      return buf.capacity(bytes);
    }
    buf.release();
    coarsePool = true;
    return alloc.ioBuffer(bytes);
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
    if (bytes > 0) {
      batchBytes = (int) Math.min(Integer.MAX_VALUE, (long) batchBytes + bytes);
    }
    if (bytes > 0 && bytes == attemptedBytes) {
      size = maxReadBytes;
    }
  }

  @Override
  public int lastBytesRead() {
    return lastBytes;
  }

  /** Also tells the target when the transport picked the read's buffer itself. */
  @Override
  public void attemptedBytesRead(int bytes) {
    attemptedBytes = bytes;
    if (!allocated && target != null) {
      target.readSizedByTransport(bytes);
    }
    allocated = false;
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

  /** A batch that ended on a short read sizes the next read to what the batch got. */
  @Override
  public void readComplete() {
    if (lastBytes > 0 && lastBytes < attemptedBytes) {
      int wanted = Math.max(size / 2, sizeClass(headroom + Math.min(batchBytes, maxReadBytes)));
      size = Math.max(MIN_READ_BYTES, Math.min(size, wanted));
    }
  }

  /**
   * The size a pooled buffer of {@code bytes} takes: Netty's pool has four size classes per
   * doubling from 16 bytes on.
   */
  public static int sizeClass(int bytes) {
    if (bytes <= 16) {
      return 16;
    }
    int spacing = 1 << Math.max(4, 29 - Integer.numberOfLeadingZeros(bytes - 1));
    return (bytes + spacing - 1) & -spacing;
  }

  /**
   * Timers on one loop's own scheduler, for a loop with a clock of its own: {@link
   * EmbeddedChannel}'s runs what falls due when its caller advances the clock.
   */
  private static final class LoopTimer implements Timer {
    private final EventExecutor loop;

    LoopTimer(EventExecutor loop) {
      this.loop = loop;
    }

    @Override
    public Timeout newTimeout(TimerTask task, long delay, TimeUnit unit) {
      LoopTimeout timeout = new LoopTimeout(this, task);
      timeout.future = loop.schedule(timeout, delay, unit);
      return timeout;
    }

    @Override
    public Set<Timeout> stop() {
      return Collections.emptySet();
    }
  }

  /** A {@link LoopTimer}'s timeout: the scheduled task that runs its timer task. */
  private static final class LoopTimeout implements Timeout, Runnable {
    private final Timer timer;
    private final TimerTask task;
    private ScheduledFuture<?> future;

    LoopTimeout(Timer timer, TimerTask task) {
      this.timer = timer;
      this.task = task;
    }

    @Override
    public void run() {
      try {
        task.run(this);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    public Timer timer() {
      return timer;
    }

    @Override
    public TimerTask task() {
      return task;
    }

    @Override
    public boolean isExpired() {
      return future.isDone() && !future.isCancelled();
    }

    @Override
    public boolean isCancelled() {
      return future.isCancelled();
    }

    @Override
    public boolean cancel() {
      return future.cancel(false);
    }
  }
}
