package io.pinless.alts.handshake;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Bounds the requests outstanding at the handshaker service, without ever blocking: a request
 * beyond the bound waits in a queue and is sent when an earlier one is answered. A slot is held
 * only from a request to its response, never while a handshake waits for its peer, so handshakes
 * that wait on each other (a process that is both client and server) cannot deadlock on it.
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
   * Runs {@code send} now if a slot is free, else once one is; {@code send} must lead to exactly
   * one {@link #answered()} (the response, or the call's end).
   */
  void submit(Runnable send) {
    waiting.add(send);
    drain();
  }

  /** A request was answered (or will never be): its slot is free. */
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
    while (true) {
      int n = outstanding.get();
      if (n >= max) {
        return;
      }
      if (!outstanding.compareAndSet(n, n + 1)) {
        continue;
      }
      Runnable next = waiting.poll();
      if (next == null) {
        outstanding.decrementAndGet();
        if (waiting.isEmpty()) {
          return;
        }
        continue;
      }
      next.run();
    }
  }
}
