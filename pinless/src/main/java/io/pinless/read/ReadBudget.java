package io.pinless.read;

import io.netty.buffer.ByteBuf;
import io.pinless.PinlessMetrics.Metric;
import java.util.Arrays;

/**
 * The inbound memory a connection has handed on and that is still held downstream, against a
 * limit. The frame slicer ({@link io.pinless.http2.FrameSlicer}) tracks every buffer whose bytes
 * it hands on (the read buffers it slices, the copies it makes); the {@link ReadPolicy} reads no
 * more while the tracked total is above the limit.
 *
 * <p>Ownership: tracking a buffer takes one reference to it, held here. A tracked buffer counts
 * its capacity (what it pins in the pool) until that reference is the only one left, which means
 * everyone downstream has released the slices and copies of it; then the budget releases it and
 * stops counting it. Nobody can take a new reference to a buffer whose only reference is ours, so
 * the check cannot race with the threads that release. This needs no wrapper object per buffer
 * handed on, so handing on a slice of a read buffer allocates nothing.
 *
 * <p>Confined to the channel's event loop. The total may overstate until the next sweep, never
 * understate: the {@link ReadPolicy} sweeps after every read batch and, while anything is
 * tracked, on a timer of at most {@link ReadPolicy#MAX_SWEEP_MILLIS} ms, so a buffer
 * outlives its last downstream release by at most that; a budget also sweeps when its table is
 * full and before it says it is exceeded.
 *
 * <p>A budget made with a {@link ProcessBudget} joins it on its first report, reports what it
 * tracks and its peer's credit there, and leaves it at {@link #end}; while the process's budget
 * is pressed it bounds the credit the peer may get ({@link #maxCreditBytes}). What the
 * application still holds when the connection ends stays counted there until released.
 *
 * <p>The limit bounds what the application holds, not the messages under way: gRPC holds every
 * byte of a message until the message is complete, so a connection that knows its messages (see
 * {@link ReadPolicy.Valve}) lets the total exceed the limit by what incomplete messages pin. A
 * connection that does not should have a limit above the largest message the application
 * accepts, or a message over it stops reading for good.
 */
public final class ReadBudget {
  /** 64 MiB: well above gRPC's default 4 MiB message limit and the 16 MiB messages we test. */
  public static final long DEFAULT_LIMIT_BYTES = 64L << 20;
  /**
   * The least a connection may be granted past its credit while the process's budget is not
   * pressed: a frame of HTTP/2's default size. Parts of a room that shrinks with every grant would
   * otherwise approach the pressed threshold without passing it, and a message that needs a loan
   * would wait at the threshold for good.
   */
  static final long MIN_ROOM_BYTES = 16 * 1024;
  /**
   * The credit an idle connection may always be brought back to while the process's budget is
   * not pressed: HTTP/2's initial window, which every peer holds at the start anyway, so that it
   * can start a message.
   */
  static final long IDLE_CREDIT_BYTES = 65_535;
  /** The table's first size. */
  private static final int INITIAL_SLOTS = 4;

  /** A connection's messages under way, as loans from the process's budget see them. */
  public interface Messages {
    /** The bytes still to come of the messages under way. */
    long remainingBytes();

    /** The bytes still to come of the messages under way that a loan covers. */
    long coveredBytes();

    /** A loan now covers every message under way; one started later is not covered. */
    void coverAll();

    /** No loan covers any message under way any more. */
    void uncoverAll();

    /** The DATA bytes the peer has sent on the connection, in all. */
    long dataBytes();

    /**
     * What the DATA frames of the messages under way measure so far: bytes gRPC holds until the
     * messages are whole, tracked or not yet (a cut frame's piece, a join that waits).
     */
    long pendingFrameBytes();
  }

  private final long limitBytes;
  /** Where the tracked bytes are summed with every other connection's; null for nowhere. */
  private final ProcessBudget process;
  /** The credit last reported to {@link #process}. */
  private long credit;
  /** {@link Messages#dataBytes} when last asked for the cap. */
  private long dataSeen;
  /** The most the peer may be granted in all while pressed, as promised; 0 while not capped so. */
  private long cap;
  /** What the peer may still be granted under {@link #cap}, as last reported to the process. */
  private long promised;
  /** What {@link #process} lends this connection past its fair share; made when first pressed. */
  private Loan loan;
  /** Its credit is capped no more ({@link #stopCapping}): sweeps shrink its loan. */
  private boolean uncapped;
  /** This budget is one of {@link #process}'s connections: it reported there. */
  private boolean joined;
  /** The connection left {@link #process}'s connections: it ended. */
  private boolean left;
  /**
   * The tracked buffers, each with one reference held by this budget; {@code [0, count)}. Made on
   * the first {@link #track}, doubled when a sweep cannot make room, and given back by {@link
   * #trim} once nothing is tracked: the {@link ReadPolicy} trims a connection that has gone quiet,
   * not after every read batch (building the table again after most batches of a download costs
   * heap), so an idle connection keeps no table.
   */
  private ByteBuf[] tracked;
  /** The capacity each tracked buffer had when tracked (what it is counted for). */
  private int[] capacities;
  private int count;
  /** The capacities of the tracked buffers. */
  private long trackedBytes;

  /** A budget of {@code limitBytes}; {@link Long#MAX_VALUE} never holds reads back. */
  public ReadBudget(long limitBytes) {
    this(limitBytes, null);
  }

  /**
   * A budget of {@code limitBytes} that also reports to {@code process} (null for none), which
   * counts it as a connection from its first report until {@link #end}.
   */
  public ReadBudget(long limitBytes, ProcessBudget process) {
    if (limitBytes <= 0) {
      throw new IllegalArgumentException("limitBytes " + limitBytes + " must be positive");
    }
    this.limitBytes = limitBytes;
    this.process = process;
  }

  /** True while this budget reports to a process's budget as one of its connections. */
  private boolean reports() {
    if (process == null || left) {
      return false;
    }
    if (!joined) {
      joined = true;
      process.join();
    }
    return true;
  }

  /** The limit in bytes. */
  public long limitBytes() {
    return limitBytes;
  }

  /** True while this budget reports to a process's budget that is pressed. */
  public boolean processPressed() {
    return process != null && !left && process.isPressed();
  }

  /**
   * A read of {@code bytes} is about to be handed on: its DATA counts as credit spent at once and
   * its pieces are tracked one by one. While the process is pressed the read counts as committed
   * meanwhile, so that a loan weighed on another event loop sees its bytes as credit or held.
   *
   * @return what was counted, to give to {@link #received} once the read is handed on
   */
  public long receiving(int bytes) {
    if (!processPressed()) {
      return 0;
    }
    process.addReceiving(bytes);
    return bytes;
  }

  /** The read {@link #receiving} counted {@code counted} for is handed on and tracked. */
  public void received(long counted) {
    if (counted != 0) {
      process.addReceiving(-counted);
    }
  }

  /**
   * Counts {@code buf} until everyone else has released it.
   *
   * @param buf borrowed: retained once here; that reference is released by a later sweep
   */
  public void track(ByteBuf buf) {
    if (tracked == null) {
      tracked = new ByteBuf[INITIAL_SLOTS];
      capacities = new int[INITIAL_SLOTS];
    } else if (count == tracked.length) {
      sweep();
      if (count == tracked.length) {
        tracked = Arrays.copyOf(tracked, count * 2);
        capacities = Arrays.copyOf(capacities, count * 2);
      }
    }
    int capacity = pinnedBytes(buf);
    capacities[count] = capacity;
    tracked[count++] = buf.retain();
    trackedBytes += capacity;
    Metric.TRACKED_BYTES.add(capacity);
    if (process != null) {
      reports();
      process.add(capacity);
    }
  }

  /**
   * The bytes holding {@code buf} keeps alive: the capacity of the buffer it derives from, to the
   * end of the memory it may grow into without moving (a pooled buffer's size class). A transport
   * may hand a read on as a slice of a larger buffer (io_uring's provided-buffer ring does), and
   * a retained slice keeps all of that buffer.
   *
   * @param buf borrowed
   */
  public static int pinnedBytes(ByteBuf buf) {
    ByteBuf root = buf;
    for (ByteBuf under = root.unwrap(); under != null; under = root.unwrap()) {
      root = under;
    }
    long inPlace = (long) root.writerIndex() + root.maxFastWritableBytes();
    return (int) Math.max(Math.max(buf.capacity(), root.capacity()),
        Math.min(inPlace, Integer.MAX_VALUE));
  }

  /** The capacity of the tracked buffers still held downstream, after a sweep. */
  public long retainedBytes() {
    sweep();
    return trackedBytes;
  }

  /** True while the buffers held downstream exceed the limit. */
  public boolean isExceeded() {
    return isExceeded(0);
  }

  /**
   * True while the buffers held downstream exceed the limit by more than {@code allowanceBytes}
   * (what messages still arriving pin, which the limit does not bound).
   */
  public boolean isExceeded(long allowanceBytes) {
    // Saturating: a limit near Long.MAX_VALUE is no limit, whatever the allowance.
    long allowance = Math.max(0, allowanceBytes);
    long bound = limitBytes > Long.MAX_VALUE - allowance ? Long.MAX_VALUE : limitBytes + allowance;
    return trackedBytes > bound && retainedBytes() > bound;
  }

  /**
   * Sets the flow-control credit this connection's peer may still use, reported to the process's
   * budget; nothing without one.
   */
  public void credit(long bytes) {
    if (reports()) {
      process.addCredit(bytes - credit);
      credit = bytes;
      promise();
    }
  }

  /** Reports what the peer may still be granted under {@link #cap} past its credit. */
  private void promise() {
    long next = Math.max(0, cap - credit);
    process.addPromised(next - promised);
    promised = next;
  }

  /**
   * Reports that the peer may be granted up to {@code bytes} in all (0: it is not capped by a
   * share or loan, and nothing is promised).
   */
  private void promiseUpTo(long bytes) {
    cap = bytes;
    promise();
  }

  /**
   * The most credit the peer may hold now. While the process's budget is pressed ({@link
   * ProcessBudget#isPressed}), what the fair share, and a loan from the process's overdraft, leave
   * beyond what is held, taken in turns with other connections ({@link Loan#cap}). Not pressed,
   * no loan, and this connection's part of the room below the pressed threshold ({@link
   * ProcessBudget#roomBytes}), at least {@link #MIN_ROOM_BYTES}, so that connections granting at
   * once pass it by little (a share, larger while few connections report, could together pass it
   * by far). Idle (no message under way, and no DATA since the last ask), its part of the room
   * below the idle threshold ({@link ProcessBudget#idleRoomBytes}), and at least {@link
   * #IDLE_CREDIT_BYTES} in all: credit idle peers hold cannot be taken back when they all start
   * sending at once.
   */
  public long maxCreditBytes(Messages messages) {
    if (!reports()) {
      return Long.MAX_VALUE;
    }
    // Between small messages a busy connection has none under way: DATA since the last ask
    // shows it busy.
    long data = messages.dataBytes();
    boolean idle = messages.remainingBytes() == 0 && data == dataSeen;
    dataSeen = data;
    if (!process.isPressed()) {
      if (loan != null && loan.repay()) {
        messages.uncoverAll();
      }
      promiseUpTo(0);
      int connections = Math.max(1, process.connections());
      // Credit granted pins up to a quarter more than it carries.
      if (idle) {
        long room = process.idleRoomBytes() * 4 / 5 / connections;
        return Math.max(credit + room, IDLE_CREDIT_BYTES);
      }
      long room = process.roomBytes() * 4 / 5 / connections;
      return credit + Math.max(room, MIN_ROOM_BYTES);
    }
    if (loan == null) {
      loan = new Loan(process);
    }
    // Bytes of messages under way count even before they are tracked: a cap from the tracked
    // alone would grant past the share what the connection has already received.
    long held = Math.max(trackedBytes, messages.pendingFrameBytes());
    try {
      long capped = loan.cap(messages, held, credit);
      // An idle peer's cap rises to what its share leaves the moment a message starts, without a
      // loan: that is promised too, so that loans leave room for it.
      long share = Math.max(0, process.fairShareBytes() + loan.bytes() - held) * 4 / 5;
      promiseUpTo(Math.max(capped, share));
      return capped;
    } finally {
      loan.promised();
    }
  }

  /**
   * The connection's credit is capped no more (its writes can no longer be followed): its loan
   * covers only what it holds past its share (while the process is pressed, even if it never
   * borrowed), shrinking at each sweep as the application releases, and it leaves the queue, so
   * that neither waits on a connection that will not ask again.
   */
  public void stopCapping() {
    uncapped = true;
    if (loan == null && processPressed()) {
      loan = new Loan(process);
    }
    if (loan != null && !left) {
      loan.keepForHeld(trackedBytes);
    }
    if (process != null && !left) {
      promiseUpTo(0);
    }
  }

  /** This connection's turn for a loan. */
  long turn() {
    return loan == null ? 0 : loan.turn();
  }

  /** True while this connection waits for a loan in turn. */
  boolean queued() {
    return loan != null && loan.queued();
  }

  /** What the peer may still be granted past its credit under its cap, as last reported. */
  long promisedBytes() {
    return promised;
  }

  /** What the process's budget lends this connection now. */
  long loanBytes() {
    return loan == null ? 0 : loan.bytes();
  }

  /** What the tracked buffers are counted for, before a sweep. */
  long trackedBytes() {
    return trackedBytes;
  }

  /** How many buffers the tracking arrays have room for: 0 when it has none. */
  int slots() {
    return tracked == null ? 0 : tracked.length;
  }

  /**
   * Gives back the tracking table if nothing is tracked, so that the budget holds nothing; the
   * next {@link #track} makes a small one again.
   *
   * @return true if the budget now holds no table
   */
  public boolean trim() {
    if (count == 0) {
      tracked = null;
      capacities = null;
    }
    return tracked == null;
  }

  /** True while the budget has a tracking table (something was tracked since the last trim). */
  public boolean hasTable() {
    return tracked != null;
  }

  /** How many buffers are tracked (some may be released by the next sweep). */
  public int trackedBuffers() {
    return count;
  }

  /** Releases every buffer only this budget still holds, and stops counting it. */
  public void sweep() {
    int kept = 0;
    long released = 0;
    for (int i = 0; i < count; i++) {
      ByteBuf buf = tracked[i];
      if (buf.refCnt() == 1) {
        released += capacities[i];
        buf.release();
      } else {
        capacities[kept] = capacities[i];
        tracked[kept++] = buf;
      }
    }
    if (count > kept) {
      Arrays.fill(tracked, kept, count, null);
      trackedBytes -= released;
      Metric.TRACKED_BYTES.add(-released);
      if (process != null) {
        process.remove(released);
      }
      if (uncapped && loan != null && !left) {
        // Nobody asks for this connection's cap any more: its loan follows what it holds.
        loan.keepForHeld(trackedBytes);
      }
    }
    count = kept;
  }

  /**
   * The connection ended: releases what nobody else holds and leaves the process's connections,
   * taking its credit and loan with it. Without a process's budget it releases everything ({@link
   * #releaseAll}); with one, what the application still holds stays counted there until a later
   * {@link #sweep} finds it released.
   *
   * @return true while buffers stay tracked: sweep until this budget tracks none
   */
  public boolean end() {
    sweep();
    leave();
    if (process == null || count == 0) {
      releaseAll();
      return false;
    }
    return true;
  }

  private void leave() {
    if (process != null && !left) {
      left = true;
      if (joined) {
        process.addCredit(-credit);
        process.addPromised(-promised);
        if (loan != null) {
          loan.repay();
        }
        process.leave();
      }
      credit = 0;
      cap = 0;
      promised = 0;
    }
  }

  /** Gives up this budget's references and leaves the process's budget; it counts nothing after. */
  public void releaseAll() {
    for (int i = 0; i < count; i++) {
      tracked[i].release();
    }
    Metric.TRACKED_BYTES.add(-trackedBytes);
    leave();
    if (process != null) {
      process.remove(trackedBytes);
    }
    tracked = null;
    capacities = null;
    count = 0;
    trackedBytes = 0;
  }
}
