package io.pinless.bench;

import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.FastThreadLocalThread;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * JMH's worker threads as Netty event-loop threads see them (JMH's {@code
 * -Djmh.executor=CUSTOM -Djmh.executor.class=io.pinless.bench.EventLoopLikeExecutor}). Netty 4.2
 * keeps a thread cache in its pooled allocator and recycles buffer objects only on threads that
 * have fast thread-locals; a codec on a plain JMH thread would be charged, for every buffer, a new
 * buffer object and NIO view that it never allocates on an event loop. Each worker is a
 * {@link FastThreadLocalThread} of the project's Netty and runs its work marked as one for
 * grpc-netty-shaded's Netty too, so the stock rows get the same conditions as on their own event
 * loops.
 */
public final class EventLoopLikeExecutor extends ThreadPoolExecutor {
  /** The constructor JMH's CUSTOM executor type calls. */
  public EventLoopLikeExecutor(int threads, String prefix) {
    super(threads, threads, 1, TimeUnit.MINUTES, new LinkedBlockingQueue<>(), factory(prefix));
  }

  private static ThreadFactory factory(String prefix) {
    ThreadFactory netty = new DefaultThreadFactory(prefix, true);
    return task -> netty.newThread(() -> io.grpc.netty.shaded.io.netty.util.concurrent
        .FastThreadLocalThread.runWithFastThreadLocal(task));
  }
}
