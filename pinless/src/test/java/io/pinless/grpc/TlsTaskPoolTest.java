package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The pool TLS engines' delegated tasks run on. */
class TlsTaskPoolTest {
  /** Past its queue's limit the pool refuses, naming the limit, instead of queueing forever. */
  @Test
  void theQueueIsBounded() throws Exception {
    ThreadPoolExecutor pool = NettyNegotiators.tlsTaskPool(1, 2);
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    try {
      pool.execute(() -> {
        started.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      assertTrue(started.await(60, TimeUnit.SECONDS), "hang guard");
      pool.execute(() -> {});
      pool.execute(() -> {});
      RejectedExecutionException e =
          assertThrows(RejectedExecutionException.class, () -> pool.execute(() -> {}));
      assertTrue(e.getMessage().contains("2 handshakes waiting"), e.getMessage());
    } finally {
      release.countDown();
      pool.shutdown();
      assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS), "hang guard");
    }
  }
}
