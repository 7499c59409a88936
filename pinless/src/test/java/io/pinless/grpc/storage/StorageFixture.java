package io.pinless.grpc.storage;

import com.google.cloud.NoCredentials;
import com.google.cloud.ServiceOptions;
import com.google.cloud.storage.Storage;
import com.google.cloud.storage.StorageOptions;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.pinless.testing.FakeStorage;
import io.pinless.testing.ReadObjectContentWatch;
import io.pinless.testing.TestCertificates;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.concurrent.TimeUnit;

/**
 * A {@link FakeStorage} on a stock grpc-netty server on loopback, and the Cloud Storage client
 * pointed at it as a user would point it at a private endpoint: {@code StorageOptions.grpc()},
 * no credentials, no DirectPath, an {@code http://} or {@code https://} host. The client's channel
 * comes from whichever transport provider gRPC's registry picks.
 *
 * <p>The server is built with {@code NettyServerBuilder} itself, never through {@code
 * ServerBuilder}, so it is stock grpc-netty whatever provider is on.
 *
 * <p>The client's ReadObject responses are watched by a {@link ReadObjectContentWatch}, after its
 * marshaller parsed them: {@link #directContentBytes()} counts content bytes that are views of
 * direct buffers (what the client's zero-copy parse makes of pooled Netty buffers), {@link
 * #heapContentBytes()} the rest (what a copying parse makes).
 */
final class StorageFixture implements AutoCloseable {
  static final String BUCKET = "projects/_/buckets/pinless-test";

  final FakeStorage service = new FakeStorage();
  final Storage storage;
  private final Server server;
  private final ReadObjectContentWatch contentWatch = new ReadObjectContentWatch();

  private StorageFixture(boolean tls, boolean retries) throws IOException {
    NettyServerBuilder builder =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .addService(service);
    if (tls) {
      builder.sslContext(TestCertificates.serverContext(
          SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE));
    }
    server = builder.build().start();
    String scheme = tls ? "https" : "http";
    StorageOptions.Builder options = StorageOptions.grpc()
        .setHost(scheme + "://127.0.0.1:" + server.getPort())
        .setCredentials(NoCredentials.getInstance())
        .setAttemptDirectPath(false)
        .setEnableGrpcClientMetrics(false)
        .setProjectId("test")
        .setGrpcInterceptorProvider(contentWatch);
    if (!retries) {
      options.setRetrySettings(ServiceOptions.getNoRetrySettings());
    }
    storage = options.build().getService();
  }

  /** A fixture over h2c: the client is given an {@code http://} host. */
  static StorageFixture plaintext() throws IOException {
    return new StorageFixture(false, true);
  }

  /**
   * A fixture over TLS: the server presents {@link TestCertificates#SERVER} (localhost,
   * 127.0.0.1). The client trusts the JDK's default trust store, so the caller must have pointed
   * {@code javax.net.ssl.trustStore} at {@link #writeTrustStore(Path)}'s file first.
   */
  static StorageFixture tls() throws IOException {
    return new StorageFixture(true, true);
  }

  /** As {@link #tls()}, with a client that gives up after its first attempt at any call. */
  static StorageFixture tlsWithoutRetries() throws IOException {
    return new StorageFixture(true, false);
  }

  /**
   * Writes a PKCS#12 trust store holding {@link TestCertificates#CA} into {@code dir}, password
   * {@code "changeit"}, and returns its path.
   */
  static Path writeTrustStore(Path dir) throws Exception {
    KeyStore store = KeyStore.getInstance("PKCS12");
    store.load(null, null);
    store.setCertificateEntry("pinless-test-ca", TestCertificates.CA.certificate());
    Path file = dir.resolve("trust.p12");
    try (OutputStream out = Files.newOutputStream(file)) {
      store.store(out, "changeit".toCharArray());
    }
    return file;
  }

  /** The server's port on 127.0.0.1. */
  int port() {
    return server.getPort();
  }

  /** Content bytes of received ReadObject responses that are views of direct buffers. */
  long directContentBytes() {
    return contentWatch.directBytes();
  }

  /** Content bytes of received ReadObject responses held in heap memory. */
  long heapContentBytes() {
    return contentWatch.heapBytes();
  }

  @Override
  public void close() throws Exception {
    try {
      storage.close();
    } finally {
      server.shutdownNow();
      server.awaitTermination(1, TimeUnit.MINUTES);
    }
  }
}
