package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallCredentials;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ChoiceChannelCredentials;
import io.grpc.CompositeChannelCredentials;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelProvider;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerProvider;
import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.alts.AltsServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyChannelProvider;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.NettyServerProvider;
import io.grpc.stub.ClientCalls;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.TestCertificates;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * Channels and servers built through gRPC's registries with {@code pinless.provider=true}: each
 * goes through pinless, shown by the pinless pipelines installed (exactly one per call: the other
 * end is stock grpc-netty, built without the registries). Credentials pinless declines reach
 * grpc-netty's provider. {@link ProviderSwitchTest} runs this class in a JVM of its own.
 */
@EnabledIfSystemProperty(named = "pinless.provider", matches = "true")
class SwitchedOnRegistryCalls {
  private static final Metadata.Key<String> TOKEN =
      Metadata.Key.of("x-pinless-token", Metadata.ASCII_STRING_MARSHALLER);
  private static final String PASSWORD = "pinless";

  /** The {@code TOKEN} headers the servers saw, in order. */
  private final ConcurrentLinkedQueue<String> tokens = new ConcurrentLinkedQueue<>();

  /** Makes the JDK's default trust store the test CA alone, for {@code useTransportSecurity()}. */
  @BeforeAll
  static void trustTheTestCaByDefault() throws Exception {
    KeyStore store = KeyStore.getInstance("PKCS12");
    store.load(null, null);
    store.setCertificateEntry("pinless-test-ca", TestCertificates.CA.certificate());
    Path file = Files.createTempFile("pinless-trust", ".p12");
    file.toFile().deleteOnExit();
    try (OutputStream out = Files.newOutputStream(file)) {
      store.store(out, PASSWORD.toCharArray());
    }
    System.setProperty("javax.net.ssl.trustStore", file.toString());
    System.setProperty("javax.net.ssl.trustStorePassword", PASSWORD);
    System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
  }

  @Test
  void pinlessIsTheProviderOfBothRegistries() {
    assertInstanceOf(PinlessChannelProvider.class, ManagedChannelProvider.provider());
    assertInstanceOf(PinlessServerProvider.class, ServerProvider.provider());
  }

  @Test
  void forAddressWithUsePlaintext() throws Exception {
    Server server = start(NettyServerBuilder.forAddress(
        new InetSocketAddress("127.0.0.1", 0), InsecureServerCredentials.create()));
    assertPinlessEnds(1, server,
        ManagedChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext());
  }

  @Test
  void forTargetIsTlsByDefaultOverTheDefaultTrustStore() throws Exception {
    Server server = start(NettyServerBuilder.forAddress(
        new InetSocketAddress("127.0.0.1", 0), serverTls()));
    assertPinlessEnds(1, server, ManagedChannelBuilder.forTarget("localhost:" + server.getPort()));
  }

  @Test
  void newChannelBuilderWithInsecureCredentials() throws Exception {
    Server server = start(NettyServerBuilder.forAddress(
        new InetSocketAddress("127.0.0.1", 0), InsecureServerCredentials.create()));
    assertPinlessEnds(1, server, Grpc.newChannelBuilder(
        "127.0.0.1:" + server.getPort(), InsecureChannelCredentials.create()));
  }

  @Test
  void newChannelBuilderWithTlsCredentials() throws Exception {
    Server server = start(NettyServerBuilder.forAddress(
        new InetSocketAddress("127.0.0.1", 0), serverTls()));
    assertPinlessEnds(1, server,
        Grpc.newChannelBuilder("localhost:" + server.getPort(), clientTls()));
  }

  @Test
  void compositeCredentialsKeepTheirCallCredentials() throws Exception {
    Server server = start(NettyServerBuilder.forAddress(
        new InetSocketAddress("127.0.0.1", 0), serverTls()));
    CallCredentials token = new CallCredentials() {
      @Override
      public void applyRequestMetadata(
          RequestInfo info, Executor executor, MetadataApplier applier) {
        Metadata headers = new Metadata();
        headers.put(TOKEN, "secret");
        applier.apply(headers);
      }
    };
    assertPinlessEnds(1, server, Grpc.newChannelBuilder("localhost:" + server.getPort(),
        CompositeChannelCredentials.create(clientTls(), token)));
    assertEquals("secret", tokens.poll(), "the call credentials' header");
  }

  @Test
  void serverBuilderForPortIsPlaintextByDefault() throws Exception {
    Server server = start(ServerBuilder.forPort(0));
    assertPinlessEnds(1, server, NettyChannelBuilder.forTarget(
        "127.0.0.1:" + server.getPort(), InsecureChannelCredentials.create()));
  }

  @Test
  void serverBuilderForPortTakesUseTransportSecurity() throws Exception {
    Server server = start(ServerBuilder.forPort(0).useTransportSecurity(
        Pem.certificate(TestCertificates.SERVER), Pem.key(TestCertificates.SERVER)));
    assertPinlessEnds(1, server,
        NettyChannelBuilder.forTarget("localhost:" + server.getPort(), clientTls()));
  }

  @Test
  void newServerBuilderForPortWithTlsCredentials() throws Exception {
    Server server = start(Grpc.newServerBuilderForPort(0, serverTls()));
    assertPinlessEnds(1, server,
        NettyChannelBuilder.forTarget("localhost:" + server.getPort(), clientTls()));
  }

  @Test
  void bothEndsThroughTheRegistries() throws Exception {
    Server server = start(Grpc.newServerBuilderForPort(0, serverTls()));
    assertPinlessEnds(2, server,
        Grpc.newChannelBuilder("localhost:" + server.getPort(), clientTls()));
  }

  @Test
  void declinedChannelCredentialsFallThroughToGrpcNetty() throws Exception {
    // grpc-alts's credentials are grpc-netty-shaded's, which serves them.
    assertEquals("NettyChannelBuilder",
        Grpc.newChannelBuilder("localhost:443", AltsChannelCredentials.create())
            .getClass().getSimpleName());
    RuntimeException none = assertThrows(RuntimeException.class,
        () -> Grpc.newChannelBuilder("localhost:443", new ChannelCredentials() {
          @Override
          public ChannelCredentials withoutBearerTokens() {
            return this;
          }
        }));
    String reasons = none.getMessage();
    assertTrue(reasons.startsWith(PinlessChannelProvider.class.getName()
        + ": pinless serves insecure and TLS credentials"), reasons);
    assertTrue(reasons.contains("; " + NettyChannelProvider.class.getName() + ": "), reasons);

    Server server = start(NettyServerBuilder.forAddress(
        new InetSocketAddress("127.0.0.1", 0), InsecureServerCredentials.create()));
    // grpc-netty understands choice credentials; pinless declines them, so stock serves.
    assertPinlessEnds(0, server, Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(),
        ChoiceChannelCredentials.create(InsecureChannelCredentials.create())));
  }

  @Test
  void declinedServerCredentialsFallThroughToGrpcNetty() {
    assertEquals("NettyServerBuilder",
        Grpc.newServerBuilderForPort(0, AltsServerCredentials.create()).getClass().getSimpleName());
    RuntimeException none = assertThrows(RuntimeException.class,
        () -> Grpc.newServerBuilderForPort(0, new ServerCredentials() {}));
    String reasons = none.getMessage();
    assertTrue(reasons.startsWith(PinlessServerProvider.class.getName()
        + ": pinless serves insecure and TLS credentials"), reasons);
    assertTrue(reasons.contains("; " + NettyServerProvider.class.getName() + ": "), reasons);
  }

  /**
   * Makes an echo call over a channel from {@code client} to {@code server}, closes both, and
   * checks that {@code pinlessEnds} pinless pipelines were installed meanwhile.
   */
  private static void assertPinlessEnds(
      int pinlessEnds, Server server, ManagedChannelBuilder<?> client) throws Exception {
    long installed = Metric.CONNECTIONS_INSTALLED.value();
    ManagedChannel channel = client.build();
    try {
      byte[] request = message(70000, pinlessEnds);
      assertArrayEquals(request, ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, CallOptions.DEFAULT, request));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertEquals(installed + pinlessEnds, Metric.CONNECTIONS_INSTALLED.value(),
        "pinless pipelines installed");
  }

  /** Starts the echo service, recording each call's {@code TOKEN} header. */
  private Server start(ServerBuilder<?> builder) throws Exception {
    ServerInterceptor recordToken = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(
          ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        if (headers.containsKey(TOKEN)) {
          tokens.add(headers.get(TOKEN));
        }
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(
            next.startCall(call, headers)) {};
      }
    };
    return builder.addService(ServerInterceptors.intercept(TestService.definition(), recordToken))
        .build()
        .start();
  }

  private static ServerCredentials serverTls() throws Exception {
    return TlsServerCredentials.create(
        Pem.certificate(TestCertificates.SERVER), Pem.key(TestCertificates.SERVER));
  }

  private static ChannelCredentials clientTls() throws Exception {
    return TlsChannelCredentials.newBuilder()
        .trustManager(Pem.certificate(TestCertificates.CA))
        .build();
  }
}
