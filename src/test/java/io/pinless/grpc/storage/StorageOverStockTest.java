package io.pinless.grpc.storage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.cloud.storage.BlobId;
import io.grpc.ManagedChannelProvider;
import io.pinless.PinlessMetrics;
import io.pinless.grpc.PinlessChannelProvider;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The control for {@link StorageOverProviderTest}: the same reads with {@code pinless.provider}
 * unset (surefire's {@code storage-stock} execution). gRPC's registry picks a stock Netty
 * transport, and no pinless counter moves.
 */
@Tag("storage-stock")
class StorageOverStockTest {
  private static final BlobId BLOB = BlobId.of("pinless-test", "object");
  private static final byte[] DATA = StorageOverProviderTest.random(5 * 1024 * 1024 + 12345);

  @Test
  void readsThroughStockTransportWithoutPinless() throws Exception {
    ManagedChannelProvider provider = ManagedChannelProvider.provider();
    assertFalse(provider instanceof PinlessChannelProvider, provider.getClass().getName());
    assertTrue(provider.getClass().getName().startsWith("io.grpc.netty"),
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
