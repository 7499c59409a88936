package io.pinless.grpc;

import static io.pinless.grpc.PlaintextIntegrationTest.observer;
import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.SecurityLevel;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.internal.GrpcAttributes;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.NettySslContextChannelCredentials;
import io.grpc.netty.NettySslContextServerCredentials;
import io.grpc.stub.ClientCalls;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.TestCertificates;
import io.pinless.testing.TlsPeer;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Mutual TLS between pinless and stock grpc-netty, all three pairings, with the JDK's engine and
 * with OpenSSL's: unary and streaming calls of 0 B to 16 MiB, a 64 MiB download, 1000 concurrent
 * streams, and the certificates and security level each end's calls see.
 */
class TlsInteropTest {
  /** Which ends run pinless. */
  enum Pairing {
    PINLESS_BOTH(true, true),
    STOCK_CLIENT_PINLESS_SERVER(false, true),
    PINLESS_CLIENT_STOCK_SERVER(true, false);

    final boolean pinlessClient;
    final boolean pinlessServer;

    Pairing(boolean pinlessClient, boolean pinlessServer) {
      this.pinlessClient = pinlessClient;
      this.pinlessServer = pinlessServer;
    }
  }

  static Stream<Arguments> cases() {
    List<Arguments> cases = new ArrayList<>();
    for (SslProvider provider : new SslProvider[] {SslProvider.JDK, SslProvider.OPENSSL}) {
      for (Pairing pairing : Pairing.values()) {
        cases.add(Arguments.of(provider, pairing));
      }
    }
    return cases.stream();
  }

  @ParameterizedTest
  @MethodSource("cases")
  void mutualTlsCallsOfEveryShape(SslProvider provider, Pairing pairing) throws Exception {
    long installedBefore = Metric.CONNECTIONS_INSTALLED.value();
    ConcurrentLinkedQueue<String> seen = new ConcurrentLinkedQueue<>();
    var serverContext =
        TestCertificates.serverContext(provider, TestCertificates.SERVER, ClientAuth.REQUIRE);
    ServerCredentials serverCreds = pairing.pinlessServer
        ? PinlessServerCredentials.tls(serverContext)
        : NettySslContextServerCredentials.create(serverContext);
    var clientContext = TestCertificates.clientContext(provider, TestCertificates.CLIENT);
    ChannelCredentials channelCreds = pairing.pinlessClient
        ? PinlessChannelCredentials.tls(clientContext)
        : NettySslContextChannelCredentials.create(clientContext);
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), serverCreds)
        .maxInboundMessageSize(Loopback.MAX_MESSAGE)
        .addService(ServerInterceptors.intercept(TestService.definition(), recordPeer(seen)))
        .build()
        .start();
    ManagedChannel channel = NettyChannelBuilder.forTarget("localhost:" + server.getPort(), channelCreds)
        .maxInboundMessageSize(Loopback.MAX_MESSAGE)
        .build();
    try {
      for (int size : new int[] {0, 1, 16383, 16384, 16385, 1 << 20, 16 << 20}) {
        byte[] req = message(size, size);
        assertArrayEquals(req,
            ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, req),
            "unary of " + size + " bytes");
      }
      Iterator<byte[]> download = ClientCalls.blockingServerStreamingCall(channel,
          TestService.SERVER_STREAM, CallOptions.DEFAULT, TestService.streamRequest(64, 1 << 20));
      for (int n = 0; n < 64; n++) {
        assertArrayEquals(message(1 << 20, n), download.next(), "download message " + n);
      }
      assertFalse(download.hasNext());
      List<CompletableFuture<byte[]>> calls = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        CompletableFuture<byte[]> f = new CompletableFuture<>();
        ClientCalls.asyncUnaryCall(channel.newCall(TestService.UNARY, CallOptions.DEFAULT),
            message(512, i), observer(f));
        calls.add(f);
      }
      for (int i = 0; i < calls.size(); i++) {
        assertArrayEquals(message(512, i), calls.get(i).get(60, TimeUnit.SECONDS), "stream " + i);
      }
      assertEquals("CN=localhost", serverSeenByClient(channel));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertFalse(seen.isEmpty());
    for (String peer : seen) {
      assertEquals("CN=pinless-test-client PRIVACY_AND_INTEGRITY", peer);
    }
    int pinlessEnds = (pairing.pinlessClient ? 1 : 0) + (pairing.pinlessServer ? 1 : 0);
    assertEquals(installedBefore + pinlessEnds, Metric.CONNECTIONS_INSTALLED.value(),
        "one pinless pipeline per pinless end");
  }

  /** The subject of the certificate the server presented, as a client call sees it. */
  private static String serverSeenByClient(ManagedChannel channel) throws Exception {
    ClientCall<byte[], byte[]> call = channel.newCall(TestService.UNARY, CallOptions.DEFAULT);
    CompletableFuture<byte[]> done = new CompletableFuture<>();
    ClientCalls.asyncUnaryCall(call, message(1, 1), observer(done));
    done.get(30, TimeUnit.SECONDS);
    return TlsPeer.subject(call.getAttributes());
  }

  /** Records, per call, the client certificate's subject and the security level the server saw. */
  private static ServerInterceptor recordPeer(ConcurrentLinkedQueue<String> seen) {
    return new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(
          ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        SecurityLevel level = call.getAttributes().get(GrpcAttributes.ATTR_SECURITY_LEVEL);
        String subject;
        try {
          subject = TlsPeer.subject(call.getAttributes());
        } catch (Exception e) {
          subject = "no client certificate: " + e;
        }
        seen.add(subject + " " + level);
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(
            next.startCall(call, headers)) {};
      }
    };
  }
}
