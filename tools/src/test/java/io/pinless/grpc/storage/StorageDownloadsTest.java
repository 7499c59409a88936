package io.pinless.grpc.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.pinless.grpc.PinlessChannelProvider;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * One tiny round of {@link StorageDownloads}: a 4 MiB object, both APIs over both variants, no
 * warm-up and a short window, each client in a JVM of its own with this JVM's leak detector
 * level. It checks what the figures rest on, not the figures: each JVM has the transport it is
 * named after, its first download arrived whole (the client checks size and CRC32C), no buffer
 * leaked, and where the ReadObject content lives.
 */
class StorageDownloadsTest {
  private static final int OBJECT_BYTES = 4 << 20;

  @Test
  @Timeout(value = 3, unit = TimeUnit.MINUTES)
  void eachClientJvmHasItsTransportAndPinlessKeepsEveryMessageZeroCopy() throws Exception {
    try (ServerJvm server = ServerJvm.start(OBJECT_BYTES, System.err)) {
      DownloadFigures highPinless = run(server, "high-level", "pinless");
      DownloadFigures highStock = run(server, "high-level", "stock");
      DownloadFigures gapicPinless = run(server, "gapic", "pinless");
      DownloadFigures gapicStock = run(server, "gapic", "stock");

      // The high-level client's zero-copy parse takes every message pinless delivers. Over
      // grpc-netty-shaded it takes most (grpc-core copies a message cut into pieces under 1 KiB).
      assertEquals(1.0, highPinless.directShare(), highPinless.line());
      assertTrue(highStock.directShare() > 0, highStock.line());
      // The generated stub parses with ProtoLiteUtils, into heap arrays, on either transport.
      assertEquals(0.0, gapicPinless.directShare(), gapicPinless.line());
      assertEquals(0.0, gapicStock.directShare(), gapicStock.line());
    }
  }

  /** Runs one client JVM and checks its transport and that it measured something. */
  private static DownloadFigures run(ServerJvm server, String api, String variant)
      throws Exception {
    DownloadFigures f = StorageDownloads.runClient(server, api, variant, 0, 0.2, System.err);
    boolean pinless = variant.equals("pinless");
    assertEquals(pinless ? PinlessChannelProvider.class.getName()
        : StorageDownloadClient.STOCK_PROVIDER, f.provider(), f.line());
    assertEquals(pinless, f.pinlessConnections() > 0, f.line());
    assertTrue(f.downloads() >= 1 && f.megabytesPerSecond() > 0, f.line());
    assertTrue(f.reservedPeak() > 0, "no pooled direct memory seen: " + f.line());
    return f;
  }
}
