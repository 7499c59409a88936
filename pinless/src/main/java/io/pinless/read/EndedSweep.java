package io.pinless.read;

import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;
import io.netty.util.concurrent.EventExecutor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * Sweeps an ended connection's budget, backing off from {@link ReadPolicy#SWEEP_MILLIS} to {@link
 * ReadPolicy#MAX_SWEEP_MILLIS}, until the application has released every buffer it counts (see
 * {@link ReadBudget#end}). It holds the budget, the loop and the timer, not the channel, so an
 * application that keeps buffers does not keep the connection's pipeline alive too.
 *
 * <p>Invariant: the budget is touched on the connection's loop only, one sweep at a time (each
 * sweep sets the next timer), or, once that loop refuses tasks, by this timer's thread, which
 * then gives up every reference: nothing runs on a loop that refuses tasks but what it had
 * queued, and the ended connection's policy queues nothing that touches the budget.
 */
final class EndedSweep implements TimerTask {
  private final ReadBudget budget;
  private final EventExecutor loop;
  private final Timer timer;
  /** The next delay is {@link ReadPolicy#SWEEP_MILLIS} doubled this many times. */
  private int backoff;

  private EndedSweep(ReadBudget budget, EventExecutor loop, Timer timer) {
    this.budget = budget;
    this.loop = loop;
    this.timer = timer;
  }

  /** Sweeps {@code budget} on {@code loop}, timed by {@code timer}, until it tracks nothing. */
  static void start(ReadBudget budget, EventExecutor loop, Timer timer) {
    timer.newTimeout(new EndedSweep(budget, loop, timer), ReadPolicy.SWEEP_MILLIS,
        TimeUnit.MILLISECONDS);
  }

  @Override
  public void run(Timeout timeout) {
    if (loop.inEventLoop()) {
      sweep();
      return;
    }
    try {
      loop.execute(this::sweep);
    } catch (RejectedExecutionException e) {
      budget.releaseAll();
    }
  }

  private void sweep() {
    budget.sweep();
    if (budget.trackedBuffers() == 0) {
      budget.releaseAll();
      return;
    }
    backoff = Math.min(backoff + 1, ReadPolicy.MAX_SWEEP_BACKOFF);
    timer.newTimeout(this, ReadPolicy.SWEEP_MILLIS << backoff, TimeUnit.MILLISECONDS);
  }
}
