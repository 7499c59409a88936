package io.pinless.grpc.storage;

import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.pinless.testing.FakeStorage;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * The server JVM of {@link StorageDownloads}: a {@link FakeStorage} holding one object of random
 * bytes, on a stock grpc-netty server (h2c on 127.0.0.1, built with {@code NettyServerBuilder}
 * itself, so never pinless).
 *
 * <pre>
 *   FakeStorageServer &lt;object bytes&gt;
 * </pre>
 *
 * <p>Once serving, it prints one line, {@value #READY} followed by its port, the object's size
 * and the object's CRC32C, and serves until its standard input ends.
 *
 * <p>Memory: the object is held twice on the heap (the service keeps a copy of what it is
 * given); each response's content is a view of the service's copy until grpc-netty writes it.
 */
final class FakeStorageServer {
  /** The bucket, as the Cloud Storage client names it. */
  static final String BUCKET_NAME = "pinless-bench";
  /** The bucket, as a v2 resource name. */
  static final String BUCKET = "projects/_/buckets/" + BUCKET_NAME;
  /** The object's name. */
  static final String OBJECT = "object";
  /** The first word of the line that says the server is ready. */
  static final String READY = "serving";

  private FakeStorageServer() {}

  /** Serves; see the class comment for the argument. */
  public static void main(String[] args) throws IOException, InterruptedException {
    if (args.length != 1) {
      throw new IllegalArgumentException("usage: FakeStorageServer <object bytes>");
    }
    byte[] data = new byte[Integer.parseInt(args[0])];
    new Random(31).nextBytes(data);
    FakeStorage service = new FakeStorage();
    FakeStorage.StoredObject object = service.put(BUCKET, OBJECT, data);
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(service)
        .build()
        .start();
    System.out.println(
        READY + " " + server.getPort() + " " + data.length + " " + object.crc32c());
    System.out.flush();
    try (InputStream in = System.in) {
      while (in.read() >= 0) {
        // serve until the driver closes our standard input (or dies)
      }
    } finally {
      server.shutdownNow();
      server.awaitTermination(1, TimeUnit.MINUTES);
    }
  }
}
