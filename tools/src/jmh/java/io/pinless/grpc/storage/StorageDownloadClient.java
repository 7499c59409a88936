package io.pinless.grpc.storage;

import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.grpc.InstantiatingGrpcChannelProvider;
import com.google.cloud.NoCredentials;
import com.google.cloud.ReadChannel;
import com.google.cloud.storage.BlobId;
import com.google.cloud.storage.Storage;
import com.google.cloud.storage.StorageOptions;
import com.google.gson.JsonObject;
import com.google.storage.v2.ReadObjectRequest;
import com.google.storage.v2.ReadObjectResponse;
import com.google.storage.v2.StorageClient;
import com.google.storage.v2.StorageSettings;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelProvider;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.compare.MemoryMonitor;
import io.pinless.grpc.PinlessChannelProvider;
import io.pinless.testing.FakeStorage;
import io.pinless.testing.ReadObjectContentWatch;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/**
 * A client JVM of {@link StorageDownloads}: the Cloud Storage client downloading the object of a
 * {@link FakeStorageServer} in a loop, first for a warm-up, then for a measured window.
 *
 * <pre>
 *   StorageDownloadClient &lt;api&gt; &lt;variant&gt; &lt;port&gt; &lt;object bytes&gt;
 *       &lt;object CRC32C&gt; &lt;warm-up seconds&gt; &lt;window seconds&gt;
 * </pre>
 *
 * <p>The variant says which transport gRPC's registry must have picked, and the JVM fails if it
 * picked another: {@code pinless} (the JVM is started with {@code -Dpinless.provider=true}) or
 * {@code stock} (grpc-netty-shaded, which the client brings). Both APIs get their channel from
 * gax's {@code InstantiatingGrpcChannelProvider}, which off DirectPath and with no mTLS asks
 * {@code ManagedChannelBuilder.forAddress}, that is the registry, for it.
 *
 * <p>The APIs, each as a user downloading an object meets it:
 *
 * <ul>
 *   <li>{@code high-level}: {@code Storage} from {@code StorageOptions.grpc()}, {@code
 *       storage.reader(blob)} read to its end into one reused heap buffer of {@value
 *       #BUFFER_BYTES} bytes (the reader's default chunk size, so it reads straight into the
 *       caller's buffer). Its ReadObject responses are parsed by the client's zero-copy
 *       marshaller.
 *   <li>{@code gapic}: the generated {@code StorageClient}, its server-streaming {@code
 *       readObjectCallable()} iterated to the end, each response's content copied into the same
 *       kind of buffer. Its responses are parsed by the generated stub's marshaller.
 * </ul>
 *
 * <p>The first download is checked: its size and its CRC32C against the server's. Then it prints
 * one {@link DownloadFigures} line. The interceptor counting direct content bytes ({@link
 * ReadObjectContentWatch}) is on the channel in every variant, so all pay for it alike.
 */
final class StorageDownloadClient {
  /** The reused buffer a download reads into: the service's chunk, 2 MiB. */
  static final int BUFFER_BYTES = FakeStorage.CHUNK_BYTES;
  /** The channel provider grpc-netty-shaded registers. */
  static final String STOCK_PROVIDER = "io.grpc.netty.shaded.io.grpc.netty.NettyChannelProvider";

  private StorageDownloadClient() {}

  /** One whole download; returns the payload bytes. */
  private interface Downloader extends AutoCloseable {
    /**
     * Downloads the object into {@code buffer}, reused for every piece; updates {@code crc} with
     * every byte unless it is null.
     */
    long download(ByteBuffer buffer, CRC32C crc) throws Exception;
  }

  /** Runs one client; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      throw new IllegalArgumentException("usage: StorageDownloadClient <api> <variant> <port>"
          + " <object bytes> <object CRC32C> <warm-up seconds> <window seconds>");
    }
    String api = args[0];
    String variant = args[1];
    int port = Integer.parseInt(args[2]);
    long objectBytes = Long.parseLong(args[3]);
    int objectCrc = Integer.parseInt(args[4]);
    double warmupSeconds = Double.parseDouble(args[5]);
    double windowSeconds = Double.parseDouble(args[6]);

    String provider = ManagedChannelProvider.provider().getClass().getName();
    String expected = switch (variant) {
      case "pinless" -> PinlessChannelProvider.class.getName();
      case "stock" -> STOCK_PROVIDER;
      default -> throw new IllegalArgumentException("unknown variant " + variant);
    };
    if (!provider.equals(expected)) {
      throw new IllegalStateException("variant " + variant + " needs gRPC's channel provider to be "
          + expected + ", and it is " + provider);
    }
    ReadObjectContentWatch watch = new ReadObjectContentWatch();
    try (Downloader downloader = open(api, port, watch)) {
      ByteBuffer buffer = ByteBuffer.allocate(BUFFER_BYTES);
      CRC32C crc = new CRC32C();
      long first = downloader.download(buffer, crc);
      if (first != objectBytes || (int) crc.getValue() != objectCrc) {
        throw new IllegalStateException(String.format(
            "downloaded %d bytes with CRC32C %08x; the object has %d bytes with CRC32C %08x",
            first, (int) crc.getValue(), objectBytes, objectCrc));
      }
      long connections = Metric.CONNECTIONS_INSTALLED.value();
      if ((connections > 0) != variant.equals("pinless")) {
        throw new IllegalStateException(
            "pinless installed " + connections + " connections for variant " + variant);
      }
      loop(downloader, buffer, warmupSeconds);

      long direct = watch.directBytes();
      long heap = watch.heapBytes();
      MemoryMonitor monitor =
          new MemoryMonitor(GrpcPools::pinnedDirectBytes, GrpcPools::reservedDirectBytes);
      long start = System.nanoTime();
      long[] done = loop(downloader, buffer, windowSeconds);
      long nanos = System.nanoTime() - start;
      JsonObject memory = monitor.stop();
      direct = watch.directBytes() - direct;
      heap = watch.heapBytes() - heap;
      long payload = done[1];
      DownloadFigures figures = new DownloadFigures(api, variant, provider,
          Metric.CONNECTIONS_INSTALLED.value(), done[0], payload * 1e3 / nanos,
          memory.get("cpuNanos").getAsDouble() / payload,
          memory.get("pooledDirectPinnedMeanBytes").getAsLong(),
          memory.get("pooledDirectPinnedPeakBytes").getAsLong(),
          memory.get("poolReservedMeanBytes").getAsLong(),
          memory.get("poolReservedPeakBytes").getAsLong(),
          memory.get("heapAfterGcMeanBytes").getAsLong(),
          direct + heap == 0 ? 0 : (double) direct / (direct + heap));
      System.out.println(figures.line());
    }
  }

  /**
   * Downloads whole objects until {@code seconds} have passed (at least one); returns how many
   * and their payload bytes.
   */
  private static long[] loop(Downloader downloader, ByteBuffer buffer, double seconds)
      throws Exception {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    long downloads = 0;
    long payload = 0;
    do {
      payload += downloader.download(buffer, null);
      downloads++;
    } while (System.nanoTime() < end);
    return new long[] {downloads, payload};
  }

  private static Downloader open(String api, int port, ReadObjectContentWatch watch)
      throws Exception {
    return switch (api) {
      case "high-level" -> highLevel(port, watch);
      case "gapic" -> gapic(port, watch);
      default -> throw new IllegalArgumentException("unknown api " + api);
    };
  }

  /** The {@code Storage} client, configured as the Storage tests' fixture configures it. */
  private static Downloader highLevel(int port, ReadObjectContentWatch watch) {
    Storage storage = StorageOptions.grpc()
        .setHost("http://127.0.0.1:" + port)
        .setCredentials(NoCredentials.getInstance())
        .setAttemptDirectPath(false)
        .setEnableGrpcClientMetrics(false)
        .setProjectId("bench")
        .setGrpcInterceptorProvider(watch)
        .build()
        .getService();
    BlobId blob = BlobId.of(FakeStorageServer.BUCKET_NAME, FakeStorageServer.OBJECT);
    return new Downloader() {
      @Override
      public long download(ByteBuffer buffer, CRC32C crc) throws Exception {
        long bytes = 0;
        try (ReadChannel reader = storage.reader(blob)) {
          for (int n; (n = reader.read(buffer.clear())) >= 0; ) {
            bytes += n;
            if (crc != null) {
              crc.update(buffer.flip());
            }
          }
        }
        return bytes;
      }

      @Override
      public void close() throws Exception {
        storage.close();
      }
    };
  }

  /**
   * The generated {@code StorageClient} on the same endpoint: no credentials, plaintext (what
   * {@code StorageOptions} configures for an {@code http://} host), the watch as interceptor.
   */
  private static Downloader gapic(int port, ReadObjectContentWatch watch) throws Exception {
    String endpoint = "127.0.0.1:" + port;
    StorageSettings settings = StorageSettings.newBuilder()
        .setEndpoint(endpoint)
        .setCredentialsProvider(NoCredentialsProvider.create())
        .setTransportChannelProvider(InstantiatingGrpcChannelProvider.newBuilder()
            .setEndpoint(endpoint)
            .setChannelConfigurator(ManagedChannelBuilder::usePlaintext)
            .setInterceptorProvider(watch)
            .build())
        .build();
    StorageClient client = StorageClient.create(settings);
    ReadObjectRequest request = ReadObjectRequest.newBuilder()
        .setBucket(FakeStorageServer.BUCKET)
        .setObject(FakeStorageServer.OBJECT)
        .build();
    return new Downloader() {
      @Override
      public long download(ByteBuffer buffer, CRC32C crc) {
        long bytes = 0;
        for (ReadObjectResponse response : client.readObjectCallable().call(request)) {
          buffer.clear();
          response.getChecksummedData().getContent().copyTo(buffer);
          bytes += buffer.position();
          if (crc != null) {
            crc.update(buffer.flip());
          }
        }
        return bytes;
      }

      @Override
      public void close() throws Exception {
        client.close();
        client.awaitTermination(1, TimeUnit.MINUTES);
      }
    };
  }
}
