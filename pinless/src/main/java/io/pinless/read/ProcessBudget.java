package io.pinless.read;

import io.netty.util.internal.PlatformDependent;
import io.pinless.Settings;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The received memory all connections of a process hold, against one limit. Each connection's
 * {@link ReadBudget} adds the pooled bytes it tracks (its read buffers and copies that gRPC and
 * the application still hold) and takes them off when they are released.
 *
 * <p>Each HTTP/2 connection also reports its credit: the connection-level flow-control window
 * its peer may still fill without asking. Held bytes plus credit are what the process has
 * committed. Invariant: while the budget is pressed, no peer is granted credit past what its
 * connection's fair share and loan leave beyond what it holds, and loans stay within the
 * overdraft, so held memory stays within the limit but for credit granted while it was not
 * pressed (loans cover what a connection holds past its share, what its messages under way
 * need, and the start of the next message of one with none under way whose share leaves
 * nothing; other credit a peer does not use borrows nothing).
 *
 * <p>Three responses; the two that shed are lifted with hysteresis so that they do not flap:
 *
 * <ul>
 *   <li>While held bytes and credit are over {@link #PRESSED} of the limit, no peer gets more
 *       credit than its connection's fair share (the limit over the connections that report)
 *       leaves beyond what the connection holds, by withholding HTTP/2 window updates. The
 *       shares divide the limit less an overdraft of {@link #OVERDRAFT} of it, from which a
 *       connection over its share borrows what its messages under way need, so that a message
 *       started completes while others' are released; a loan is repaid as the application
 *       releases. Connections take turns for loans ({@link #queue}), so that messages complete
 *       round by round across connections. Connections under their share are not slowed. Held
 *       memory stays within the limit but for what shares that shrink as connections come had
 *       already granted, and what a covered message's peer spends on other streams. Below
 *       that share of the limit, a connection is granted at most its part of the room left
 *       under it ({@link #roomBytes}), so that grants made at once cannot together pass it;
 *       one with no message under way, its part of the room under {@link #IDLE} of the limit.
 *   <li>From the limit until memory falls under {@link #STREAMS_RESUME} of it: a server refuses
 *       new calls ({@link #shedsStreams}).
 *   <li>From {@link #CONNECTIONS_REFUSED} of the limit until memory falls under the limit: a
 *       server also closes new connections ({@link #refusesConnections}).
 * </ul>
 *
 * <p>Each rise is logged once per condition, at most once per {@link #LOG_INTERVAL_NANOS}.
 *
 * <p>Thread-safe: connections on every event loop add to it.
 */
public final class ProcessBudget {
  /** Credit is capped at fair shares while held bytes and credit are over this share. */
  public static final double PRESSED = 0.5;
  /**
   * Connections with no message under way are granted credit past HTTP/2's initial window only
   * while what is committed is under this share of the limit: idle peers keep what they are
   * granted, and may all start sending at once.
   */
  public static final double IDLE = 0.25;
  /** What messages under way may borrow past their connections' shares, as a share of the limit. */
  public static final double OVERDRAFT = 0.5;
  /** Shedding stops once held memory falls under this share of the limit. */
  public static final double STREAMS_RESUME = 0.75;
  /** Connections are refused from this share of the limit until memory falls under the limit. */
  public static final double CONNECTIONS_REFUSED = 1.125;
  /**
   * A loan whose covered messages receive less than a share of it (at least a frame's bytes, or
   * the rest when less) in this long is taken back, and they wait for a turn again: a peer that
   * claims a message and then goes silent, or trickles, holds a loan at most so long.
   */
  public static final long STALLED_LOAN_NANOS = TimeUnit.SECONDS.toNanos(5);
  /** One log line per condition per minute at most. */
  static final long LOG_INTERVAL_NANOS = TimeUnit.MINUTES.toNanos(1);
  private static final Logger logger = Logger.getLogger(ProcessBudget.class.getName());

  /** No pressure. */
  private static final int CLEAR = 0;
  /** New calls are refused. */
  private static final int SHEDDING = 1;
  /** New calls and new connections are refused. */
  private static final int REFUSING = 2;

  private final long limitBytes;
  /** {@link System#nanoTime}, or a test's clock. */
  private final LongSupplier clock;
  private final AtomicLong heldBytes = new AtomicLong();
  /** The most {@link #heldBytes} has been since the budget was made. */
  private final AtomicLong peakBytes = new AtomicLong();
  /** Credit the connections' peers may still use. */
  private final AtomicLong creditBytes = new AtomicLong();
  /** Bytes of reads whose DATA counts as credit spent and which are not yet all tracked. */
  private final AtomicLong receivingBytes = new AtomicLong();
  /**
   * Credit the connections' caps still allow their peers past what they hold: a loan's credit
   * goes out as the peer's window updates do, and other loans must not count on it as room.
   */
  private final AtomicLong promisedBytes = new AtomicLong();
  /**
   * The part for bytes to come of loans whose connections have not yet reported their promise
   * ({@link #loanPromised}): counted from the moment they are lent, as much as the promise will
   * count them, so that a loan weighed on another event loop in between sees them.
   */
  private final AtomicLong unpromisedLoanBytes = new AtomicLong();
  /** Credit lent past fair shares, at most {@link #overdraftLimit}. */
  private final AtomicLong overdraftBytes = new AtomicLong();
  /** Held while a loan grows: each one weighed sees every one lent before it. */
  private final Object lending = new Object();
  private final long overdraftLimit;
  /** Connections that report here. */
  private final AtomicInteger connections = new AtomicInteger();
  /** How many connections wait for a loan at each turn ({@link #queue}); its own lock. */
  private final TreeMap<Long, Integer> waiting = new TreeMap<>();
  /** The lowest turn in {@link #waiting}; {@link Long#MAX_VALUE} while none waits. */
  private volatile long firstTurn = Long.MAX_VALUE;
  /** The highest turn served a loan; guarded by {@link #waiting}. */
  private long servedTurn;
  private final AtomicInteger level = new AtomicInteger(CLEAR);
  /** When each level may be logged again ({@link System#nanoTime}); 0 at first. */
  private final AtomicLong[] nextLog = {new AtomicLong(), new AtomicLong(), new AtomicLong()};

  /** The process's budget, read from {@code pinless.process.budgetBytes} on first use. */
  private static final class Process {
    static final ProcessBudget BUDGET = Settings.processBudgetBytes() == 0
        ? null : new ProcessBudget(Settings.processBudgetBytes());
  }

  /**
   * The budget every pinless connection of the process reports to; null when {@code
   * pinless.process.budgetBytes} is 0.
   */
  public static ProcessBudget process() {
    return Process.BUDGET;
  }

  /** Half the JVM's direct memory limit: the default {@code pinless.process.budgetBytes}. */
  public static long defaultLimitBytes() {
    return Math.max(1, PlatformDependent.maxDirectMemory() / 2);
  }

  /** A budget of {@code limitBytes} for the connections that report to it. */
  public ProcessBudget(long limitBytes) {
    this(limitBytes, System::nanoTime);
  }

  /** A budget of {@code limitBytes} whose loans go stale by {@code clock} (nanoseconds). */
  ProcessBudget(long limitBytes, LongSupplier clock) {
    if (limitBytes <= 0) {
      throw new IllegalArgumentException("limitBytes " + limitBytes + " must be positive");
    }
    this.limitBytes = limitBytes;
    this.clock = clock;
    this.overdraftLimit = (long) (limitBytes * OVERDRAFT);
  }

  /** The limit in bytes. */
  public long limitBytes() {
    return limitBytes;
  }

  /** The received bytes the connections hold now. */
  public long heldBytes() {
    return heldBytes.get();
  }

  /** The most the connections have held at once since the budget was made. */
  public long peakBytes() {
    return peakBytes.get();
  }

  /** The flow-control credit the connections' peers may still use. */
  public long creditBytes() {
    return creditBytes.get();
  }

  /** How many connections report here. */
  public int connections() {
    return connections.get();
  }

  /**
   * What the connections hold and may be sent: held bytes, and credit a quarter larger, since
   * bytes read pin up to a quarter more than they carry (a pool rounds a buffer up to its size
   * class, and a read is sliced only from a buffer it filled to four fifths while pressed).
   */
  public long committedBytes() {
    // A read's bytes count as being received before the credit they used is reported spent, and
    // are tracked before they stop counting so: read in the other order, bytes moving from
    // credit to held are seen at least once.
    long credit = creditBytes.get();
    long receiving = receivingBytes.get();
    return heldBytes.get() + (credit + receiving) * 5 / 4;
  }

  /**
   * Bytes of reads being handed on changed by {@code delta}: counted from before their DATA
   * counts as credit spent until every piece is tracked ({@link ReadBudget#receiving}).
   */
  void addReceiving(long delta) {
    receivingBytes.addAndGet(delta);
  }

  /** Bytes of reads being handed on now: 0 whenever no connection is in the middle of one. */
  public long receivingBytes() {
    return receivingBytes.get();
  }

  /** True while {@link #committedBytes} is over {@link #PRESSED} of the limit: shares apply. */
  public boolean isPressed() {
    return committedBytes() > limitBytes * PRESSED;
  }

  /** What {@link #committedBytes} may grow by before the budget is pressed; 0 once it is. */
  public long roomBytes() {
    return Math.max(0, (long) (limitBytes * PRESSED) - committedBytes());
  }

  /** What {@link #committedBytes} may grow by before it reaches {@link #IDLE} of the limit. */
  public long idleRoomBytes() {
    return Math.max(0, (long) (limitBytes * IDLE) - committedBytes());
  }

  /** Credit lent to messages under way past their connections' shares. */
  public long overdraftBytes() {
    return overdraftBytes.get();
  }

  /**
   * A connection that borrows {@code current} asks for {@code wanted}: gives back what it no
   * longer wants, or borrows all that it lacks or nothing. A loan all or nothing never leaves
   * loans that each cover part of a message and together the whole overdraft, which no message
   * could complete. It lacks too much when the overdraft cannot lend it, or when the part for
   * bytes still to come (past {@code heldPastShare}, what the connection holds past its share)
   * would take what is committed ({@link #committedBytes}), the credit caps still allow ({@link
   * #promisedBytes}, a quarter larger) and loans lent and not yet promised, past the limit while
   * anything is lent: credit granted before the budget was pressed, or before shares shrank, is
   * lent for by no one, yet it will be read, and a loan's credit goes out only as the peer's
   * window updates do. The asking connection's own cap counts too, so the check errs on the safe
   * side by at most its share and what it was lent earlier in the same ask. With nothing lent the
   * loan goes, so that some message can complete.
   * A message that needs more than the whole overdraft waits until the budget is no longer
   * pressed.
   *
   * @return the connection's whole loan now
   */
  long overdraft(long current, long wanted, long heldPastShare) {
    return overdraft(current, wanted, heldPastShare, true);
  }

  /**
   * As {@link #overdraft(long, long, long)}; with {@code firstGoes} false, a loan for bytes to
   * come is checked against the limit even with nothing lent (a loan that lets a message start,
   * not one that lets it complete).
   */
  long overdraft(long current, long wanted, long heldPastShare, boolean firstGoes) {
    if (wanted <= current) {
      if (wanted < current) {
        overdraftBytes.addAndGet(wanted - current);
      }
      return wanted;
    }
    long more = wanted - current;
    long fresh = freshBytes(current, wanted, heldPastShare);
    synchronized (lending) {
      long used = overdraftBytes.get();
      if (used + more > overdraftLimit) {
        return current;
      }
      // With nothing lent, one loan always goes: messages can then complete and be released
      // while credit granted earlier keeps what is committed past the limit.
      if ((used > 0 || !firstGoes) && fresh > 0) {
        // A connection moves a loan's part to its promise, then a promise's to credit: read in
        // the other order, a part moved meanwhile is seen in one place or the other.
        long unpromised = unpromisedLoanBytes.get();
        long promised = promisedBytes.get();
        if (committedBytes() + promised * 5 / 4 + unpromised + fresh > limitBytes) {
          return current;
        }
      }
      unpromisedLoanBytes.addAndGet(fresh);
      overdraftBytes.addAndGet(more);
      return wanted;
    }
  }

  /**
   * The part of a loan grown from {@code current} to {@code wanted} that is for bytes still to
   * come, past {@code heldPastShare}: what {@link #overdraft} counts as not yet promised when it
   * lends it.
   */
  static long freshBytes(long current, long wanted, long heldPastShare) {
    return Math.max(0, wanted - Math.max(current, heldPastShare));
  }

  /** A connection reported the promise for {@code bytes} of loans {@link #overdraft} lent. */
  void loanPromised(long bytes) {
    if (bytes != 0) {
      unpromisedLoanBytes.addAndGet(-bytes);
    }
  }

  /** Loans lent and not yet promised: 0 whenever no connection is between the two. */
  long unpromisedLoanBytes() {
    return unpromisedLoanBytes.get();
  }

  /** Now, in nanoseconds, by this budget's clock. */
  long nanoTime() {
    return clock.getAsLong();
  }

  /** The most the connections may borrow past their shares in all. */
  long overdraftLimit() {
    return overdraftLimit;
  }

  /**
   * A connection whose messages need a loan no message of its has yet waits for one in turn:
   * loans for such messages go to the connections at the lowest turn waiting first, and a
   * connection served moves to the next turn. Among connections at one turn, whichever asks when
   * there is room for its loan: a large loan may wait while smaller ones at its turn go. A
   * connection that has not waited for a while joins at the lowest turn waiting (or the turn last
   * served), so it neither jumps ahead of those waiting nor falls behind for turns it did not
   * need.
   *
   * @param turn the connection's turn so far
   * @return the turn it waits at
   */
  long queue(long turn) {
    synchronized (waiting) {
      long at = Math.max(turn, waiting.isEmpty() ? servedTurn : waiting.firstKey());
      waiting.merge(at, 1, Integer::sum);
      firstTurn = waiting.firstKey();
      return at;
    }
  }

  /** A connection waiting at {@code turn} stops waiting; {@code served} if it got its loan. */
  void dequeue(long turn, boolean served) {
    synchronized (waiting) {
      waiting.computeIfPresent(turn, (t, n) -> n == 1 ? null : n - 1);
      if (served) {
        servedTurn = Math.max(servedTurn, turn);
      }
      firstTurn = waiting.isEmpty() ? Long.MAX_VALUE : waiting.firstKey();
    }
  }

  /** True when no connection waits at a turn lower than {@code turn}. */
  boolean isTurn(long turn) {
    return turn <= firstTurn;
  }

  /** How many connections wait for a loan in turn. */
  int waitingConnections() {
    synchronized (waiting) {
      return waiting.values().stream().mapToInt(Integer::intValue).sum();
    }
  }

  /**
   * What each connection may hold and be owed while the process's budget is pressed: the limit
   * less the overdraft, over the connections.
   */
  public long fairShareBytes() {
    return (limitBytes - overdraftLimit) / Math.max(1, connections.get());
  }

  /** A connection starts reporting here. */
  void join() {
    connections.incrementAndGet();
  }

  /** A connection that reported here ended. */
  void leave() {
    connections.decrementAndGet();
  }

  /** A connection's credit changed by {@code delta}. */
  void addCredit(long delta) {
    creditBytes.addAndGet(delta);
  }

  /** What a connection's cap still allows its peer past its credit changed by {@code delta}. */
  void addPromised(long delta) {
    if (delta != 0) {
      promisedBytes.addAndGet(delta);
    }
  }

  /** Credit the connections' caps still allow their peers past what they hold now. */
  public long promisedBytes() {
    return promisedBytes.get();
  }

  /** True while new calls are refused: from the limit until under {@link #STREAMS_RESUME}. */
  public boolean shedsStreams() {
    return level() >= SHEDDING;
  }

  /**
   * True while new connections are refused: from {@link #CONNECTIONS_REFUSED} of the limit until
   * under the limit.
   */
  public boolean refusesConnections() {
    return level() == REFUSING;
  }

  /** A connection's budget tracks {@code bytes} more. */
  void add(long bytes) {
    long held = heldBytes.addAndGet(bytes);
    if (held > peakBytes.get()) {
      peakBytes.accumulateAndGet(held, Math::max);
    }
    level();
  }

  /** A connection's budget released {@code bytes}. */
  void remove(long bytes) {
    heldBytes.addAndGet(-bytes);
    level();
  }

  /** The level for the memory held now, moved up or down past its thresholds. */
  private int level() {
    while (true) {
      int current = level.get();
      long held = heldBytes.get();
      int next = current;
      if (held >= limitBytes * CONNECTIONS_REFUSED) {
        next = REFUSING;
      } else if (held > limitBytes) {
        next = Math.max(current, SHEDDING);
      } else if (current == REFUSING) {
        next = SHEDDING;
      }
      if (next == SHEDDING && held < limitBytes * STREAMS_RESUME) {
        next = CLEAR;
      }
      if (next == current) {
        return current;
      }
      if (level.compareAndSet(current, next)) {
        if (next > current) {
          log(next, held);
        }
        return next;
      }
    }
  }

  private void log(int reached, long held) {
    long now = System.nanoTime();
    AtomicLong gate = nextLog[reached];
    long next = gate.get();
    if (next != 0 && now - next < 0 || !gate.compareAndSet(next, now + LOG_INTERVAL_NANOS | 1)) {
      return;
    }
    if (reached == SHEDDING) {
      logger.log(Level.WARNING, "pinless: connections hold {0} received bytes, over the process "
          + "budget of {1} (pinless.process.budgetBytes); new calls get RESOURCE_EXHAUSTED "
          + "until under {2}, and peers over their share of the budget are slowed",
          new Object[] {Long.toString(held), Long.toString(limitBytes),
              Long.toString((long) (limitBytes * STREAMS_RESUME))});
    } else {
      logger.log(Level.WARNING, "pinless: connections hold {0} received bytes, {1} times the "
          + "process budget of {2} (pinless.process.budgetBytes); new connections are closed "
          + "until under {2}", new Object[] {Long.toString(held),
              Double.toString(CONNECTIONS_REFUSED), Long.toString(limitBytes)});
    }
  }
}
