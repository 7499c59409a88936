package io.pinless.compare;

import com.google.gson.JsonObject;
import io.grpc.ManagedChannel;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The idle phase of a variant's run: connections opened to a fresh server end in a JVM of its
 * own, one call each, then left idle; each process measures what it holds for them.
 */
final class IdlePhase {
  /** How long connections settle before they are measured (pinless sweeps within 1.28 s). */
  private static final long SETTLE_MILLIS = 2_000;
  /** Calls (connections) being opened at once. */
  private static final int OPEN_WINDOW = 16;

  private final Variant variant;
  private final Options options;
  private final PrintStream out;

  IdlePhase(Variant variant, Options options, PrintStream out) {
    this.variant = variant;
    this.options = options;
    this.out = out;
  }

  /**
   * Opens the idle connections, one call each, to a server end in a JVM of its own, lets them
   * settle, and measures what they hold: each process's growth (live heap after a full collection
   * plus pooled direct bytes pinned), measured by the process itself, over its state before they
   * opened.
   */
  JsonObject run(Variant.Stack stack, String handshakers) throws Exception {
    int n = options.idleConnections;
    List<ManagedChannel> channels = new ArrayList<>(n);
    try (RemoteServerEnd server = RemoteServerEnd.start(variant, handshakers, options, out)) {
      try {
        int port = server.port();
        // both processes measure at once: each collection runs in its own process
        CompletableFuture<Measurement> serverAsked = server.measure();
        Measurement clientBefore = Measurement.of(stack);
        Measurement serverBefore = RemoteServerEnd.answer(serverAsked, "measurement");
        progress("idle: opening %d connections, one call each, to the server end in a JVM of its"
            + " own (port %d)", n, port);
        byte[] message = new byte[options.smallBytes];
        long start = System.nanoTime();
        openWindowed(stack, port, n, message, channels);
        double openSeconds = (System.nanoTime() - start) / 1e9;
        progress("idle: %d connections made their call in %.1f s; letting them settle %d ms",
            n, openSeconds, SETTLE_MILLIS);
        Thread.sleep(SETTLE_MILLIS);
        serverAsked = server.measure();
        Measurement client = Measurement.of(stack).minus(clientBefore);
        Measurement serverEnd =
            RemoteServerEnd.answer(serverAsked, "measurement").minus(serverBefore);
        if (serverEnd.serverConnections() != n) {
          throw new IllegalStateException("the server end has " + serverEnd.serverConnections()
              + " connections, not " + n);
        }
        long heap = client.heapBytes() + serverEnd.heapBytes();
        long pinned = client.pooledBytes() + serverEnd.pooledBytes();
        long buffers = client.pooledBuffers() + serverEnd.pooledBuffers();
        JsonObject o = new JsonObject();
        o.addProperty("connections", n);
        o.addProperty("openSeconds", VariantRun.round(openSeconds));
        o.addProperty("bytesPerConnection", (heap + pinned) / n);
        o.addProperty("heapBytesPerConnection", heap / n);
        o.addProperty("pooledDirectPinnedBytesPerConnection", pinned / n);
        o.addProperty("pooledDirectBuffersPerConnection", VariantRun.round4((double) buffers / n));
        o.addProperty("clientBytesPerConnection", (client.heapBytes() + client.pooledBytes()) / n);
        o.addProperty("clientHeapBytesPerConnection", client.heapBytes() / n);
        o.addProperty("clientPooledDirectPinnedBytesPerConnection", client.pooledBytes() / n);
        o.addProperty("serverBytesPerConnection",
            (serverEnd.heapBytes() + serverEnd.pooledBytes()) / n);
        o.addProperty("serverHeapBytesPerConnection", serverEnd.heapBytes() / n);
        o.addProperty("serverPooledDirectPinnedBytesPerConnection", serverEnd.pooledBytes() / n);
        progress("idle: %d bytes per connection pair (heap %d, pooled direct %d): client end %d,"
                + " server end %d", (heap + pinned) / n, heap / n, pinned / n,
            (client.heapBytes() + client.pooledBytes()) / n,
            (serverEnd.heapBytes() + serverEnd.pooledBytes()) / n);
        return o;
      } finally {
        VariantRun.shutdown(channels);
      }
    }
  }

  /**
   * Opens {@code n} channels to {@code port}, each making one call, with at most {@value
   * #OPEN_WINDOW} calls outstanding: connections come a window at a time, as from clients over
   * time, and grpc-alts's handshakes in flight stay under its cap per process (32).
   */
  private static void openWindowed(Variant.Stack stack, int port, int n, byte[] message,
      List<ManagedChannel> channels) throws Exception {
    Semaphore window = new Semaphore(OPEN_WINDOW);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    for (int i = 0; i < n && failure.get() == null; i++) {
      if (!window.tryAcquire(2, TimeUnit.MINUTES)) {
        throw new IllegalStateException("no call of the idle phase completed in 2 minutes");
      }
      ManagedChannel channel = stack.newChannel(port);
      channels.add(channel);
      Workload.echo(channel, message).whenComplete((ignored, t) -> {
        if (t != null) {
          failure.compareAndSet(null, t);
        }
        window.release();
      });
    }
    if (!window.tryAcquire(OPEN_WINDOW, 2, TimeUnit.MINUTES)) {
      throw new IllegalStateException("the idle phase's last calls did not complete in 2 minutes");
    }
    if (failure.get() != null) {
      throw new IllegalStateException("a call of the idle phase failed", failure.get());
    }
  }

  private void progress(String format, Object... args) {
    VariantRun.progress(out, format, args);
  }
}
