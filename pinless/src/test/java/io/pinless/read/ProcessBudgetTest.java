package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

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

  /** A connection's budget reporting to {@code process}, given back after the test. */
  private ReadBudget budget(ProcessBudget process) {
    ReadBudget budget = new ReadBudget(1 << 30, process);
    budgets.add(budget);
    return budget;
  }

  /** A read buffer of {@code bytes} tracked by {@code budget} and held downstream. */
  private ByteBuf hold(ReadBudget budget, int bytes) {
    ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(bytes);
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
    assertEquals(ReadBudget.MIN_ROOM_BYTES, big.maxCreditBytes(() -> 0),
        "not pressed: its part of the 10,000 left below half the limit, at least a frame");

    hold(big, 50_000);
    assertTrue(process.isPressed());
    assertEquals(25_000, process.fairShareBytes(), "50,000 (the limit less half) over two");
    assertEquals(0, big.maxCreditBytes(() -> 0), "80,000 held: nothing more for its peer");
    assertEquals(12_000, small.maxCreditBytes(() -> 0),
        "10,000 held: under its share, it may be owed the rest, less a fifth for what reads pin");
    assertFalse(small.isExceeded(), "the process's budget holds no reads back");
  }

  @Test
  void messagesUnderWayBorrowWholeLoansFromAnOverdraftRepaidAsTheApplicationReleases() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    b.credit(60_000);
    assertTrue(process.isPressed(), "credit counts toward the limit");
    assertFalse(process.shedsStreams(), "shedding follows what is held, not credit");
    ByteBuf first = hold(a, 20_000);
    ByteBuf second = hold(a, 10_000);
    assertEquals(20_000, b.maxCreditBytes(() -> 0),
        "credit b's peer does not use borrows nothing: b gets what its share leaves, less a fifth");
    assertEquals(0, process.overdraftBytes());
    assertEquals(8_000, a.maxCreditBytes(() -> 8_000), "a message under way gets what it needs");
    assertEquals(15_000, process.overdraftBytes(),
        "borrowing what the share of 25,000 lacks, a quarter more for what reads pin");
    hold(b, 45_000);
    assertEquals(0, b.maxCreditBytes(() -> 20_000), "b lacks 45,000 (20,000 held past its "
        + "share, 25,000 for its message), 35,000 are left: all or nothing, b borrows nothing");
    assertEquals(8_000, a.maxCreditBytes(() -> 40_000),
        "nor does a get more for a message larger than what is left");
    assertEquals(15_000, process.overdraftBytes());

    release(a, second);
    assertEquals(4_000, a.maxCreditBytes(() -> 0), "20,000 held: no loan needed");
    assertEquals(0, process.overdraftBytes(), "the loan is repaid as the application releases");
    assertEquals(4_000, a.maxCreditBytes(() -> 100_000),
        "a message that needs more than the whole overdraft waits");
    assertEquals(0, process.overdraftBytes());
    a.maxCreditBytes(() -> 30_000);
    assertEquals(32_500, process.overdraftBytes());
    a.releaseAll();
    assertEquals(0, process.overdraftBytes(), "an ended connection repays its loan");
    assertEquals(Long.MAX_VALUE, a.maxCreditBytes(() -> 30_000), "and asks nothing after");
    held.removeIf(x -> x == first);
    first.release();
  }

  @Test
  void aMessageShortOfItsLastByteGetsItWhateverTheRounding() {
    ProcessBudget process = new ProcessBudget(100_000);
    ReadBudget a = budget(process);
    ReadBudget b = budget(process);
    hold(a, 30_000);
    b.credit(60_000);
    assertTrue(process.isPressed());
    assertEquals(1, a.maxCreditBytes(() -> 1),
        "a loan of 5,001 covers it: a fifth of 1 off for what reads pin must not leave it 0");
    assertEquals(5_001, process.overdraftBytes());
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
