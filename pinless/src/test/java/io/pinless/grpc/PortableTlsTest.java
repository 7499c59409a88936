package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ForwardingServerCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.TestCertificates;
import io.pinless.testing.TestCertificates.Identity;
import io.pinless.testing.TlsPeer;
import java.io.ByteArrayInputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** grpc's portable TLS credentials through pinless, both ends, mutual TLS. */
class PortableTlsTest {
  private static byte[] pem(String type, byte[] der) {
    String body = Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(der);
    return ("-----BEGIN " + type + "-----\n" + body + "\n-----END " + type + "-----\n")
        .getBytes(StandardCharsets.US_ASCII);
  }

  private static ByteArrayInputStream certificate(Identity identity) throws Exception {
    return new ByteArrayInputStream(pem("CERTIFICATE", identity.certificate().getEncoded()));
  }

  private static ByteArrayInputStream key(Identity identity) {
    return new ByteArrayInputStream(pem("PRIVATE KEY", identity.key().getEncoded()));
  }

  private static ServerCredentials requiringClientCertificates() throws Exception {
    return PinlessServerCredentials.from(TlsServerCredentials.newBuilder()
        .keyManager(certificate(TestCertificates.SERVER), key(TestCertificates.SERVER))
        .trustManager(certificate(TestCertificates.CA))
        .clientAuth(TlsServerCredentials.ClientAuth.REQUIRE)
        .build());
  }

  private static Server start(ServerCredentials creds, ConcurrentLinkedQueue<String> seen)
      throws Exception {
    ServerInterceptor recordPeer = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(
          ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
        try {
          seen.add(TlsPeer.subject(call.getAttributes()));
        } catch (Exception e) {
          seen.add("none: " + e);
        }
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(
            next.startCall(call, headers)) {};
      }
    };
    return NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), creds)
        .addService(ServerInterceptors.intercept(TestService.definition(), recordPeer))
        .build()
        .start();
  }

  private static byte[] call(Server server, ChannelCredentials creds) throws Exception {
    ManagedChannel channel =
        NettyChannelBuilder.forTarget("localhost:" + server.getPort(), creds).build();
    try {
      return ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, CallOptions.DEFAULT, message(20000, 7));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void mutualTlsFromPortableCredentialsOnBothEnds() throws Exception {
    long installedBefore = Metric.CONNECTIONS_INSTALLED.value();
    ConcurrentLinkedQueue<String> seen = new ConcurrentLinkedQueue<>();
    Server server = start(requiringClientCertificates(), seen);
    try {
      ChannelCredentials client = PinlessChannelCredentials.from(TlsChannelCredentials.newBuilder()
          .keyManager(certificate(TestCertificates.CLIENT), key(TestCertificates.CLIENT))
          .trustManager(certificate(TestCertificates.CA))
          .build());
      assertArrayEquals(message(20000, 7), call(server, client));
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertEquals("CN=pinless-test-client", seen.peek());
    assertEquals(installedBefore + 2, Metric.CONNECTIONS_INSTALLED.value(), "pinless on both ends");
  }

  @Test
  void aClientWithoutACertificateIsRefused() throws Exception {
    Server server = start(requiringClientCertificates(), new ConcurrentLinkedQueue<>());
    try {
      ChannelCredentials client = PinlessChannelCredentials.from(TlsChannelCredentials.newBuilder()
          .trustManager(certificate(TestCertificates.CA))
          .build());
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
          () -> call(server, client));
      assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode());
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void keysThatDoNotLoadAreRefusedWhenTheCredentialsAreMade() {
    byte[] garbage = "not a key".getBytes(StandardCharsets.US_ASCII);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> PinlessChannelCredentials.from(TlsChannelCredentials.newBuilder()
            .keyManager(new ByteArrayInputStream(garbage), new ByteArrayInputStream(garbage))
            .build()));
    assertTrue(e.getMessage().contains("certificate"), e.getMessage());
  }

  @Test
  void insecureCredentialsBecomePinlessPlaintextAndOthersAreRefused() throws Exception {
    long installedBefore = Metric.CONNECTIONS_INSTALLED.value();
    try (Loopback lb = new Loopback(Loopback.Transport.NIO,
        PinlessServerCredentials.from(io.grpc.InsecureServerCredentials.create()),
        PinlessChannelCredentials.from(io.grpc.InsecureChannelCredentials.create()))) {
      assertArrayEquals(message(100, 3), ClientCalls.blockingUnaryCall(
          lb.channel, TestService.UNARY, CallOptions.DEFAULT, message(100, 3)));
    }
    assertEquals(installedBefore + 2, Metric.CONNECTIONS_INSTALLED.value(), "pinless on both ends");
    assertThrows(IllegalArgumentException.class, () -> PinlessChannelCredentials.from(
        io.grpc.CompositeChannelCredentials.create(io.grpc.InsecureChannelCredentials.create(),
            new io.grpc.CallCredentials() {
              @Override
              public void applyRequestMetadata(
                  RequestInfo info, java.util.concurrent.Executor executor, MetadataApplier apply) {
                apply.apply(new Metadata());
              }
            })));
  }
}
