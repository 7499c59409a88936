package io.pinless.grpc;

import io.grpc.Server;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The application threads of a test server, stopped before its event loops. A call still sending
 * once its event loop has terminated hands grpc-netty a frame its write queue can no longer
 * schedule, and grpc-netty never releases that frame: the leak detector reports it in a later test.
 */
final class ServerThreads {
  private ServerThreads() {}

  /** A pool for a server builder's {@code executor}; {@link #stop} ends it. */
  static ExecutorService newPool() {
    return Executors.newCachedThreadPool();
  }

  /** Shuts {@code server} down, then waits for its calls' threads to end. */
  static void stop(Server server, ExecutorService calls) throws InterruptedException {
    server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    calls.shutdown();
    calls.awaitTermination(10, TimeUnit.SECONDS);
  }
}
