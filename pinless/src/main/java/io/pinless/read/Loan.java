package io.pinless.read;

/**
 * A connection's loan from its process's overdraft, and its place in the queue for one, while the
 * process's budget is pressed: what caps its peer's credit then ({@link #cap}).
 *
 * <p>The loan covers what the connection holds past its fair share and what its covered messages
 * still need (with none under way, the next one's start if its share leaves nothing), and is
 * repaid as that falls. Messages no loan covers yet take turns for one ({@link
 * ProcessBudget#queue}): once a loan has covered a connection's messages, its next message waits
 * behind the connections that have had fewer turns, so messages complete round by round across
 * connections and not connection by connection. Covered messages get all they still need,
 * while they receive a frame's bytes, or the rest, at least every {@link
 * ProcessBudget#STALLED_LOAN_NANOS}.
 *
 * <p>Invariant: {@link #bytes} is what the process's overdraft counts for this connection, {@link
 * #unpromised} what it counts as lent for this connection and not yet promised, and the
 * connection waits in the process's queue exactly while {@link #queued}, at {@link #turn}.
 *
 * <p>Confined to the connection's event loop.
 */
final class Loan {
  /** Covered messages keep their loan receiving at least this share of it per stall period. */
  static final int PROGRESS_SHARE = 64;
  /**
   * 1 KiB: the credit a connection whose share leaves it nothing may borrow for its next message
   * to start. Its first DATA frame carries the message's length, and the message then waits its
   * turn for a loan; each idle peer holding such credit takes it from what others may borrow.
   */
  static final long START_BYTES = 1024;
  private final ProcessBudget process;
  private long bytes;
  private long turn;
  private boolean queued;
  /** The covered bytes still to come at the last progress; 0 with none covered. */
  private long coveredSeen;
  /** When the covered messages last made progress ({@link ProcessBudget#nanoTime}). */
  private long progressAt;
  /** What {@link #borrow} lent for bytes to come since the connection last reported its promise. */
  private long unpromised;

  Loan(ProcessBudget process) {
    this.process = process;
  }

  /**
   * The most credit the peer may hold while the process's budget is pressed: what the fair share
   * and the loan leave beyond what is held, less a fifth for what reads pin, and never less than
   * the covered messages still need. The fifth taken off rounds down, and the peer may spend
   * credit on other streams (connection credit names none): a covered message short of its last
   * bytes would otherwise wait for good with its loan. What other streams take so is at most what
   * the covered messages need.
   *
   * <p>A connection with no message under way gets no credit past what it has ({@code credit}),
   * or a frame's ({@link ReadBudget#MIN_ROOM_BYTES}): shares shrink as connections come, and
   * credit an idle peer was granted under a larger one cannot be taken back. One whose share
   * leaves it nothing borrows {@link #START_BYTES} while the overdraft and what is committed
   * allow, so that its next message can start and wait its turn for a loan: an application that
   * keeps what it has until that message comes would otherwise wait for good.
   *
   * @param tracked what the connection holds, as its budget counts it
   * @param credit the credit its peer holds now
   */
  long cap(ReadBudget.Messages messages, long tracked, long credit) {
    long share = process.fairShareBytes();
    long all = messages.remainingBytes();
    if (all == 0) {
      coveredSeen = 0;
      dequeue(false);
      long start = wanted(tracked, START_BYTES, share);
      boolean shareLeavesNothing = Math.max(0, share - tracked) * 4 / 5 == 0;
      // A start completes no message: it is checked against the limit even with nothing lent.
      // It does not wait for messages waiting for loans: one may wait for what this connection's
      // application releases once its next message comes.
      if (!shareLeavesNothing || borrow(start, tracked, share, false) < start) {
        borrow(wanted(tracked, 0, share), tracked, share);
      }
      return Math.min(within(share, tracked), Math.max(credit, ReadBudget.MIN_ROOM_BYTES));
    }
    long covered = messages.coveredBytes();
    if (stalled(covered)) {
      // Behind every connection at its turn too, so that the loan goes elsewhere first.
      messages.uncoverAll();
      covered = 0;
      turn++;
    }
    long wanted = wanted(tracked, covered, share);
    long wantedAll = wanted(tracked, all, share);
    if (wantedAll > wanted && wantedAll <= process.overdraftLimit()) {
      if (!queued) {
        turn = process.queue(turn);
        queued = true;
      }
      if (process.isTurn(turn) && borrow(wantedAll, tracked, share) >= wantedAll) {
        messages.coverAll();
        dequeue(true);
        turn++;
        covered = messages.coveredBytes();
        coveredSeen = covered;
        progressAt = process.nanoTime();
        wanted = wanted(tracked, covered, share);
      }
    } else {
      dequeue(false);
    }
    borrow(wanted, tracked, share);
    return Math.max(within(share, tracked), covered);
  }

  /**
   * True when the covered messages have received less than {@link #progressNeeded} in {@link
   * ProcessBudget#STALLED_LOAN_NANOS}: their loan is then taken back and they wait for a turn
   * again, so a peer that claims a message and then goes silent, or trickles, does not hold the
   * overdraft for good.
   */
  private boolean stalled(long covered) {
    if (covered == 0) {
      coveredSeen = 0;
      return false;
    }
    long now = process.nanoTime();
    if (covered > coveredSeen || coveredSeen - covered >= progressNeeded(coveredSeen)) {
      coveredSeen = covered;
      progressAt = now;
      return false;
    }
    if (now - progressAt < ProcessBudget.STALLED_LOAN_NANOS) {
      return false;
    }
    coveredSeen = 0;
    return true;
  }

  /**
   * What covered messages with {@code covered} bytes to come must receive per {@link
   * ProcessBudget#STALLED_LOAN_NANOS} to keep their loan: a {@link #PROGRESS_SHARE}th of them and
   * at least a frame ({@link ReadBudget#MIN_ROOM_BYTES}), or all of them when fewer. A larger
   * loan keeps more of the overdraft from others, so its peer must send faster to keep it.
   */
  static long progressNeeded(long covered) {
    return Math.min(covered, Math.max(ReadBudget.MIN_ROOM_BYTES, covered / PROGRESS_SHARE));
  }

  /**
   * Repays the loan and leaves the queue: the budget is not pressed, or the connection ended.
   * Nothing it lent counts as unpromised any more.
   *
   * @return true if the loan covered messages under way: the caller uncovers them, so that they
   *     borrow again only in turn when the budget is next pressed
   */
  boolean repay() {
    bytes = process.overdraft(bytes, 0, 0);
    promised();
    dequeue(false);
    boolean covered = coveredSeen > 0;
    coveredSeen = 0;
    return covered;
  }

  /**
   * Keeps the loan only for what the connection holds past its share and leaves the queue: its
   * credit is capped no more, and it will not ask again.
   */
  void keepForHeld(long tracked) {
    long share = process.fairShareBytes();
    borrow(wanted(tracked, 0, share), tracked, share);
    dequeue(false);
  }

  /** What the process lends this connection now. */
  long bytes() {
    return bytes;
  }

  /** This connection's turn for a loan. */
  long turn() {
    return turn;
  }

  /** True while this connection waits for a loan in turn. */
  boolean queued() {
    return queued;
  }

  /** What the share and the loan leave beyond {@code tracked}, less a fifth for what reads pin. */
  private long within(long share, long tracked) {
    return Math.max(0, share + bytes - tracked) * 4 / 5;
  }

  /**
   * The loan wanted for what is held past {@code share} and {@code need} bytes to come. Bytes
   * read pin up to a quarter more: a pool rounds a read's buffer up to its size class. Credit the
   * peer holds and does not use is not lent for: loans kept for idle peers would leave none for
   * the messages under way, which then never complete.
   */
  private static long wanted(long tracked, long need, long share) {
    return Math.max(0, tracked + need * 5 / 4 - share);
  }

  /**
   * Asks the process's overdraft for a loan of {@code wanted} in all; what covers bytes held past
   * {@code share} commits nothing new.
   *
   * @return the loan now
   */
  private long borrow(long wanted, long tracked, long share) {
    return borrow(wanted, tracked, share, true);
  }

  /**
   * As {@link #borrow(long, long, long)}; {@code firstGoes} as in {@link
   * ProcessBudget#overdraft(long, long, long, boolean)}.
   */
  private long borrow(long wanted, long tracked, long share, boolean firstGoes) {
    long pastShare = Math.max(0, tracked - share);
    long before = bytes;
    bytes = process.overdraft(bytes, wanted, pastShare, firstGoes);
    if (bytes > before) {
      unpromised += ProcessBudget.freshBytes(before, bytes, pastShare);
    }
    return bytes;
  }

  /**
   * The connection has reported the promise its cap makes ({@link ReadBudget#maxCreditBytes}):
   * what this loan lent for bytes to come since counts as promised there, and no longer here.
   */
  void promised() {
    process.loanPromised(unpromised);
    unpromised = 0;
  }

  /** Leaves the process's queue, if in it; {@code served} when a loan was just taken. */
  private void dequeue(boolean served) {
    if (queued) {
      queued = false;
      process.dequeue(turn, served);
    }
  }
}
