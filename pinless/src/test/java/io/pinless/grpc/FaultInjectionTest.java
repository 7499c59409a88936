package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.pinless.testing.FaultProxy;
import io.pinless.testing.Handshakers;
import io.pinless.testing.TestCertificates;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * pinless on both ends through a faulty network ({@link FaultProxy}), over plaintext, TLS (each
 * engine) and ALTS: a connection reset or half-closed in the middle of a response or of the
 * handshake ends the call with UNAVAILABLE and the next call reconnects; delayed, cut bytes all
 * arrive. Netty's leak detector (PARANOID) fails any test that leaks.
 */
class FaultInjectionTest {
  private static Server clientHandshaker;
  private static Server serverHandshaker;

  @BeforeAll
  static void startHandshakers() throws Exception {
    clientHandshaker = Handshakers.start("client-sa");
    serverHandshaker = Handshakers.start("server-sa");
  }

  @AfterAll
  static void stopHandshakers() throws Exception {
    Handshakers.stop(clientHandshaker, serverHandshaker);
  }

  /** The secure (or not) transports under test. */
  enum Security {
    PLAINTEXT, TLS_JDK, TLS_OPENSSL, ALTS;

    ServerCredentials server() throws Exception {
      switch (this) {
        case PLAINTEXT:
          return PinlessServerCredentials.insecure();
        case ALTS:
          return PinlessServerCredentials.altsBuilder()
              .handshakerAddress(Handshakers.address(serverHandshaker)).build();
        default:
          return PinlessServerCredentials.tls(TestCertificates.serverContext(
              provider(), TestCertificates.SERVER, ClientAuth.NONE));
      }
    }

    ChannelCredentials channel() throws Exception {
      switch (this) {
        case PLAINTEXT:
          return PinlessChannelCredentials.insecure();
        case ALTS:
          return PinlessChannelCredentials.altsBuilder()
              .handshakerAddress(Handshakers.address(clientHandshaker)).build();
        default:
          return PinlessChannelCredentials.tls(TestCertificates.clientContext(provider(), null));
      }
    }

    private SslProvider provider() {
      return this == TLS_JDK ? SslProvider.JDK : SslProvider.OPENSSL;
    }
  }

  /** A server, a proxy in front of it and a channel through the proxy. */
  private static final class Setup implements AutoCloseable {
    final Server server;
    final FaultProxy proxy;
    final ManagedChannel channel;

    Setup(Security security) throws Exception {
      server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), security.server())
          .addService(TestService.definition())
          .build()
          .start();
      proxy = new FaultProxy(server.getPort());
      channel = NettyChannelBuilder.forAddress(
              new InetSocketAddress("127.0.0.1", proxy.port()), security.channel())
          .build();
    }

    /** A unary call that must succeed, waiting for the channel to reconnect if it must. */
    void callSucceeds(int seed) {
      assertArrayEquals(message(1000, seed), ClientCalls.blockingUnaryCall(channel,
          TestService.UNARY,
          CallOptions.DEFAULT.withWaitForReady().withDeadlineAfter(30, TimeUnit.SECONDS),
          message(1000, seed)));
    }

    /** A download of 1 MiB the proxy holds after 50,000 bytes, on a connection in use. */
    Iterator<byte[]> stalledDownload() {
      callSucceeds(1);
      proxy.stallAfter(50_000);
      Iterator<byte[]> download = ClientCalls.blockingServerStreamingCall(channel,
          TestService.SERVER_STREAM, CallOptions.DEFAULT, TestService.streamRequest(4, 256 << 10));
      awaitStall();
      return download;
    }

    /** Waits until the proxy holds back the bytes of one connection. */
    void awaitStall() {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (proxy.stalled() < 1 && System.nanoTime() < deadline) {
        Thread.onSpinWait();
      }
      assertEquals(1, proxy.stalled(), "the proxy holds a connection's bytes");
    }

    @Override
    public void close() throws Exception {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      proxy.close();
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  private static void drain(Iterator<byte[]> it) {
    while (it.hasNext()) {
      it.next();
    }
  }

  private static void assertUnavailable(StatusRuntimeException e) {
    assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.toString());
  }

  @ParameterizedTest
  @EnumSource(Security.class)
  void aResetInTheMiddleOfAResponseEndsTheCallAndTheNextReconnects(Security security)
      throws Exception {
    try (Setup s = new Setup(security)) {
      Iterator<byte[]> download = s.stalledDownload();
      s.proxy.resetAll();
      s.proxy.resume(); // for the next connection
      assertUnavailable(assertThrows(StatusRuntimeException.class, () -> drain(download)));
      s.callSucceeds(2);
      assertEquals(2, s.proxy.accepted(), "the next call reconnected");
    }
  }

  @ParameterizedTest
  @EnumSource(Security.class)
  void aHalfCloseInTheMiddleOfAResponseEndsTheCallAndTheNextReconnects(Security security)
      throws Exception {
    try (Setup s = new Setup(security)) {
      Iterator<byte[]> download = s.stalledDownload();
      s.proxy.halfCloseToClients();
      assertUnavailable(assertThrows(StatusRuntimeException.class, () -> drain(download)));
      s.proxy.resume();
      s.callSucceeds(2);
      assertEquals(2, s.proxy.accepted(), "the next call reconnected");
    }
  }

  @ParameterizedTest
  @EnumSource(Security.class)
  void aResetDuringTheHandshakeFailsTheCallAndTheNextReconnects(Security security)
      throws Exception {
    try (Setup s = new Setup(security)) {
      // 20 bytes reach the client: a part of the server's first message, whatever the protocol.
      s.proxy.stallAfter(20);
      CompletableFuture<byte[]> call = new CompletableFuture<>();
      ClientCalls.asyncUnaryCall(s.channel.newCall(TestService.UNARY, CallOptions.DEFAULT),
          message(10, 1), PlaintextIntegrationTest.observer(call));
      s.awaitStall();
      assertFalse(call.isDone());
      s.proxy.resetAll();
      s.proxy.resume(); // for the next connection
      java.util.concurrent.ExecutionException e = assertThrows(
          java.util.concurrent.ExecutionException.class, () -> call.get(30, TimeUnit.SECONDS));
      assertUnavailable((StatusRuntimeException) e.getCause());
      s.callSucceeds(2);
    }
  }

  @ParameterizedTest
  @EnumSource(Security.class)
  void delayedBytesInPiecesAllArrive(Security security) throws Exception {
    try (Setup s = new Setup(security)) {
      s.proxy.cutToClients(4096);
      s.proxy.delayToClients(1);
      Iterator<byte[]> download = ClientCalls.blockingServerStreamingCall(s.channel,
          TestService.SERVER_STREAM, CallOptions.DEFAULT, TestService.streamRequest(4, 25_000));
      for (int n = 0; n < 4; n++) {
        assertArrayEquals(message(25_000, n), download.next(), "message " + n);
      }
      assertFalse(download.hasNext());
    }
  }
}
