package io.pinless.alts.handshake;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Bounds the requests outstanding at the handshaker service, without ever blocking: a request
 * beyond the bound waits in a queue and is sent when an earlier one is answered. A slot is held
 * only from a request to its response, never while a handshake waits for its peer, so handshakes
 * that wait on each other (a process that is both client and server) cannot deadlock on it.
 *
 * <p>Every slot comes back: a handshake that ends withdraws its waiting request, and a send that
 * throws (its connection's event loop is shut down, say) frees the slot it was given.
 */
final class HandshakerCalls {
  /** Process-wide: requests outstanding at handshaker services, at most. */
  static final int MAX_OUTSTANDING = 100;
  static final HandshakerCalls SHARED = new HandshakerCalls(MAX_OUTSTANDING);

  private final int max;
  private final AtomicInteger outstanding = new AtomicInteger();
  private final ConcurrentLinkedQueue<Runnable> waiting = new ConcurrentLinkedQueue<>();

  HandshakerCalls(int max) {
    this.max = max;
  }

  /**
   * Runs {@code send} now if a slot is free, else once one is, on the thread that frees it;
   * {@code send} must lead to exactly one {@link #answered()} (the response, or the call's end)
   * unless it throws, which frees the slot at once.
   *
   * @throws RuntimeException what a {@code send} run here threw, after every other was run
   */
  void submit(Runnable send) {
    waiting.add(send);
    drain();
  }

  /**
   * Takes back {@code send} if it still waits for a slot.
   *
   * @return true if it was waiting and now never runs
   */
  boolean withdraw(Runnable send) {
    return waiting.remove(send);
  }

  /**
   * A request was answered (or will never be): its slot is free.
   *
   * @throws RuntimeException what a {@code send} given the slot threw, after every other was run
   */
  void answered() {
    outstanding.decrementAndGet();
    drain();
  }

  /** Requests waiting for a slot. */
  int waiting() {
    return waiting.size();
  }

  /** Requests holding a slot. */
  int outstanding() {
    return outstanding.get();
  }

  private void drain() {
    RuntimeException thrown = null;
    while (true) {
      int n = outstanding.get();
      if (n >= max) {
        break;
      }
      if (!outstanding.compareAndSet(n, n + 1)) {
        continue;
      }
      Runnable next = waiting.poll();
      if (next == null) {
        outstanding.decrementAndGet();
        if (waiting.isEmpty()) {
          break;
        }
        continue;
      }
      try {
        next.run();
      } catch (RuntimeException e) {
        // Nothing was sent: the slot is free again, for the next request waiting.
        outstanding.decrementAndGet();
        if (thrown == null) {
          thrown = e;
        } else {
          thrown.addSuppressed(e);
        }
      }
    }
    if (thrown != null) {
      throw thrown;
    }
  }
}
