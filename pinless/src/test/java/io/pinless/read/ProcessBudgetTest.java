package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link ProcessBudget}: what the connections' budgets report, the fair share that slows only the
 * connections over it, and the shedding levels with their hysteresis and log lines.
 */
class ProcessBudgetTest {
  private final List<ByteBuf> held = new ArrayList<>();
  private final List<ReadBudget> budgets = new ArrayList<>();

  @AfterEach
  void releaseHeld() {
    held.forEach(ByteBuf::release);
    budgets.forEach(ReadBudget::releaseAll);
  }

  /** Messages under way that still need {@link #remaining} bytes, covered once a loan is. */
  static final class Need implements ReadBudget.Messages {
    long remaining;
    boolean covered;
    /** DATA bytes sent on the connection in all. */
    long data;
    /** What the messages under way have received so far. */
    long pending;
    /** A cover fails, as a broken {@link ReadBudget.Messages} might. */
    boolean failOnCover;

    Need(long remaining) {
      this.remaining = remaining;
    }

    @Override
    public long remainingBytes() {
      return remaining;
    }

    @Override
    public long coveredBytes() {
      return covered ? remaining : 0;
    }

    @Override
    public void coverAll() {
      if (failOnCover) {
        throw new IllegalStateException("cover failed");
      }
      covered = true;
    }

    @Override
    public void uncoverAll() {
      covered = false;
    }

    @Override
    public long dataBytes() {
      return data;
    }

    @Override
    public long pendingFrameBytes() {
      return pending;
    }
  }

  /** A connection's budget reporting to {@code process}, given back after the test. */
  private ReadBudget budget(ProcessBudget process) {
    ReadBudget budget = new ReadBudget(1 << 30, process);
    budgets.add(budget);
    return budget;
  }

  /** Three connections of {@code process} that reported, the third's peer with {@code credit}. */
  private ReadBudget[] three(ProcessBudget process, long credit) {
    ReadBudget[] three = {budget(process), budget(process), budget(process)};
    three[0].credit(0);
    three[1].credit(0);
    three[2].credit(credit);
    return three;
  }

  /** A read buffer of exactly {@code bytes} tracked by {@code budget} and held downstream. */
  private ByteBuf hold(ReadBudget budget, int bytes) {
    ByteBuf read = UnpooledByteBufAllocator.DEFAULT.directBuffer(bytes);
    budget.track(read);
    ByteBuf downstream = read.retainedSlice(0, 1);
    read.release();
    held.add(downstream);
    return downstream;
  }

  @Test
  void sumsWhatEveryConnectionHoldsAndOwesAndCountsTheConnections() {
    ProcessBudget process = new ProcessBudget(1 << 20);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    ByteBuf a1 = hold(a, 10_000);
    hold(a, 20_000);
    hold(b, 5_000);
    assertEquals(35_000, process.heldBytes());
    assertEquals(2, process.connections());
    a.credit(1000);
    b.credit(3000);
    a.credit(2000);
    assertEquals(5000, process.creditBytes(), "each connection's latest credit");

    a1.release();
    held.removeIf(x -> x == a1);
    a.sweep();
    assertEquals(25_000, process.heldBytes(), "a sweep takes a released buffer off");

    b.releaseAll();
    assertEquals(20_000, process.heldBytes(), "an ended connection takes all it held off");
    assertEquals(2000, process.creditBytes(), "and its credit");
    assertEquals(1, process.connections());
    b.releaseAll();
    b.credit(5000);
    assertEquals(1, process.connections(), "it leaves once and reports nothing after");
    assertEquals(2000, process.creditBytes());
    held.forEach(ByteBuf::release);
    held.clear();
    a.sweep();
    assertEquals(0, process.heldBytes());
    a.releaseAll();
    assertEquals(0, process.connections());
    assertEquals(0, process.creditBytes());
    assertEquals((1 << 20) / 2, process.fairShareBytes(),
        "with no connection the share is the limit less the overdraft");
  }

  @Test
  void whatTheApplicationHoldsWhenItsConnectionEndsStaysCountedUntilReleased() {
    ProcessBudget process = new ProcessBudget(1 << 20);
    ReadBudget other = budget(process);
    ReadBudget budget = budget(process);
    ByteBuf kept = hold(budget, 10_000);
    ByteBuf done = hold(budget, 5_000);
    done.release();
    held.removeIf(x -> x == done);
    budget.credit(3000);
    other.credit(1000);
    assertTrue(budget.end(), "a buffer is still held downstream");
    assertEquals(1, process.connections(), "the connection left at once");
    assertEquals(1000, process.creditBytes(), "with its credit");
    assertEquals(10_000, process.heldBytes(), "what the application holds is still counted");
    assertEquals(10_000, budget.retainedBytes());
    kept.release();
    held.removeIf(x -> x == kept);
    budget.sweep();
    assertEquals(0, process.heldBytes(), "a sweep after the release takes it off");
    assertEquals(0, budget.trackedBuffers());
    budget.end();
    assertEquals(1, process.connections(), "a connection leaves once");
  }

  @Test
  void aBudgetThatNeverReportsIsNoConnection() {
    ProcessBudget process = new ProcessBudget(1 << 20);
    ReadBudget budget = budget(process);
    assertEquals(0, process.connections(), "made but never attached: nothing to count");
    budget.credit(0);
    assertEquals(1, process.connections(), "its first report joins it");
    assertFalse(budget.end(), "nothing tracked: nothing to sweep");
    assertEquals(0, process.connections());
  }

  @Test
  void pressedTheCreditOfEachConnectionIsCappedAtWhatItsShareLeaves() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget big = budget(process);
    ReadBudget small = budget(process);
    hold(big, 30_000);
    hold(small, 10_000);
    assertFalse(process.isPressed(), "40,000 is not over half the limit");
    assertEquals(ReadBudget.MIN_ROOM_BYTES, big.maxCreditBytes(new Need(1)),
        "not pressed: its part of the 10,000 left below half the limit, at least a frame");

    hold(big, 50_000);
    assertTrue(process.isPressed());
    assertEquals(25_000, process.fairShareBytes(), "50,000 (the limit less half) over two");
    assertEquals(0, big.maxCreditBytes(new Need(0)),
        "80,000 held: nothing more for its peer");
    assertEquals(12_000, small.maxCreditBytes(new Need(0)),
        "10,000 held: under its share, it may be owed the rest, less a fifth for what reads pin");
    assertFalse(small.isExceeded(), "the process's budget holds no reads back");
  }

  @Test
  void messagesUnderWayBorrowWholeLoansFromAnOverdraftRepaidAsTheApplicationReleases() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    b.credit(48_000);
    assertTrue(process.isPressed(), "credit counts toward the limit, a quarter more");
    assertFalse(process.shedsStreams(), "shedding follows what is held, not credit");
    ByteBuf first = hold(a, 20_000);
    ByteBuf second = hold(a, 10_000);
    assertEquals(20_000, b.maxCreditBytes(new Need(0)),
        "credit b's peer does not use borrows nothing: b gets what its share leaves, less a fifth");
    assertEquals(0, process.overdraftBytes());
    Need message = new Need(8_000);
    assertEquals(8_000, a.maxCreditBytes(message), "a message under way gets what it needs");
    assertTrue(message.covered, "and the loan covers it");
    assertEquals(15_000, process.overdraftBytes(),
        "borrowing what the share of 25,000 lacks, a quarter more for what reads pin");
    hold(b, 45_000);
    b.credit(0);
    Need large = new Need(20_000);
    assertEquals(0, b.maxCreditBytes(large), "b lacks 45,000 (20,000 held past its share, "
        + "25,000 for its message), 35,000 are left: all or nothing, its message gets nothing");
    assertFalse(large.covered);
    assertEquals(35_000, process.overdraftBytes(), "what b holds past its share is lent");
    ByteBuf elsewhere = hold(a, 20_000);
    assertEquals(8_000, a.maxCreditBytes(message), "a's peer spent 20,000 on another stream and "
        + "a's loan cannot grow: its covered message still gets the 8,000 it needs");
    assertEquals(35_000, process.overdraftBytes());

    message.remaining = 0;
    release(a, elsewhere);
    release(a, second);
    assertEquals(4_000, a.maxCreditBytes(new Need(0)), "20,000 held: no loan");
    assertEquals(20_000, process.overdraftBytes(),
        "a's loan is repaid as the application releases");
    assertEquals(4_000, a.maxCreditBytes(new Need(100_000)),
        "a message that needs more than the whole overdraft waits");
    assertEquals(20_000, process.overdraftBytes());
    large.remaining = 0;
    b.maxCreditBytes(large);
    assertEquals(0, process.waitingConnections(), "b's message no longer waits for a loan");
    assertEquals(20_000 + Loan.START_BYTES * 5 / 4, process.overdraftBytes(),
        "b, past its share with no message under way, borrows its next message's start");
    a.maxCreditBytes(new Need(20_000));
    assertEquals(40_000 + Loan.START_BYTES * 5 / 4, process.overdraftBytes(),
        "a's message gets its loan beside it");
    a.releaseAll();
    assertEquals(20_000 + Loan.START_BYTES * 5 / 4, process.overdraftBytes(),
        "an ended connection repays its loan");
    assertEquals(Long.MAX_VALUE, a.maxCreditBytes(new Need(30_000)), "and asks nothing after");
    held.removeIf(x -> x == first);
    first.release();
  }

  @Test
  void aConnectionWhoseMessageALoanCoveredWaitsBehindThoseThatHadNoTurn() {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget[] three = three(process, 50_000);
    ReadBudget a = three[0];
    ReadBudget b = three[1];
    ReadBudget c = three[2];
    assertTrue(process.isPressed());
    assertEquals(20_000, process.fairShareBytes(), "60,000 over three; 60,000 to lend");
    Need a1 = new Need(40_000);
    assertEquals(40_000, a.maxCreditBytes(a1), "a's first message: a loan of 30,000 covers it");
    assertEquals(30_000, process.overdraftBytes());
    Need b1 = new Need(48_000);
    assertEquals(16_000, b.maxCreditBytes(b1),
        "b's message needs 40,000, 30,000 are left: it waits, b gets its share less a fifth");
    assertFalse(b1.covered);
    assertEquals(1, process.waitingConnections());

    a1.remaining = 0;
    Need a2 = new Need(40_000);
    assertEquals(16_000, a.maxCreditBytes(a2),
        "a's next message waits behind b, which has had no turn; a gets its share");
    assertFalse(a2.covered, "though 30,000, all it needs, are left once a's loan is repaid");
    assertEquals(0, process.overdraftBytes(), "a holds nothing past its share: no loan");
    assertEquals(2, process.waitingConnections());

    assertEquals(48_000, b.maxCreditBytes(b1), "b's turn, and 60,000 are left");
    assertTrue(b1.covered);
    assertEquals(16_000, a.maxCreditBytes(a2), "a's turn, but 20,000 are left");
    Need c1 = new Need(60_000);
    assertEquals(16_000, c.maxCreditBytes(c1), "c needs 55,000: it waits");
    b1.remaining = 0;
    b.maxCreditBytes(b1);
    assertEquals(0, process.overdraftBytes(), "b's message is done and its loan repaid");
    assertEquals(40_000, a.maxCreditBytes(a2), "c joined at the turn a waits at, not before it: "
        + "a's message is covered");
    assertTrue(a2.covered);
    assertEquals(16_000, c.maxCreditBytes(c1), "30,000 left: c waits on");
    assertEquals(1, process.waitingConnections());
    c.releaseAll();
    assertEquals(0, process.waitingConnections(), "an ended connection waits no more");
  }

  @Test
  void aConnectionCappedNoMoreLeavesTheQueueAndRepaysWhatItsMessagesBorrowed() {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget[] three = three(process, 50_000);
    ReadBudget a = three[0];
    ReadBudget b = three[1];
    ReadBudget c = three[2];
    assertEquals(40_000, a.maxCreditBytes(new Need(40_000)));
    assertEquals(16_000, b.maxCreditBytes(new Need(48_000)));
    assertEquals(1, process.waitingConnections());
    b.stopCapping();
    assertEquals(0, process.waitingConnections(), "b will not ask again: it waits no more");
    hold(a, 25_000);
    a.stopCapping();
    assertEquals(5_000, process.overdraftBytes(), "a keeps a loan for what it holds past its "
        + "share of 20,000, not for its message");
  }

  @Test
  void aConnectionCappedNoMoreThatNeverBorrowedBorrowsForWhatItHoldsPastItsShare() {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget[] three = three(process, 50_000);
    ReadBudget a = three[0];
    hold(a, 25_000);
    assertTrue(process.isPressed());
    a.stopCapping();
    assertEquals(5_000, process.overdraftBytes(), "what it holds past its share of 20,000 is "
        + "lent, as for a connection that asked for its cap before");
    held.forEach(ByteBuf::release);
    held.clear();
    a.sweep();
    assertEquals(0, process.overdraftBytes(), "released: the loan is repaid at the sweep");
  }

  /**
   * A covered message receives {@code trickle} bytes just before 5 s and as many again at 5 s:
   * nothing, or under a frame ({@link ReadBudget#MIN_ROOM_BYTES}) in all.
   */
  @ParameterizedTest
  @ValueSource(ints = {0, 1_000})
  void aLoanWhoseMessageReceivesLessThanAFrameInFiveSecondsIsTakenBackAndWaitsItsTurn(
      int trickle) {
    long[] now = {0};
    ProcessBudget process = new ProcessBudget(120_000, () -> now[0]);
    ReadBudget[] three = three(process, 50_000);
    ReadBudget slow = three[0];
    ReadBudget steady = three[1];
    Need claimed = new Need(40_000);
    assertEquals(40_000, slow.maxCreditBytes(claimed), "covered: a loan of 30,000");
    Need other = new Need(48_000);
    assertEquals(16_000, steady.maxCreditBytes(other), "40,000 wanted, 30,000 left: it waits");
    now[0] += ProcessBudget.STALLED_LOAN_NANOS - 1;
    claimed.remaining -= trickle;
    assertEquals(claimed.remaining, slow.maxCreditBytes(claimed), "not yet 5 s");
    now[0] += 1;
    claimed.remaining -= trickle;
    assertEquals(16_000, slow.maxCreditBytes(claimed), 2 * trickle + " bytes in 5 s: the loan is "
        + "taken back and the message waits behind the other");
    assertFalse(claimed.covered);
    assertEquals(0, process.overdraftBytes());
    assertEquals(48_000, steady.maxCreditBytes(other), "the other's turn");
    assertTrue(other.covered);
    other.remaining = 20_000;
    now[0] += ProcessBudget.STALLED_LOAN_NANOS;
    assertEquals(20_000, steady.maxCreditBytes(other),
        "28,000 came within 5 s: the message keeps what it still needs");
    assertTrue(other.covered);
  }

  @Test
  void aLargerLoanNeedsMoreProgressToBeKept() {
    assertEquals(ReadBudget.MIN_ROOM_BYTES, Loan.progressNeeded(1 << 20), "1 MiB: a frame");
    assertEquals(1000, Loan.progressNeeded(1000), "under a frame: all of it");
    assertEquals((128 << 20) / Loan.PROGRESS_SHARE, Loan.progressNeeded(128 << 20),
        "128 MiB, nearly a whole overdraft: 2 MiB per 5 s, not a trickle of frames");
  }

  @Test
  void aStalledLoanGoesFirstToAConnectionWaitingAtTheSameTurn() {
    long[] now = {0};
    ProcessBudget process = new ProcessBudget(120_000, () -> now[0]);
    ReadBudget[] three = three(process, 50_000);
    ReadBudget silent = three[0];
    ReadBudget other = three[1];
    Need done = new Need(48_000);
    assertEquals(48_000, other.maxCreditBytes(done), "the other's turn 0: a loan of 40,000");
    Need claimed = new Need(40_000);
    assertEquals(16_000, silent.maxCreditBytes(claimed), "20,000 left: silent waits at turn 0");
    done.remaining = 0;
    Need next = new Need(48_000);
    assertEquals(16_000, other.maxCreditBytes(next), "the other's next message waits at turn 1");
    assertEquals(40_000, silent.maxCreditBytes(claimed), "silent's turn 0: a loan of 30,000");
    now[0] += ProcessBudget.STALLED_LOAN_NANOS;
    assertEquals(16_000, silent.maxCreditBytes(claimed), "nothing came for 5 s: silent goes "
        + "behind the other, which waits at the turn silent would wait at");
    assertFalse(claimed.covered);
    assertEquals(48_000, other.maxCreditBytes(next), "the other's turn 1");
    assertTrue(next.covered);
  }

  @Test
  void aMessageShortOfItsLastByteGetsItWhateverTheRounding() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    hold(a, 30_000);
    b.credit(20_000);
    assertTrue(process.isPressed());
    assertEquals(1, a.maxCreditBytes(new Need(1)),
        "a loan of 5,001 covers it: a fifth of 1 off for what reads pin must not leave it 0");
    assertEquals(5_001, process.overdraftBytes());
  }

  @Test
  void creditGrantedEarlierLeavesNoRoomForLoansPastTheLimitButOneAlwaysGoes() {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget[] three = three(process, 80_000);
    ReadBudget a = three[0];
    ReadBudget b = three[1];
    ReadBudget idle = three[2];
    assertEquals(100_000, process.committedBytes(), "80,000 of credit and a quarter more");
    Need first = new Need(40_000);
    assertEquals(40_000, a.maxCreditBytes(first), "nothing is lent: a's loan of 30,000 goes, "
        + "so that a message completes while the idle peer's credit stays committed");
    assertTrue(first.covered);
    Need second = new Need(40_000);
    assertEquals(16_000, b.maxCreditBytes(second),
        "with a loan out, b's would commit past the limit: b's message waits, with its share");
    assertFalse(second.covered);
    assertEquals(30_000, process.overdraftBytes());
    assertEquals(56_000, process.promisedBytes(),
        "a's loan and b's share: credit not yet sent to their peers");
    idle.credit(56_000);
    assertEquals(16_000, b.maxCreditBytes(second), "the idle peer used 24,000 of its credit, "
        + "which the application released; a's peer is yet to be sent the credit of its loan");
    a.credit(40_000);
    assertEquals(16_000, process.promisedBytes(), "a's is sent: now it counts as credit");
    first.remaining = 0;
    a.credit(0);
    assertEquals(16_000, a.maxCreditBytes(first),
        "a's message arrived and was released: its share, less a fifth");
    assertEquals(0, process.overdraftBytes(), "its loan repaid");
    assertEquals(40_000, b.maxCreditBytes(second), "now b's loan goes");
    assertTrue(second.covered);
  }

  @Test
  void aLoanCountsFromTheMomentItIsLentUntilItsConnectionPromises() {
    ProcessBudget process = new ProcessBudget(120_000);
    process.addCredit(52_000);
    assertEquals(65_000, process.committedBytes(), "52,000 of credit and a quarter more");
    assertEquals(5_000, process.overdraft(0, 5_000, 0), "nothing lent: a loan goes");
    assertEquals(30_000, process.overdraft(0, 30_000, 0),
        "65,000 committed, 5,000 lent and 30,000 fit the limit");
    assertEquals(35_000, process.unpromisedLoanBytes(), "lent, their connections yet to promise");
    assertEquals(0, process.overdraft(0, 24_000, 0), "another event loop asks before those "
        + "connections promise: 65,000 + 35,000 + 24,000 would pass the limit");
    process.addPromised(28_000);
    process.loanPromised(35_000);
    assertEquals(0, process.unpromisedLoanBytes());
    assertEquals(0, process.overdraft(0, 24_000, 0),
        "promised, a fifth less and counted a quarter larger, they count as much");
    process.addPromised(-28_000);
    process.addCredit(-52_000);
    assertEquals(24_000, process.overdraft(0, 24_000, 0), "with the credit used and released");
  }

  @Test
  void loansLentOnTwoThreadsAtOnceNeverTogetherPassTheLimit() throws InterruptedException {
    ProcessBudget process = new ProcessBudget(1_000_000);
    process.addCredit(560_000);
    assertEquals(1_000, process.overdraft(0, 1_000, 1_000), "lent, for bytes already held");
    // Committed 700,000: a loan of 150,000 or more on one thread fits, as does one of 200,000 on
    // the other, and never both.
    AtomicBoolean lent = new AtomicBoolean();
    AtomicBoolean done = new AtomicBoolean();
    Thread other = new Thread(() -> {
      for (int k = 0; k < 200_000; k++) {
        // A size that changes every time, as a connection's cap would promise it.
        long loan = 150_000 + (k % 50_000) * 4;
        if (process.overdraft(0, loan, 0) != loan) {
          continue;
        }
        lent.set(true);
        process.addPromised(loan * 4 / 5);
        process.loanPromised(loan);
        lent.set(false);
        process.overdraft(loan, 0, 0);
        process.addPromised(-loan * 4 / 5);
      }
      done.set(true);
    });
    other.start();
    long both = 0;
    while (!done.get()) {
      if (process.overdraft(0, 200_000, 0) == 200_000) {
        if (lent.get()) {
          both++;
        }
        process.overdraft(200_000, 0, 0);
        process.loanPromised(200_000);
      }
    }
    other.join();
    assertEquals(0, both, "both loans lent at once");
    assertEquals(0, process.unpromisedLoanBytes());
    assertEquals(0, process.promisedBytes());
    assertEquals(1_000, process.overdraftBytes());
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void whatALoanLendsIsPromisedBeforeItsCapReturnsOrFails(boolean coverFails) {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget[] three = three(process, 80_000);
    Need first = new Need(40_000);
    first.failOnCover = coverFails;
    if (coverFails) {
      assertThrows(IllegalStateException.class, () -> three[0].maxCreditBytes(first));
    } else {
      assertEquals(40_000, three[0].maxCreditBytes(first));
      assertTrue(first.covered);
      assertEquals(30_000, process.overdraftBytes());
      assertTrue(process.promisedBytes() >= 30_000, "promised: " + process.promisedBytes());
    }
    assertEquals(0, process.unpromisedLoanBytes(), "its promise counts the loan, or it failed");
    for (ReadBudget budget : three) {
      budget.end();
    }
    assertEquals(0, process.overdraftBytes());
    assertEquals(0, process.unpromisedLoanBytes());
  }

  @Test
  void anIdleConnectionIsGrantedPastHttp2sFirstWindowOnlyUnderAQuarterOfTheLimit() {
    ProcessBudget process = new ProcessBudget(1 << 20);
    ReadBudget first = budget(process);
    first.credit(65_535);
    long room = (process.limitBytes() / 4 - 65_535 * 5 / 4) * 4 / 5;
    assertEquals(65_535 + room, first.maxCreditBytes(new Need(0)),
        "alone, with no message under way: its part of the room under a quarter of the limit");
    first.credit(65_535 + room);
    ReadBudget second = budget(process);
    second.credit(65_535);
    assertFalse(process.isPressed());
    assertEquals(65_535, second.maxCreditBytes(new Need(0)), "the first peer's credit fills the "
        + "quarter: an idle peer gets no more than HTTP/2's first window, which all peers hold");
    second.credit(1000);
    Need between = new Need(0);
    assertEquals(65_535, second.maxCreditBytes(between), "and can always start a message");
    between.data = 64_535;
    assertTrue(second.maxCreditBytes(between) > 65_535, "DATA came since it last asked: between "
        + "small messages, a busy connection gets its part of the room under half the limit");
    assertEquals(65_535, second.maxCreditBytes(between), "none since: idle");
    assertTrue(second.maxCreditBytes(new Need(100_000)) > 65_535,
        "a message under way gets its part of the room under half the limit");
  }

  @Test
  void aLoanRepaidOnceTheBudgetIsNoLongerPressedCoversItsMessagesNoMore() {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget[] three = three(process, 80_000);
    ReadBudget a = three[0];
    ReadBudget idle = three[2];
    Need message = new Need(40_000);
    assertEquals(40_000, a.maxCreditBytes(message));
    assertTrue(message.covered);
    idle.credit(0);
    assertFalse(process.isPressed());
    a.maxCreditBytes(message);
    assertEquals(0, process.overdraftBytes(), "not pressed: the loan is repaid");
    assertFalse(message.covered,
        "and its message uncovered: pressed again, it borrows only in its turn");
  }

  @Test
  void bytesOfMessagesUnderWayCountBeforeTheyAreTracked() {
    ProcessBudget process = new ProcessBudget(120_000);
    ReadBudget a = three(process, 50_000)[0];
    Need message = new Need(100_000);
    assertEquals(16_000, a.maxCreditBytes(message),
        "nothing held, a message too large to borrow for: its share, less a fifth");
    message.pending = 15_000;
    assertEquals(4_000, a.maxCreditBytes(message), "15,000 of it received, none tracked yet: "
        + "the share less what was received, less a fifth");
  }

  @Test
  void anIdleConnectionOfAPressedProcessGetsNoCreditPastAFrame() {
    ProcessBudget process = new ProcessBudget(1 << 20);
    ReadBudget idle = budget(process);
    ReadBudget busy = budget(process);
    idle.credit(1000);
    busy.credit(500_000);
    assertTrue(process.isPressed());
    assertTrue(process.fairShareBytes() > ReadBudget.MIN_ROOM_BYTES);
    assertEquals(ReadBudget.MIN_ROOM_BYTES, idle.maxCreditBytes(new Need(0)),
        "shares shrink as connections come: an idle peer gets a frame's credit, not its share");
    idle.credit(100_000);
    assertEquals(100_000, idle.maxCreditBytes(new Need(0)),
        "and keeps what it holds, within its share");
  }

  /**
   * A connection just past its share with no message under way, whose application keeps what it
   * holds until the next message comes, borrows the credit for that message to start: with none,
   * its peer could send nothing and both would wait for good.
   */
  @Test
  void aConnectionPastItsShareWithNoMessageUnderWayBorrowsTheNextOnesStart() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    a.credit(0);
    hold(a, 26_000);
    hold(b, 30_000);
    assertTrue(process.isPressed());
    assertEquals(25_000, process.fairShareBytes());
    assertEquals(Loan.START_BYTES, a.maxCreditBytes(new Need(0)),
        "1,000 past its share: credit for its next message to start");
    assertEquals(1_000 + Loan.START_BYTES * 5 / 4, process.overdraftBytes(),
        "lent from the overdraft: what it holds past its share and the start, a quarter more");
    Need next = new Need(8_000);
    next.data = Loan.START_BYTES;
    assertEquals(8_000, a.maxCreditBytes(next), "the message started and gets its loan in turn");
    assertTrue(next.covered);
    assertEquals(11_000, process.overdraftBytes(), "the start's loan became the message's");
  }

  /**
   * A start goes even while another connection's message waits for a loan: that message may wait
   * for what this connection's application releases once its own next message comes.
   */
  @Test
  void aStartGoesWhileAMessageWaitsForWhatItsConnectionReleases() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget keeper = budget(process);
    ReadBudget waiter = budget(process);
    keeper.credit(0);
    waiter.credit(0);
    ByteBuf kept = hold(keeper, 60_000);
    assertEquals(Loan.START_BYTES, keeper.maxCreditBytes(new Need(0)));
    assertEquals(35_000 + Loan.START_BYTES * 5 / 4, process.overdraftBytes(),
        "what the keeper holds past its share, and its next message's start");
    Need message = new Need(40_000);
    waiter.maxCreditBytes(message);
    assertFalse(message.covered, "the waiter's loan does not fit past what the keeper holds");
    assertEquals(1, process.waitingConnections());
    assertEquals(Loan.START_BYTES, keeper.maxCreditBytes(new Need(0)),
        "the keeper's next message may start all the same");
    release(keeper, kept);
    keeper.maxCreditBytes(new Need(0));
    assertEquals(0, process.overdraftBytes(), "the keeper's application released: no loan");
    assertTrue(waiter.maxCreditBytes(message) > 0, "the waiter's peer may send");
    assertEquals(0, process.waitingConnections(), "and it waits no more");
  }

  /**
   * A start completes no message: unlike a message's first loan, it is refused when what is
   * committed would pass the limit, even with nothing lent.
   */
  @Test
  void aStartIsNotLentPastTheLimit() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    a.credit(0);
    hold(a, 26_000);
    b.credit(84_000);
    assertEquals(0, process.overdraftBytes());
    assertEquals(0, a.maxCreditBytes(new Need(0)), "110,000 committed: no start for a");
    assertEquals(1_000, process.overdraftBytes(), "what a holds past its share is lent");
  }

  /** With no room left in the overdraft, a connection past its share gets no start. */
  @Test
  void aStartIsNotLentPastTheOverdraft() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    budget(process).credit(0);
    a.credit(0);
    hold(a, 74_000);
    assertEquals(0, a.maxCreditBytes(new Need(0)),
        "49,000 past its share: the overdraft of 50,000 has no start for it");
    assertEquals(49_000, process.overdraftBytes(), "what it holds past its share is lent");
  }

  @Test
  void aConnectionsOwnLimitStillAppliesUnderTheProcessLimit() {
    ProcessBudget process = new ProcessBudget(1 << 30);
    ReadBudget budget = new ReadBudget(10_000, process);
    budgets.add(budget);
    hold(budget, 20_000);
    assertTrue(budget.isExceeded());
  }

  @Test
  void shedsStreamsFromTheLimitUntilUnderThreeQuartersAndRefusesConnectionsAboveItsThreshold() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget budget = budget(process);
    ByteBuf first = hold(budget, 90_000);
    assertFalse(process.shedsStreams());
    ByteBuf second = hold(budget, 15_000);
    assertTrue(process.shedsStreams(), "105,000 is over the limit");
    assertFalse(process.refusesConnections());
    ByteBuf third = hold(budget, 10_000);
    assertTrue(process.refusesConnections(), "115,000 is past 112,500");

    release(budget, third);
    assertTrue(process.refusesConnections(), "105,000: still over the limit");
    release(budget, second);
    assertFalse(process.refusesConnections(), "90,000: under the limit, connections come again");
    assertTrue(process.shedsStreams(), "90,000 is not under 75,000: calls are still shed");
    release(budget, first);
    assertFalse(process.shedsStreams(), "nothing held");

    hold(budget, 80_000);
    assertFalse(process.shedsStreams(), "rising again, shedding starts only over the limit");
  }

  @Test
  void logsEachRiseOnceAndNotAgainWithinTheInterval() {
    Logger logger = Logger.getLogger(ProcessBudget.class.getName());
    List<String> lines = new ArrayList<>();
    Handler capture = new Handler() {
      @Override
      public void publish(LogRecord record) {
        lines.add(String.valueOf(record.getParameters()[0]) + " " + record.getMessage());
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    logger.addHandler(capture);
    try {
      ProcessBudget process = new ProcessBudget(100_000);
      ReadBudget budget = budget(process);
      ByteBuf over = hold(budget, 101_000);
      assertEquals(1, lines.size(), "shedding starts: " + lines);
      assertTrue(lines.get(0).contains("pinless.process.budgetBytes"), lines.get(0));
      assertTrue(lines.get(0).contains("RESOURCE_EXHAUSTED"), lines.get(0));
      ByteBuf far = hold(budget, 20_000);
      assertEquals(2, lines.size(), "connections are refused: " + lines);
      assertTrue(lines.get(1).contains("new connections are closed"), lines.get(1));
      release(budget, far);
      release(budget, over);
      assertFalse(process.shedsStreams());
      hold(budget, 130_000);
      assertTrue(process.refusesConnections());
      assertEquals(2, lines.size(), "the same conditions again within a minute log nothing");
    } finally {
      logger.removeHandler(capture);
    }
  }

  @Test
  void refusesALimitThatIsNotPositive() {
    assertThrows(IllegalArgumentException.class, () -> new ProcessBudget(0));
    assertTrue(ProcessBudget.defaultLimitBytes() > 0);
  }

  private void release(ReadBudget budget, ByteBuf downstream) {
    downstream.release();
    held.removeIf(x -> x == downstream);
    budget.sweep();
  }
}
