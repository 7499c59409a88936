package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.testing.ReadCounter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The read policy's budget holds, of the reads or of the peer through a valve, and its warning. */
class ReadPolicyTest {
  private static final Logger LOGGER = Logger.getLogger(ReadPolicy.class.getName());

  /** Keeps the warnings logged. */
  private static final class Records extends Handler {
    final List<LogRecord> warnings = new ArrayList<>();

    @Override
    public synchronized void publish(LogRecord record) {
      if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
        warnings.add(record);
      }
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}

    synchronized String only() {
      assertEquals(1, warnings.size(), "one warning");
      LogRecord r = warnings.get(0);
      return new java.util.logging.SimpleFormatter().formatMessage(r);
    }
  }

  /** A valve that records what the policy asks of it. */
  private static final class TestValve implements ReadPolicy.Valve {
    long allowance;
    boolean overdrawn;
    boolean holding;
    int holds;

    @Override
    public long allowanceBytes() {
      return allowance;
    }

    @Override
    public boolean holdPeer(boolean exceeded) {
      if (exceeded && !holding) {
        holds++;
      }
      holding = exceeded;
      return holding;
    }

    @Override
    public boolean peerOverdrawn() {
      return overdrawn;
    }
  }

  private final Records records = new Records();
  private final ReadCounter counter = new ReadCounter();
  private final ReadBudget budget = new ReadBudget(1000);
  private final ReadOnReadyHandler handler = new ReadOnReadyHandler(budget, false);
  private EmbeddedChannel ch;

  @BeforeEach
  void setUp() {
    ReadPolicy.nextWarningNanos.set(0);
    LOGGER.addHandler(records);
    ch = new EmbeddedChannel();
    ch.freezeTime();
  }

  @AfterEach
  void tearDown() {
    LOGGER.removeHandler(records);
    ch.finishAndReleaseAll();
  }

  private void start(ReadPolicy.Valve valve) {
    handler.policy().valve(valve);
    ch.pipeline().addLast(counter, handler);
  }

  /**
   * A read buffer of {@code bytes} tracked by the budget and held downstream.
   *
   * @return owned: the slice downstream holds
   */
  private ByteBuf handedOn(int bytes) {
    ByteBuf read = Unpooled.directBuffer(bytes);
    budget.track(read);
    ByteBuf slice = read.retainedSlice();
    read.release();
    return slice;
  }

  private void batch() {
    ch.pipeline().fireChannelReadComplete();
  }

  @Test
  void aBudgetHoldWarnsOnceNamingTheBudgetItsSettingAndRelease() {
    start(null);
    ByteBuf slice = handedOn(1001);
    batch();
    assertTrue(handler.policy().isHoldingRead());
    String line = records.only();
    assertTrue(line.contains("1000 bytes"), line);
    assertTrue(line.contains("pinless.read.budgetBytes"), line);
    assertTrue(line.contains("ZeroCopyMarshaller.release"), line);
    slice.release();
    ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    ch.runScheduledPendingTasks();
    assertFalse(handler.policy().isHoldingRead());
    ByteBuf again = handedOn(1001);
    batch();
    assertTrue(handler.policy().isHoldingRead());
    assertEquals(1, records.warnings.size(), "once per connection");
    again.release();
  }

  @Test
  void theWarningIsRateLimitedAcrossConnections() {
    start(null);
    ByteBuf slice = handedOn(1001);
    batch();
    ReadBudget other = new ReadBudget(1000);
    ReadOnReadyHandler second = new ReadOnReadyHandler(other, false);
    EmbeddedChannel ch2 = new EmbeddedChannel(second);
    ByteBuf read = Unpooled.directBuffer(1001);
    other.track(read);
    ByteBuf held = read.retainedSlice();
    read.release();
    ch2.pipeline().fireChannelReadComplete();
    assertTrue(second.policy().isHoldingRead());
    assertEquals(1, records.warnings.size(), "one per interval in the process");
    held.release();
    slice.release();
    ch2.finishAndReleaseAll();
  }

  @Test
  void withAValveReadsGoOnWhileThePeerIsHeldAndItIsLetGoOnceReleased() {
    TestValve valve = new TestValve();
    start(valve);
    int reads = counter.reads;
    ByteBuf slice = handedOn(1001);
    batch();
    assertFalse(handler.policy().isHoldingRead(), "reads go on");
    assertEquals(reads + 1, counter.reads);
    assertTrue(valve.holding, "the peer is held back instead");
    assertTrue(records.only().contains("pinless.read.budgetBytes"));
    slice.release();
    ch.advanceTimeBy(ReadPolicy.SWEEP_MILLIS, TimeUnit.MILLISECONDS);
    ch.runScheduledPendingTasks();
    assertFalse(valve.holding, "a timer sweep lets the peer go once released");
    assertEquals(1, valve.holds);
  }

  @Test
  void theValvesAllowanceForMessagesUnderWayRaisesTheBound() {
    TestValve valve = new TestValve();
    valve.allowance = 5000;
    start(valve);
    ByteBuf slice = handedOn(4000);
    batch();
    assertFalse(valve.holding, "4000 bytes within 1000 + 5000");
    valve.allowance = 0;
    ch.flush();
    assertTrue(valve.holding, "the messages completed: over the budget");
    slice.release();
  }

  @Test
  void readsAreHeldWhenThePeerSendsPastItsCredit() {
    TestValve valve = new TestValve();
    valve.overdrawn = true;
    start(valve);
    ByteBuf slice = handedOn(1001);
    batch();
    assertTrue(handler.policy().isHoldingRead());
    slice.release();
  }
}
