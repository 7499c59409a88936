package io.pinless.tls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The handshake handler's use of the executor its engine's delegated tasks run on. */
class TlsHandshakeHandlerTest {
  private static final long TIMEOUT_MILLIS = 10_000;

  /** Keeps what is given to it, for the test to run on its own thread. */
  private static final class Queued implements Executor {
    final List<Runnable> runnables = new ArrayList<>();

    @Override
    public void execute(Runnable r) {
      runnables.add(r);
    }
  }

  private static StatusRuntimeException assertFailed(EmbeddedChannel ch, String part) {
    StatusRuntimeException e = assertThrows(StatusRuntimeException.class, ch::checkException);
    assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode());
    assertTrue(String.valueOf(e.getStatus().getDescription()).contains(part),
        e.getStatus() + " names " + part);
    assertFalse(ch.isOpen(), "the connection closed");
    return e;
  }

  /** A full task pool fails the handshake; the task never runs on the event loop. */
  @Test
  void aFullTaskPoolFailsTheHandshake() {
    AtomicInteger ran = new AtomicInteger();
    TaskEngine engine = new TaskEngine(ran::incrementAndGet);
    EmbeddedChannel ch = new EmbeddedChannel(new TlsHandshakeHandler(engine, r -> {
      throw new RejectedExecutionException("full for the test");
    }, TIMEOUT_MILLIS));
    assertEquals(0, ran.get(), "the task ran on the event loop");
    assertFailed(ch, "full for the test");
    assertEquals(0, engine.refCnt(), "the engine is released");
    assertFalse(ch.finishAndReleaseAll());
  }

  /** A handshake past its deadline runs none of the tasks still waiting for a thread. */
  @Test
  void tasksOfAHandshakePastItsDeadlineAreSkipped() {
    AtomicInteger ran = new AtomicInteger();
    TaskEngine engine = new TaskEngine(ran::incrementAndGet);
    Queued pool = new Queued();
    EmbeddedChannel ch = new EmbeddedChannel(new TlsHandshakeHandler(engine, pool, TIMEOUT_MILLIS));
    assertEquals(1, pool.runnables.size(), "the task is queued");
    ch.advanceTimeBy(TIMEOUT_MILLIS, TimeUnit.MILLISECONDS);
    ch.runScheduledPendingTasks();
    assertFailed(ch, "did not finish within");
    assertEquals(1, engine.refCnt(), "the engine waits for the task thread");

    pool.runnables.get(0).run();
    ch.runPendingTasks();
    assertEquals(0, ran.get(), "the task of an ended handshake ran");
    assertEquals(0, engine.refCnt(), "the engine is released");
    assertFalse(ch.finishAndReleaseAll());
  }

  /** An Error thrown by a task fails the handshake and still releases the engine. */
  @Test
  void anErrorFromATaskReleasesTheEngine() {
    TaskEngine engine = new TaskEngine(() -> {
      throw new StackOverflowError("thrown by the test's task");
    });
    Queued pool = new Queued();
    EmbeddedChannel ch = new EmbeddedChannel(new TlsHandshakeHandler(engine, pool, TIMEOUT_MILLIS));
    try {
      pool.runnables.get(0).run();
    } catch (Error e) {
      throw new AssertionError("the task's Error escaped the task thread: " + e, e);
    }
    ch.runPendingTasks();
    StatusRuntimeException e = assertFailed(ch, "thrown by the test's task");
    assertTrue(e.getCause() instanceof StackOverflowError, String.valueOf(e.getCause()));
    assertEquals(0, engine.refCnt(), "the engine is released");
    assertFalse(ch.finishAndReleaseAll());
  }
}
