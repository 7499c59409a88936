package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.DefaultEventLoop;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link EndedSweep}: an ended connection's budget is swept, backing off, until the application
 * has released what it counts, and given up whole once its loop refuses tasks.
 */
class EndedSweepTest {
  /** A timer the test fires by hand; it remembers each delay asked for. */
  private static final class HandTimer implements Timer {
    final List<Long> delays = new ArrayList<>();
    TimerTask next;

    @Override
    public Timeout newTimeout(TimerTask task, long delay, TimeUnit unit) {
      delays.add(unit.toMillis(delay));
      next = task;
      return null;
    }

    @Override
    public Set<Timeout> stop() {
      return Collections.emptySet();
    }

    void fire() throws Exception {
      TimerTask task = next;
      next = null;
      task.run(null);
    }
  }

  private final ProcessBudget process = new ProcessBudget(1 << 30);
  private final ReadBudget budget = new ReadBudget(1 << 30, process);

  /** A buffer of {@code bytes} the budget tracks and the application still holds. */
  private ByteBuf kept(int bytes) {
    ByteBuf buf = UnpooledByteBufAllocator.DEFAULT.directBuffer(bytes);
    budget.track(buf);
    return buf;
  }

  @Test
  void sweepsBackingOffUntilTheApplicationReleases() throws Exception {
    ByteBuf kept = kept(10_000);
    assertTrue(budget.end());
    EmbeddedChannel ch = new EmbeddedChannel();
    HandTimer timer = new HandTimer();
    EndedSweep.start(budget, ch.eventLoop(), timer);
    for (int i = 0; i < 10; i++) {
      timer.fire();
    }
    assertEquals(List.of(10L, 20L, 40L, 80L, 160L, 320L, 640L, 1280L, 1280L, 1280L, 1280L),
        timer.delays, "from 10 ms, doubling to 1.28 s");
    assertEquals(10_000, process.heldBytes(), "still held: still counted");
    kept.release();
    timer.fire();
    assertEquals(0, process.heldBytes(), "released: taken off");
    assertEquals(null, timer.next, "and the sweep stops");
    assertEquals(0, process.connections());
    ch.finishAndReleaseAll();
  }

  @Test
  void aLoopThatRefusesTasksHasTheTimerGiveUpTheReferences() throws Exception {
    ByteBuf kept = kept(10_000);
    assertTrue(budget.end());
    DefaultEventLoop loop = new DefaultEventLoop();
    loop.shutdownGracefully(0, 0, TimeUnit.SECONDS).sync();
    HandTimer timer = new HandTimer();
    EndedSweep.start(budget, loop, timer);
    timer.fire();
    assertEquals(0, process.heldBytes(), "nothing is counted once the loop is gone");
    assertEquals(1, kept.refCnt(), "the budget's reference is given up; the application's stays");
    assertEquals(null, timer.next);
    kept.release();
  }
}
