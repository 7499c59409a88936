package io.pinless.grpc.storage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.cloud.ReadChannel;
import com.google.cloud.storage.Blob;
import com.google.cloud.storage.BlobId;
import com.google.cloud.storage.StorageException;
import com.google.storage.v2.ReadObjectRequest;
import com.google.storage.v2.ReadObjectResponse;
import com.google.storage.v2.StorageGrpc;
import io.grpc.CallOptions;
import io.grpc.Detachable;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelProvider;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.grpc.PinlessChannelProvider;
import io.pinless.testing.FakeStorage;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import javax.net.ssl.SSLException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Cloud Storage client reading through pinless as gRPC's transport provider, with no code
 * change: {@code -Dpinless.provider=true} is set when the test JVM starts (surefire's {@code
 * storage-pinless} execution runs this tag), so the registry gRPC builds once per JVM has
 * pinless on top when the client asks {@code ManagedChannelBuilder.forAddress} for its channel.
 */
@Tag("storage-pinless")
class StorageOverProviderTest {
  private static final String NAME = "object";
  private static final BlobId BLOB = BlobId.of("pinless-test", NAME);
  /** Three chunks, the last one short: 2 MiB + 2 MiB + 1 MiB and 12345 bytes. */
  private static final byte[] DATA = random(5 * 1024 * 1024 + 12345);

  @BeforeAll
  static void pinlessIsTheProvider() {
    assertInstanceOf(PinlessChannelProvider.class, ManagedChannelProvider.provider(),
        "run with -Dpinless.provider=true from JVM start (surefire's storage-pinless execution)");
  }

  @Test
  void readsWholeObjectThroughPinless() throws Exception {
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      Counts before = Counts.now();

      byte[] read = fixture.storage.readAllBytes(BLOB);

      assertArrayEquals(DATA, read);
      Counts moved = Counts.now().minus(before);
      assertEquals(1, moved.connections, "one pinless connection for the client's channel");
      moved.assertCarried(DATA.length);
      assertEquals(List.of(0L), offsets(fixture.service.reads()));
    }
  }

  @Test
  void readsRangesWithSeekAndLimit() throws Exception {
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      int from = 3 * 1024 * 1024 + 7;
      int length = 1024 * 1024 + 3;

      byte[] range;
      try (ReadChannel reader = fixture.storage.reader(BLOB)) {
        reader.seek(from);
        reader.limit(from + length);
        range = readToEnd(reader, length);
      }
      byte[] tail;
      try (ReadChannel reader = fixture.storage.reader(BLOB)) {
        reader.seek(-1000);
        tail = readToEnd(reader, 1000);
      }

      assertArrayEquals(Arrays.copyOfRange(DATA, from, from + length), range);
      assertArrayEquals(Arrays.copyOfRange(DATA, DATA.length - 1000, DATA.length), tail);
      ReadObjectRequest first = fixture.service.reads().get(0);
      assertEquals(from, first.getReadOffset());
      assertEquals(length, first.getReadLimit());
      assertEquals(-1000, fixture.service.reads().get(1).getReadOffset());
    }
  }

  /**
   * The control that the client's CRC32C check runs on what pinless delivers: the chunk at 2 MiB
   * carries a wrong CRC32C and its call stalls. A client that checks asks again from 2 MiB; one
   * that did not would wait on the stalled call, which the timeout turns into a failure.
   */
  @Test
  @Timeout(value = 5, unit = TimeUnit.MINUTES)
  void dropsChunkWithWrongCrc32cAndReadsItAgain() throws Exception {
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      fixture.service.corruptChunkAt(FakeStorage.CHUNK_BYTES);

      byte[] read = fixture.storage.readAllBytes(BLOB);

      assertArrayEquals(DATA, read);
      assertEquals(List.of(0L, (long) FakeStorage.CHUNK_BYTES), offsets(fixture.service.reads()));
    }
  }

  @Test
  void getsObjectMetadata() throws Exception {
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      FakeStorage.StoredObject stored = fixture.service.put(StorageFixture.BUCKET, NAME, DATA);

      Blob blob = fixture.storage.get(BLOB);

      assertEquals(DATA.length, blob.getSize());
      assertEquals(stored.generation(), blob.getGeneration());
      byte[] crc = ByteBuffer.allocate(4).putInt(stored.crc32c()).array();
      assertEquals(Base64.getEncoder().encodeToString(crc), blob.getCrc32c());
      assertEquals(1, fixture.service.gets().size());
    }
  }

  /**
   * The client's zero-copy ReadObject parse engages on pinless's message streams. Its marshaller
   * takes that path only for a stream that is {@code KnownLength}, {@code Detachable} and {@code
   * HasByteBuffer} with {@code byteBufferSupported()}: it detaches the stream, wraps each NIO
   * buffer and parses with aliasing, so the content is views of the received direct buffers.
   * Its fallback, grpc's {@code ProtoLiteUtils}, reads the message into a heap array.
   */
  @Test
  void parsesContentAsViewsOfPinlessBuffers() throws Exception {
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      long aliasedBefore = Metric.MESSAGE_BYTES_ALIASED.value();

      assertArrayEquals(DATA, fixture.storage.readAllBytes(BLOB));

      long direct = fixture.directContentBytes();
      long heap = fixture.heapContentBytes();
      assertEquals(DATA.length, direct + heap);
      assertTrue(heap <= DATA.length / 100,
          "content bytes on the heap: " + heap + ", in direct buffers: " + direct);
      // Not pinless's own marshallers: the client's parses these messages.
      assertEquals(aliasedBefore, Metric.MESSAGE_BYTES_ALIASED.value());
    }
  }

  /**
   * What the client's zero-copy check looks at, looked at directly: every ReadObject message
   * stream pinless hands a marshaller, on a channel from {@code ManagedChannelBuilder} as the
   * client gets its own, is {@code KnownLength}, {@code Detachable} and {@code HasByteBuffer} with
   * {@code byteBufferSupported()}, and supports {@code mark}.
   */
  @Test
  void handsMarshallersStreamsTheZeroCopyCheckAccepts() throws Exception {
    try (StorageFixture fixture = StorageFixture.plaintext()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      StreamCheck check = new StreamCheck();
      MethodDescriptor<ReadObjectRequest, ReadObjectResponse> method =
          StorageGrpc.getReadObjectMethod().toBuilder(
              ProtoUtils.marshaller(ReadObjectRequest.getDefaultInstance()), check).build();
      ManagedChannel channel =
          ManagedChannelBuilder.forAddress("127.0.0.1", fixture.port()).usePlaintext().build();
      try {
        ReadObjectRequest request = ReadObjectRequest.newBuilder()
            .setBucket(StorageFixture.BUCKET).setObject(NAME).build();
        int received = 0;
        Iterator<ReadObjectResponse> responses =
            ClientCalls.blockingServerStreamingCall(channel, method, CallOptions.DEFAULT, request);
        while (responses.hasNext()) {
          received += responses.next().getChecksummedData().getContent().size();
        }
        assertEquals(DATA.length, received);
      } finally {
        channel.shutdownNow();
        channel.awaitTermination(1, TimeUnit.MINUTES);
      }
      assertEquals(3, check.streams);
      assertEquals(check.streams, check.accepted, check.refused);
    }
  }

  @Test
  void readsOverTlsThroughPinless(@TempDir Path dir) throws Exception {
    String previous = System.getProperty("javax.net.ssl.trustStore");
    Path trustStore = StorageFixture.writeTrustStore(dir);
    System.setProperty("javax.net.ssl.trustStore", trustStore.toString());
    System.setProperty("javax.net.ssl.trustStorePassword", "changeit");
    System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
    try (StorageFixture fixture = StorageFixture.tls()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      Counts before = Counts.now();

      byte[] read = fixture.storage.readAllBytes(BLOB);

      assertArrayEquals(DATA, read);
      Counts moved = Counts.now().minus(before);
      assertEquals(1, moved.connections);
      moved.assertCarried(DATA.length);
      assertTrue(fixture.heapContentBytes() <= DATA.length / 100,
          "content bytes on the heap: " + fixture.heapContentBytes());
    } finally {
      restore("javax.net.ssl.trustStore", previous);
      System.clearProperty("javax.net.ssl.trustStorePassword");
      System.clearProperty("javax.net.ssl.trustStoreType");
    }
  }

  /**
   * The control for {@link #readsOverTlsThroughPinless}: without the test CA in the trust store,
   * pinless's TLS refuses the server's certificate and the read fails.
   */
  @Test
  void refusesTlsServerItDoesNotTrust() throws Exception {
    assertNull(System.getProperty("javax.net.ssl.trustStore"));
    try (StorageFixture fixture = StorageFixture.tlsWithoutRetries()) {
      fixture.service.put(StorageFixture.BUCKET, NAME, DATA);
      Counts before = Counts.now();

      StorageException e =
          assertThrows(StorageException.class, () -> fixture.storage.readAllBytes(BLOB));

      assertTrue(causes(e).anyMatch(SSLException.class::isInstance), () -> trace(e));
      assertEquals(0, Counts.now().minus(before).connections);
      assertEquals(List.of(), fixture.service.reads());
    }
  }

  /** A ReadObjectResponse marshaller that checks each stream as the client's zero-copy one does. */
  private static final class StreamCheck
      implements MethodDescriptor.Marshaller<ReadObjectResponse> {
    private final MethodDescriptor.Marshaller<ReadObjectResponse> proto =
        ProtoUtils.marshaller(ReadObjectResponse.getDefaultInstance());
    /** Streams seen, and those that pass; written on the call's executor, read after the call. */
    private volatile int streams;
    private volatile int accepted;
    /** The first refused stream's class and interfaces, for the failure message. */
    private volatile String refused = "";

    @Override
    public InputStream stream(ReadObjectResponse value) {
      return proto.stream(value);
    }

    @Override
    public ReadObjectResponse parse(InputStream stream) {
      streams++;
      if (stream instanceof KnownLength
          && stream instanceof Detachable
          && stream instanceof HasByteBuffer
          && ((HasByteBuffer) stream).byteBufferSupported()
          && stream.markSupported()) {
        accepted++;
      } else if (refused.isEmpty()) {
        refused = stream.getClass().getName() + " " + Arrays.toString(
            stream.getClass().getInterfaces());
      }
      return proto.parse(stream);
    }
  }

  /** pinless's counters that show traffic went through it. */
  record Counts(long connections, long slicedBytes, long copiedBytes) {
    static Counts now() {
      return new Counts(Metric.CONNECTIONS_INSTALLED.value(), Metric.DATA_BYTES_SLICED.value(),
          Metric.DATA_BYTES_COPIED.value());
    }

    Counts minus(Counts earlier) {
      return new Counts(connections - earlier.connections, slicedBytes - earlier.slicedBytes,
          copiedBytes - earlier.copiedBytes);
    }

    /**
     * Asserts that pinless carried at least {@code payload} bytes of DATA, nearly all as slices
     * of its read buffers (it copies only frames too small to pin a buffer).
     */
    void assertCarried(long payload) {
      String counts = "DATA bytes sliced " + slicedBytes + ", copied " + copiedBytes;
      assertTrue(slicedBytes + copiedBytes >= payload, counts);
      assertTrue(slicedBytes >= payload * 9 / 10, counts);
    }
  }

  private static Stream<Throwable> causes(Throwable e) {
    return Stream.iterate(e, t -> t != null, Throwable::getCause);
  }

  private static String trace(Throwable e) {
    StringWriter out = new StringWriter();
    e.printStackTrace(new PrintWriter(out));
    return out.toString();
  }

  static List<Long> offsets(List<ReadObjectRequest> reads) {
    return reads.stream().map(ReadObjectRequest::getReadOffset).toList();
  }

  static byte[] random(int length) {
    byte[] data = new byte[length];
    new Random(30).nextBytes(data);
    return data;
  }

  /** Reads {@code reader} to its end, expecting {@code length} bytes. */
  static byte[] readToEnd(ReadChannel reader, int length) throws Exception {
    ByteBuffer into = ByteBuffer.allocate(length + 1);
    while (reader.read(into) >= 0) {
      if (!into.hasRemaining()) {
        break;
      }
    }
    return Arrays.copyOf(into.array(), into.position());
  }

  private static void restore(String property, String value) {
    if (value == null) {
      System.clearProperty(property);
    } else {
      System.setProperty(property, value);
    }
  }
}
