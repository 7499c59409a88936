package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.pinless.testing.FaultProxy;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Metadata;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslProvider;
import io.pinless.testing.TestCertificates;
import io.pinless.tls.TlsHandshakeHandler;
import io.pinless.testing.TestCertificates.Identity;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every bad input of a TLS connection ends the call with UNAVAILABLE and the reason, closes the
 * connection, and leaks nothing (the leak detector runs at PARANOID under every test).
 */
class TlsBadInputTest {
  private static final SslProvider[] ENGINES = {SslProvider.JDK, SslProvider.OPENSSL};

  private static Server server(ServerCredentials creds) throws Exception {
    return NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), creds)
        .addService(TestService.definition())
        .build()
        .start();
  }

  private static ManagedChannel channel(int port, ChannelCredentials creds) {
    return NettyChannelBuilder.forTarget("localhost:" + port, creds).build();
  }

  private static StatusRuntimeException callFails(ManagedChannel channel) {
    try {
      ClientCalls.blockingUnaryCall(channel, TestService.UNARY,
          CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), message(10, 1));
    } catch (StatusRuntimeException e) {
      return e;
    } finally {
      channel.shutdownNow();
    }
    throw new AssertionError("the call succeeded");
  }

  private static void assertUnavailable(StatusRuntimeException e, String... anyOf) {
    assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
    if (anyOf.length == 0) {
      return;
    }
    String all = String.valueOf(e.getStatus());
    for (String s : anyOf) {
      if (all.toLowerCase().contains(s.toLowerCase())) {
        return;
      }
    }
    throw new AssertionError("expected one of " + String.join(", ", anyOf) + " in " + all);
  }

  /** A pinless TLS server over {@code identity}, a pinless TLS client trusting the test CA. */
  private static StatusRuntimeException pinlessCallFails(SslProvider engine, Identity identity,
      ClientAuth auth, Identity clientIdentity) throws Exception {
    Server server = server(PinlessServerCredentials.tls(
        TestCertificates.serverContext(engine, identity, auth)));
    try {
      return callFails(channel(server.getPort(),
          PinlessChannelCredentials.tls(TestCertificates.clientContext(engine, clientIdentity))));
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @ParameterizedTest
  @EnumSource(value = SslProvider.class, names = {"JDK", "OPENSSL"})
  void anUntrustedCertificate(SslProvider engine) throws Exception {
    assertUnavailable(pinlessCallFails(engine, TestCertificates.selfSignedServer(),
        ClientAuth.NONE, null), "TLS handshake failed");
  }

  @ParameterizedTest
  @EnumSource(value = SslProvider.class, names = {"JDK", "OPENSSL"})
  void aCertificateForAnotherHost(SslProvider engine) throws Exception {
    StatusRuntimeException e = pinlessCallFails(engine,
        TestCertificates.server("other.example"), ClientAuth.NONE, null);
    assertUnavailable(e, "TLS handshake failed");
    assertUnavailable(e, "localhost", "subject alternative", "name");
  }

  @ParameterizedTest
  @EnumSource(value = SslProvider.class, names = {"JDK", "OPENSSL"})
  void anExpiredCertificate(SslProvider engine) throws Exception {
    StatusRuntimeException e = pinlessCallFails(engine, TestCertificates.expiredServer(),
        ClientAuth.NONE, null);
    assertUnavailable(e, "TLS handshake failed");
    assertUnavailable(e, "expired", "validity", "NotAfter");
  }

  @ParameterizedTest
  @EnumSource(value = SslProvider.class, names = {"JDK", "OPENSSL"})
  void aClientWithoutACertificateWhereOneIsRequired(SslProvider engine) throws Exception {
    // With TLS 1.3 the client's handshake ends before the server checks it: the server's alert
    // arrives as a record after it.
    assertUnavailable(pinlessCallFails(engine, TestCertificates.SERVER, ClientAuth.REQUIRE, null),
        "certificate", "TLS record rejected", "closed");
  }

  @Test
  void contextsAndTimeoutsAreCheckedWhenTheCredentialsAreMade() throws Exception {
    SslContext client = TestCertificates.clientContext(SslProvider.JDK, null);
    SslContext server =
        TestCertificates.serverContext(SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE);
    SslContext noAlpn = io.netty.handler.ssl.SslContextBuilder.forClient().build();
    assertThrows(IllegalArgumentException.class, () -> PinlessChannelCredentials.tls(server));
    assertThrows(IllegalArgumentException.class, () -> PinlessServerCredentials.tls(client));
    assertThrows(IllegalArgumentException.class, () -> PinlessChannelCredentials.tls(noAlpn));
    assertThrows(IllegalArgumentException.class,
        () -> PinlessChannelCredentials.tls(client, 0, TimeUnit.SECONDS));
    assertThrows(IllegalArgumentException.class,
        () -> PinlessServerCredentials.tls(server, -1, TimeUnit.SECONDS));
  }

  @Test
  void tlsToAPlaintextPort() throws Exception {
    Server server = server(PinlessServerCredentials.insecure());
    try {
      assertUnavailable(callFails(channel(server.getPort(),
              PinlessChannelCredentials.tls(TestCertificates.clientContext(SslProvider.JDK, null)))),
          "does not speak TLS", "closed during the TLS handshake");
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void plaintextHttp2ToATlsPort() throws Exception {
    Server server = server(PinlessServerCredentials.tls(
        TestCertificates.serverContext(SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE)));
    try {
      assertUnavailable(callFails(channel(server.getPort(), InsecureChannelCredentials.create())));
      // The server closes at the first bytes: a raw preface sees the end of the stream.
      try (Socket s = new Socket(InetAddress.getLoopbackAddress(), server.getPort())) {
        s.setSoTimeout(10_000);
        s.getOutputStream().write(
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        assertEquals(-1, s.getInputStream().read(), "the server closed without answering");
      }
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void theServerNamesPlaintextHttp2AsTheReason() throws Exception {
    SslContext context =
        TestCertificates.serverContext(SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE);
    EmbeddedChannel channel = new EmbeddedChannel(new TlsHandshakeHandler(
        context.newEngine(ByteBufAllocator.DEFAULT), Runnable::run, 10_000));
    StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
        () -> channel.writeInbound(Unpooled.copiedBuffer(
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", StandardCharsets.US_ASCII)));
    assertUnavailable(e, "plaintext HTTP/2 sent to a TLS port");
    assertFalse(channel.isOpen(), "closed");
    assertFalse(channel.finishAndReleaseAll(), "nothing passed on");
  }

  /** A pinless TLS client against a raw server that answers the ClientHello with {@code reply}. */
  private static StatusRuntimeException againstRawServer(long timeoutMillis,
      Consumer<Socket> reply) throws Exception {
    try (ServerSocket listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      Thread t = new Thread(() -> {
        try (Socket s = listener.accept()) {
          InputStream in = s.getInputStream();
          in.read(new byte[5]);
          reply.accept(s);
          // Hold the connection until the client gives up.
          in.transferTo(OutputStream.nullOutputStream());
        } catch (Exception e) {
          // The client closed.
        }
      }, "raw-tls-server");
      t.setDaemon(true);
      t.start();
      return callFails(channel(listener.getLocalPort(), PinlessChannelCredentials.tls(
          TestCertificates.clientContext(SslProvider.JDK, null), timeoutMillis,
          TimeUnit.MILLISECONDS)));
    }
  }

  private static Consumer<Socket> send(int... bytes) {
    return s -> {
      try {
        OutputStream out = s.getOutputStream();
        for (int b : bytes) {
          out.write(b);
        }
        out.flush();
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    };
  }

  @Test
  void aStalledHandshakeEndsAtItsDeadline() throws Exception {
    // The raw server never answers: the handshake's own deadline, not the call's, ends it.
    assertUnavailable(againstRawServer(500, s -> {}), "did not finish within 500 ms");
  }

  @Test
  void aTruncatedHandshake() throws Exception {
    assertUnavailable(againstRawServer(20_000, send(0x16, 3, 3, 0, 64, 1, 2, 3).andThen(s -> {
      try {
        s.close();
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    })), "closed during the TLS handshake");
  }

  @Test
  void aRecordLengthAboveTheMaximum() throws Exception {
    assertUnavailable(againstRawServer(20_000, send(0x16, 3, 3, 0x48, 0x01)),
        "18433 bytes, above the maximum of 18432");
  }

  @Test
  void garbageFromAPlaintextPeer() throws Exception {
    assertUnavailable(againstRawServer(20_000, send('H', 'T', 'T', 'P', '/', '1', '.', '1')),
        "does not speak TLS");
  }

  /** A fault in the middle of a download: garbage, or a plaintext fatal alert, among the records. */
  @ParameterizedTest
  @EnumSource(MidStream.class)
  void aFaultInTheMiddleOfAStream(MidStream fault) throws Exception {
    for (SslProvider engine : ENGINES) {
      SslContext serverContext =
          TestCertificates.serverContext(engine, TestCertificates.SERVER, ClientAuth.NONE);
      Server server = server(PinlessServerCredentials.tls(serverContext));
      try (FaultProxy proxy = new FaultProxy(server.getPort())) {
        ManagedChannel channel = channel(proxy.port(),
            PinlessChannelCredentials.tls(TestCertificates.clientContext(engine, null)));
        int received = 0;
        try {
          Iterator<byte[]> it = ClientCalls.blockingServerStreamingCall(channel,
              TestService.SERVER_STREAM, CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS),
              TestService.streamRequest(1_000_000, 1024));
          it.next();
          received++;
          proxy.injectToClients(fault.bytes);
          while (it.hasNext()) {
            it.next();
            received++;
          }
          throw new AssertionError("the stream ended well after " + received + " messages");
        } catch (StatusRuntimeException e) {
          assertUnavailable(e, "TLS");
        } finally {
          channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        assertTrue(received >= 1, engine + ": the messages before the fault arrived");
      } finally {
        server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * A fault on an idle connection after the handshake, with a call waiting for its next message:
   * the call fails with UNAVAILABLE on either engine, with nothing more arriving to wake it.
   */
  @ParameterizedTest
  @EnumSource(MidStream.class)
  void aFaultOnAnIdleConnectionFailsTheWaitingCall(MidStream fault) throws Exception {
    for (SslProvider engine : ENGINES) {
      // Fixed flow-control windows: no BDP pings, so nothing arrives after the fault.
      Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
              PinlessServerCredentials.tls(TestCertificates.serverContext(
                  engine, TestCertificates.SERVER, ClientAuth.NONE)))
          .flowControlWindow(1 << 20)
          .addService(TestService.definition())
          .build()
          .start();
      try (FaultProxy proxy = new FaultProxy(server.getPort())) {
        ManagedChannel channel = NettyChannelBuilder.forTarget("localhost:" + proxy.port(),
                PinlessChannelCredentials.tls(TestCertificates.clientContext(engine, null)))
            .flowControlWindow(1 << 20)
            .build();
        try {
          CompletableFuture<Status> closed = new CompletableFuture<>();
          CountDownLatch echoed = new CountDownLatch(1);
          ClientCall<byte[], byte[]> call = channel.newCall(TestService.BIDI,
              CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS)); // a hang guard
          call.start(new ClientCall.Listener<byte[]>() {
            @Override
            public void onMessage(byte[] message) {
              echoed.countDown();
            }

            @Override
            public void onClose(Status status, Metadata trailers) {
              closed.complete(status);
            }
          }, new Metadata());
          call.request(Integer.MAX_VALUE);
          call.sendMessage(message(100, 1));
          assertTrue(echoed.await(60, TimeUnit.SECONDS), "hang guard");
          // The server waits for the next message: the connection is idle.
          proxy.injectToClients(fault.bytes);
          Status status = closed.get(90, TimeUnit.SECONDS); // a hang guard past the deadline
          assertEquals(Status.Code.UNAVAILABLE, status.getCode(), engine + ": " + status);
          assertTrue(String.valueOf(status).contains("TLS"), engine + ": " + status);
        } finally {
          channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
      } finally {
        server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * A client that offers only ALPN {@code http/1.1} is refused by either engine's server: the
   * client's handshake fails, or the connection ends right after it with nothing sent.
   */
  @ParameterizedTest
  @EnumSource(value = SslProvider.class, names = {"JDK", "OPENSSL"})
  void aClientOfferingOnlyHttp11IsRefused(SslProvider engine) throws Exception {
    // A handshake deadline past the hang guard: only the refusal can close the connection.
    Server server = server(PinlessServerCredentials.tls(
        TestCertificates.serverContext(engine, TestCertificates.SERVER, ClientAuth.NONE),
        10, TimeUnit.MINUTES));
    try {
      javax.net.ssl.SSLContext tls = javax.net.ssl.SSLContext.getInstance("TLS");
      tls.init(null, new javax.net.ssl.TrustManager[] {
          io.netty.handler.ssl.util.InsecureTrustManagerFactory.INSTANCE.getTrustManagers()[0]},
          null);
      try (javax.net.ssl.SSLSocket s = (javax.net.ssl.SSLSocket) tls.getSocketFactory()
          .createSocket(InetAddress.getLoopbackAddress(), server.getPort())) {
        s.setSoTimeout(60_000); // a hang guard
        javax.net.ssl.SSLParameters params = s.getSSLParameters();
        params.setApplicationProtocols(new String[] {"http/1.1"});
        s.setSSLParameters(params);
        int read;
        try {
          s.startHandshake();
          read = s.getInputStream().read();
        } catch (javax.net.ssl.SSLException | java.net.SocketException e) {
          read = -1; // refused in the handshake, or reset right after it
        }
        assertEquals(-1, read, "the server closed the connection");
      }
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  enum MidStream {
    /** An application-data record whose tag cannot verify. */
    FORGED_RECORD(forged()),
    /** A fatal alert (internal_error) in plaintext. */
    ALERT(new byte[] {0x15, 3, 3, 0, 2, 2, 80}),
    /** Bytes that are no record at all. */
    GARBAGE("not a TLS record".getBytes(StandardCharsets.US_ASCII));

    final byte[] bytes;

    MidStream(byte[] bytes) {
      this.bytes = bytes;
    }

    private static byte[] forged() {
      byte[] record = new byte[5 + 40];
      record[0] = 0x17;
      record[1] = 3;
      record[2] = 3;
      record[4] = 40;
      return record;
    }
  }
}
