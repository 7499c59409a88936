package io.pinless.grpc.storage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.cloud.storage.BlobId;
import io.grpc.ManagedChannelProvider;
import io.pinless.PinlessMetrics;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The control for {@link StorageOverProviderTest}: the same reads with {@code pinless.provider}
 * unset (surefire's {@code storage-stock} execution). gRPC's registry picks grpc-netty-shaded,
 * the transport the client brings, and no pinless counter moves.
 */
@Tag("storage-stock")
class StorageOverStockTest {
  private static final BlobId BLOB = BlobId.of("pinless-test", "object");
  private static final byte[] DATA = StorageOverProviderTest.random(5 * 1024 * 1024 + 12345);

  @Test
  void readsThroughStockTransportWithoutPinless() throws Exception {
    ManagedChannelProvider provider = ManagedChannelProvider.provider();
    // grpc-netty and grpc-netty-shaded tie at priority 5; gRPC breaks the tie by class name.
    assertEquals("io.grpc.netty.shaded.io.grpc.netty.NettyChannelProvider",
        provider.getClass().getName());
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      fixture.service.put(StorageFixture.BUCKET, "object", DATA);
      Map<String, Long> before = PinlessMetrics.snapshot();

      byte[] read = fixture.storage.readAllBytes(BLOB);

      assertArrayEquals(DATA, read);
      assertEquals(before, PinlessMetrics.snapshot());
      // Stock grpc-netty hands the client's marshaller pooled direct buffers too.
      assertEquals(DATA.length, fixture.directContentBytes() + fixture.heapContentBytes());
      assertTrue(fixture.heapContentBytes() <= DATA.length / 100,
          "content bytes on the heap: " + fixture.heapContentBytes());
    }
  }
}
