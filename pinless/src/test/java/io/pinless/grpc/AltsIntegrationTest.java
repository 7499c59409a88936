package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.CallCredentials;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.SecurityLevel;
import io.grpc.ServerCredentials;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.alts.AltsContextUtil;
import io.grpc.alts.AltsServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.pinless.alts.handshake.HandshakerProtocol;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.HandshakerResult;
import io.pinless.alts.handshake.proto.HandshakerStatus;
import io.pinless.http2.Http2FrameSlicer;
import io.pinless.testing.Handshakers;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * pinless's ALTS credentials over loopback with local handshakers that share a deployment key:
 * pinless to pinless, a stock grpc-alts client to a pinless server, a pinless client to a stock
 * server, and the failures; and handshakers without a key, which authenticate nothing.
 */
class AltsIntegrationTest {
  private Server clientHandshaker;
  private Server serverHandshaker;
  private final ConcurrentLinkedQueue<String> peersSeen = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedQueue<PinlessAltsContext> contextsSeen =
      new ConcurrentLinkedQueue<>();

  /** The deployment key both handshakers of most tests hold. */
  private static final byte[] KEY = "pinless test deployment key 0001".getBytes(
      java.nio.charset.StandardCharsets.US_ASCII);

  @BeforeEach
  void startHandshakers() throws Exception {
    clientHandshaker = LocalHandshakerMain.start(0, "client-sa", KEY);
    serverHandshaker = LocalHandshakerMain.start(0, "server-sa", KEY);
  }

  @AfterEach
  void stopHandshakers() throws Exception {
    Handshakers.stop(clientHandshaker, serverHandshaker);
  }

  private static String address(Server s) {
    return Handshakers.address(s);
  }

  /** Records the peer each call's connection authenticated, by pinless's or grpc-alts's API. */
  private final ServerInterceptor recordPeer =
      new ServerInterceptor() {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(
            ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
          PinlessAltsContext pinless = PinlessAltsContext.from(call);
          if (pinless != null) {
            contextsSeen.add(pinless);
            peersSeen.add("pinless:" + pinless.peerServiceAccount() + ":" + pinless.recordProtocol());
          } else if (AltsContextUtil.check(call)) {
            peersSeen.add("stock:" + AltsContextUtil.createFrom(call).getPeerServiceAccount());
          }
          return next.startCall(call, headers);
        }
      };

  private Server server(ServerCredentials creds) throws Exception {
    return Grpc.newServerBuilderForPort(0, creds)
        .addService(ServerInterceptors.intercept(TestService.definition(), recordPeer))
        .maxInboundMessageSize(Loopback.MAX_MESSAGE)
        .build()
        .start();
  }

  private ServerCredentials pinlessServerCreds() {
    return PinlessServerCredentials.altsBuilder().handshakerAddress(address(serverHandshaker)).build();
  }

  private ChannelCredentials pinlessChannelCreds(String... accepted) {
    PinlessChannelCredentials.AltsBuilder b =
        PinlessChannelCredentials.altsBuilder().handshakerAddress(address(clientHandshaker));
    for (String account : accepted) {
      b.addTargetServiceAccount(account);
    }
    return b.build();
  }

  private static ManagedChannel channel(Server server, ChannelCredentials creds) {
    return Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(), creds)
        .maxInboundMessageSize(Loopback.MAX_MESSAGE)
        .build();
  }

  private static void close(ManagedChannel channel, Server server) throws InterruptedException {
    channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
  }

  private static void unaryAtSizes(ManagedChannel channel, int... sizes) {
    for (int size : sizes) {
      byte[] req = message(size, size);
      assertArrayEquals(req,
          ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, req),
          "size " + size);
    }
  }

  @Test
  void pinlessToPinless() throws Exception {
    Server server = server(pinlessServerCreds());
    ManagedChannel channel = channel(server, pinlessChannelCreds("server-sa"));
    try {
      unaryAtSizes(channel, 0, 1, 16383, 16384, 16385, 1 << 20, 16 << 20);
      long slicedBefore = io.pinless.PinlessMetrics.Metric.DATA_BYTES_SLICED.value();
      long copiedBefore = io.pinless.PinlessMetrics.Metric.DATA_BYTES_COPIED.value();
      long recordCopiesBefore = io.pinless.PinlessMetrics.Metric.RECORD_BYTES_COPIED.value();
      Iterator<byte[]> it =
          ClientCalls.blockingServerStreamingCall(
              channel, TestService.SERVER_STREAM, CallOptions.DEFAULT,
              TestService.streamRequest(20, 1 << 20));
      int n = 0;
      while (it.hasNext()) {
        assertArrayEquals(message(1 << 20, n), it.next());
        n++;
      }
      assertEquals(20, n);
      long sliced = io.pinless.PinlessMetrics.Metric.DATA_BYTES_SLICED.value() - slicedBefore;
      long copied = io.pinless.PinlessMetrics.Metric.DATA_BYTES_COPIED.value() - copiedBefore;
      // Records of 48 KiB decode into buffers that 16 KiB DATA frames may be sliced from.
      assertTrue(sliced + copied >= 20L << 20, "every DATA byte went through the slicer");
      assertTrue(copied * 10 < sliced + copied,
          "copied " + copied + " of " + (sliced + copied) + " DATA bytes");
      long recordCopies =
          io.pinless.PinlessMetrics.Metric.RECORD_BYTES_COPIED.value() - recordCopiesBefore;
      // Reads sized to whole records: few cut one (fixed reads smaller than a record would copy
      // most of the bytes out of the reads that cut them).
      assertTrue(recordCopies * 10 < sliced + copied,
          "copied " + recordCopies + " record bytes out of cut reads for " + (sliced + copied)
              + " DATA bytes");
    } finally {
      close(channel, server);
    }
    assertEquals("pinless:client-sa:ALTSRP_GCM_AES128_REKEY", peersSeen.peek());
  }

  @Test
  void connectionsWithTheSamePeerShareOneContext() throws Exception {
    Server server = server(pinlessServerCreds());
    ManagedChannel first = channel(server, pinlessChannelCreds("server-sa"));
    ManagedChannel second = channel(server, pinlessChannelCreds("server-sa"));
    try {
      unaryAtSizes(first, 1);
      unaryAtSizes(second, 1);
    } finally {
      first.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      close(second, server);
    }
    assertEquals(2, contextsSeen.size());
    PinlessAltsContext a = contextsSeen.poll();
    assertEquals("client-sa", a.peerServiceAccount());
    assertEquals("server-sa", a.localServiceAccount());
    // Each connection keeps a reference to one context per identity, not a copy of its own.
    org.junit.jupiter.api.Assertions.assertSame(a, contextsSeen.poll());
  }

  @Test
  void stockClientToPinlessServer() throws Exception {
    Server server = server(pinlessServerCreds());
    ManagedChannel channel =
        channel(server,
            AltsChannelCredentials.newBuilder()
                .enableUntrustedAltsForTesting()
                .setHandshakerAddressForTesting(address(clientHandshaker))
                .addTargetServiceAccount("server-sa")
                .build());
    try {
      unaryAtSizes(channel, 0, 1, 16384, 1 << 20, 16 << 20);
    } finally {
      close(channel, server);
    }
    assertEquals("pinless:client-sa:ALTSRP_GCM_AES128_REKEY", peersSeen.peek());
  }

  @Test
  void pinlessClientToStockServer() throws Exception {
    Server server =
        server(AltsServerCredentials.newBuilder()
            .enableUntrustedAltsForTesting()
            .setHandshakerAddressForTesting(address(serverHandshaker))
            .build());
    ManagedChannel channel = channel(server, pinlessChannelCreds("server-sa"));
    try {
      unaryAtSizes(channel, 0, 1, 16384, 1 << 20, 16 << 20);
    } finally {
      close(channel, server);
    }
    assertEquals("stock:client-sa", peersSeen.peek());
  }

  @Test
  void aServerTheClientDoesNotAcceptIsUnavailableWithTheReason() throws Exception {
    Server server = server(pinlessServerCreds());
    ManagedChannel channel = channel(server, pinlessChannelCreds("someone-else"));
    try {
      StatusRuntimeException e = callFails(channel);
      assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
      assertTrue(e.getStatus().getDescription().contains("not one of the accepted"),
          e.getStatus().toString());
    } finally {
      close(channel, server);
    }
    assertTrue(peersSeen.isEmpty());
  }

  @Test
  void anUnreachableHandshakerIsUnavailableWithTheReason() throws Exception {
    int closedPort;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      closedPort = s.getLocalPort();
    }
    Server server = server(pinlessServerCreds());
    ManagedChannel channel =
        channel(server,
            PinlessChannelCredentials.altsBuilder().handshakerAddress("127.0.0.1:" + closedPort).build());
    try {
      StatusRuntimeException e = callFails(channel);
      assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
      assertTrue(e.getStatus().getDescription().contains("handshaker service at"),
          e.getStatus().toString());
    } finally {
      close(channel, server);
    }
  }

  private static StatusRuntimeException callFails(ManagedChannel channel) {
    try {
      ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS),
          message(10, 1));
    } catch (StatusRuntimeException e) {
      return e;
    }
    throw new AssertionError("the call must fail");
  }

  /** Sends an OAuth-like token, but only over a connection with privacy and integrity. */
  private static final CallCredentials DEMANDS_PRIVACY =
      new CallCredentials() {
        @Override
        public void applyRequestMetadata(
            RequestInfo info, Executor appExecutor, MetadataApplier applier) {
          if (info.getSecurityLevel() != SecurityLevel.PRIVACY_AND_INTEGRITY) {
            applier.fail(Status.UNAUTHENTICATED.withDescription(
                "refusing to send a token over " + info.getSecurityLevel()));
            return;
          }
          Metadata headers = new Metadata();
          headers.put(AUTHORIZATION, "Bearer secret");
          applier.apply(headers);
        }
      };
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  @Test
  void callCredentialsThatDemandPrivacyAreSentOverAltsAndNotOverPlaintext() throws Exception {
    ConcurrentLinkedQueue<String> tokens = new ConcurrentLinkedQueue<>();
    ServerInterceptor recordToken =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            tokens.add(String.valueOf(headers.get(AUTHORIZATION)));
            return next.startCall(call, headers);
          }
        };
    Server server =
        Grpc.newServerBuilderForPort(0, pinlessServerCreds())
            .addService(ServerInterceptors.intercept(TestService.definition(), recordToken))
            .build()
            .start();
    ManagedChannel channel = channel(server, pinlessChannelCreds());
    try {
      assertArrayEquals(message(7, 7),
          ClientCalls.blockingUnaryCall(channel, TestService.UNARY,
              CallOptions.DEFAULT.withCallCredentials(DEMANDS_PRIVACY), message(7, 7)));
      assertEquals(List.of("Bearer secret"), List.copyOf(tokens));
    } finally {
      close(channel, server);
    }
    try (Loopback plain =
        new Loopback(Loopback.Transport.NIO, PinlessServerCredentials.insecure(),
            PinlessChannelCredentials.insecure())) {
      StatusRuntimeException e = null;
      try {
        ClientCalls.blockingUnaryCall(plain.channel, TestService.UNARY,
            CallOptions.DEFAULT.withCallCredentials(DEMANDS_PRIVACY), message(7, 7));
      } catch (StatusRuntimeException thrown) {
        e = thrown;
      }
      assertNotNull(e, "the plaintext control must refuse");
      assertEquals(Status.Code.UNAUTHENTICATED, e.getStatus().getCode());
    }
  }

  @Test
  void aPingPongOfSeventyThousandMessagesCrossesTheKeyChangeBothWays() throws Exception {
    Server server =
        server(AltsServerCredentials.newBuilder()
            .enableUntrustedAltsForTesting()
            .setHandshakerAddressForTesting(address(serverHandshaker))
            .build());
    ManagedChannel channel = channel(server, pinlessChannelCreds());
    try {
      BlockingQueue<Object> echoes = new LinkedBlockingQueue<>();
      StreamObserver<byte[]> requests =
          ClientCalls.asyncBidiStreamingCall(
              channel.newCall(TestService.BIDI, CallOptions.DEFAULT),
              new StreamObserver<>() {
                @Override
                public void onNext(byte[] value) {
                  echoes.add(value);
                }

                @Override
                public void onError(Throwable t) {
                  echoes.add(t);
                }

                @Override
                public void onCompleted() {}
              });
      // One message each way per round trip, each flushed alone: at least one record each.
      int rounds = 70_000;
      for (int i = 0; i < rounds; i++) {
        byte[] ping = java.nio.ByteBuffer.allocate(4).putInt(i).array();
        requests.onNext(ping);
        Object pong = echoes.poll(30, TimeUnit.SECONDS);
        assertTrue(pong instanceof byte[], "round " + i + ": " + pong);
        assertArrayEquals(ping, (byte[]) pong, "round " + i);
      }
      requests.onCompleted();
    } finally {
      close(channel, server);
    }
  }

  @Test
  void aPeerThatStallsMidHandshakeIsCutOffAtTheDeadline() throws Exception {
    Server server =
        server(PinlessServerCredentials.altsBuilder()
            .handshakerAddress(address(serverHandshaker))
            .handshakeTimeout(300, TimeUnit.MILLISECONDS)
            .build());
    try (Socket peer = new Socket(InetAddress.getLoopbackAddress(), server.getPort())) {
      peer.setSoTimeout(20_000);
      peer.getOutputStream().write(new byte[] {0, 0, 1}); // a hello that never finishes
      peer.getOutputStream().flush();
      assertEquals(-1, peer.getInputStream().read(), "the server closes the connection");
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  /** A handshaker that answers every request with {@code answer}. */
  private static Server fakeHandshaker(HandshakerResp answer) throws Exception {
    ServerServiceDefinition service =
        ServerServiceDefinition.builder(HandshakerProtocol.SERVICE_NAME)
            .addMethod(HandshakerProtocol.DO_HANDSHAKE,
                ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<HandshakerReq>() {
                  @Override
                  public void onNext(HandshakerReq value) {
                    out.onNext(answer);
                  }

                  @Override
                  public void onError(Throwable t) {}

                  @Override
                  public void onCompleted() {
                    out.onCompleted();
                  }
                }))
            .build();
    return NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
            InsecureServerCredentials.create())
        .addService(service)
        .build()
        .start();
  }

  private static HandshakerResult.Builder goodResult() {
    return HandshakerResult.newBuilder()
        .setApplicationProtocol("grpc")
        .setRecordProtocol(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
        .setKeyData(ByteString.copyFrom(new byte[44]))
        .setMaxFrameSize(16384);
  }

  @Test
  void endsGivenEachOthersFrameSizesBothUseTheSmaller() throws Exception {
    // A handshaker may give each end the frame size the peer asked for: here the client learns
    // 1 MiB and the server 128 KiB. Records the client sealed past 128 KiB would fail the server.
    Server clientFake = fakeHandshaker(HandshakerResp.newBuilder()
        .setResult(goodResult().setMaxFrameSize(1 << 20)).build());
    Server serverFake = fakeHandshaker(HandshakerResp.newBuilder()
        .setResult(goodResult().setMaxFrameSize(128 * 1024)).build());
    Server server = server(
        PinlessServerCredentials.altsBuilder().handshakerAddress(address(serverFake)).build());
    ManagedChannel channel = channel(server,
        PinlessChannelCredentials.altsBuilder().handshakerAddress(address(clientFake)).build());
    try {
      unaryAtSizes(channel, 1 << 20);
      PinlessAltsContext context = contextsSeen.peek();
      assertNotNull(context);
      assertEquals(128 * 1024, context.maxFrameSize(), "the server's: the smaller it was given");
    } finally {
      close(channel, server);
      serverFake.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      clientFake.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void keyDataLongerThanTheProtocolUsesKeysItWithItsFirstBytes() throws Exception {
    // As grpc-go: a handshaker may give 44 bytes (a rekeying key's size) for the 16-byte key of
    // ALTSRP_GCM_AES128. Both ends take the first 16 and talk.
    HandshakerResp.Builder aes128 = HandshakerResp.newBuilder().setResult(goodResult()
        .setRecordProtocol("ALTSRP_GCM_AES128").setKeyData(ByteString.copyFrom(new byte[44])));
    Server clientFake = fakeHandshaker(aes128.build());
    Server serverFake = fakeHandshaker(aes128.build());
    Server server = server(
        PinlessServerCredentials.altsBuilder().handshakerAddress(address(serverFake)).build());
    ManagedChannel channel = channel(server,
        PinlessChannelCredentials.altsBuilder().handshakerAddress(address(clientFake)).build());
    try {
      byte[] req = message(100_000, 1);
      // The deadline is a hang guard: the handshake used to end with no error and no close.
      assertArrayEquals(req, ClientCalls.blockingUnaryCall(channel, TestService.UNARY,
          CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS), req));
      PinlessAltsContext context = contextsSeen.peek();
      assertNotNull(context);
      assertEquals("ALTSRP_GCM_AES128", context.recordProtocol());
    } finally {
      close(channel, server);
      serverFake.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      clientFake.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void aHandshakerThatAnswersNonsenseIsUnavailableWithTheReason() throws Exception {
    Object[][] cases = {
      {HandshakerResp.newBuilder().setResult(goodResult().setRecordProtocol("ALTSRP_BOGUS")),
          "record protocol 'ALTSRP_BOGUS'"},
      {HandshakerResp.newBuilder().setResult(goodResult().setMaxFrameSize(100)),
          "frame size of 100 bytes"},
      {HandshakerResp.newBuilder().setResult(goodResult().setKeyData(ByteString.copyFrom(new byte[10]))),
          "10 bytes of key data"},
      {HandshakerResp.newBuilder().setBytesConsumed(5), "consumed 5 of 0 bytes"},
      {HandshakerResp.newBuilder().setBytesConsumed(-1), "consumed 4294967295 of 0 bytes"},
      {HandshakerResp.newBuilder().setStatus(HandshakerStatus.newBuilder().setCode(7).setDetails("no")),
          "the handshaker refused: no"},
    };
    Server server = server(pinlessServerCreds());
    try {
      for (Object[] c : cases) {
        Server fake = fakeHandshaker(((HandshakerResp.Builder) c[0]).build());
        ManagedChannel channel =
            channel(server, PinlessChannelCredentials.altsBuilder().handshakerAddress(address(fake)).build());
        try {
          StatusRuntimeException e = callFails(channel);
          assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
          assertTrue(e.getStatus().getDescription().contains((String) c[1]), e.getStatus().toString());
        } finally {
          channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
          fake.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
      }
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void aStormOfHandshakesInAProcessThatIsBothEndsAllConnect() throws Exception {
    // grpc-alts holds one of 32 permits per handshake for its whole length, so a process that is
    // both client and server stalls once more than 32 overlap; pinless bounds only requests.
    Server server = server(pinlessServerCreds());
    List<ManagedChannel> channels = new java.util.ArrayList<>();
    try {
      List<java.util.concurrent.CompletableFuture<byte[]>> calls = new java.util.ArrayList<>();
      for (int i = 0; i < 256; i++) {
        ManagedChannel channel = channel(server, pinlessChannelCreds("server-sa"));
        channels.add(channel);
        java.util.concurrent.CompletableFuture<byte[]> done = new java.util.concurrent.CompletableFuture<>();
        ClientCalls.asyncUnaryCall(
            channel.newCall(TestService.UNARY, CallOptions.DEFAULT), message(100, i),
            new StreamObserver<>() {
              @Override
              public void onNext(byte[] value) {
                done.complete(value);
              }

              @Override
              public void onError(Throwable t) {
                done.completeExceptionally(t);
              }

              @Override
              public void onCompleted() {}
            });
        calls.add(done);
      }
      for (int i = 0; i < calls.size(); i++) {
        assertArrayEquals(message(100, i), calls.get(i).get(60, TimeUnit.SECONDS), "call " + i);
      }
      assertEquals(256, peersSeen.size(), "every connection authenticated its peer");
    } finally {
      for (ManagedChannel channel : channels) {
        channel.shutdownNow();
      }
      for (ManagedChannel channel : channels) {
        channel.awaitTermination(10, TimeUnit.SECONDS);
      }
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void handshakersWithoutADeploymentKeySayNothingIsAuthenticated() throws Exception {
    ConcurrentLinkedQueue<SecurityLevel> levels = new ConcurrentLinkedQueue<>();
    ServerInterceptor recordLevel =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            levels.add(call.getSecurityLevel());
            contextsSeen.add(PinlessAltsContext.from(call));
            return next.startCall(call, headers);
          }
        };
    Server clientSide = Handshakers.start("client-sa");
    Server serverSide = Handshakers.start("server-sa");
    Server server =
        Grpc.newServerBuilderForPort(0, PinlessServerCredentials.altsBuilder()
                .handshakerAddress(address(serverSide)).build())
            .addService(ServerInterceptors.intercept(TestService.definition(), recordLevel))
            .build()
            .start();
    ManagedChannel channel = channel(server,
        PinlessChannelCredentials.altsBuilder().handshakerAddress(address(clientSide)).build());
    try {
      unaryAtSizes(channel, 1);
    } finally {
      close(channel, server);
      Handshakers.stop(clientSide, serverSide);
    }
    assertEquals(List.of(SecurityLevel.NONE), List.copyOf(levels));
    PinlessAltsContext context = contextsSeen.peek();
    assertEquals(SecurityLevel.NONE, context.securityLevel());
    assertTrue(context.toString().contains("unauthenticated"), context.toString());
  }

  @Test
  void handshakersWithOneDeploymentKeyAuthenticateThePeer() throws Exception {
    ConcurrentLinkedQueue<SecurityLevel> levels = new ConcurrentLinkedQueue<>();
    ServerInterceptor recordLevel =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            levels.add(call.getSecurityLevel());
            contextsSeen.add(PinlessAltsContext.from(call));
            return next.startCall(call, headers);
          }
        };
    Server server =
        Grpc.newServerBuilderForPort(0, pinlessServerCreds())
            .addService(ServerInterceptors.intercept(TestService.definition(), recordLevel))
            .build()
            .start();
    ManagedChannel channel = channel(server, pinlessChannelCreds("server-sa"));
    try {
      unaryAtSizes(channel, 1);
    } finally {
      close(channel, server);
    }
    assertEquals(List.of(SecurityLevel.PRIVACY_AND_INTEGRITY), List.copyOf(levels));
    PinlessAltsContext context = contextsSeen.peek();
    assertTrue(context.authenticated());
    assertEquals(SecurityLevel.PRIVACY_AND_INTEGRITY, context.securityLevel());
    assertFalse(context.toString().contains("unauthenticated"), context.toString());
  }

  @Test
  void anotherDeploymentKeyOrNoneFailsTheHandshakeWithTheReason() throws Exception {
    Object[][] cases = {
      {"other deployment key 0123456789ab".getBytes(java.nio.charset.StandardCharsets.US_ASCII),
          "server's handshake MAC does not verify"},
      {null, "this handshaker has a deployment key and the server's has none"},
    };
    for (Object[] c : cases) {
      Server serverSide = LocalHandshakerMain.start(0, "server-sa", (byte[]) c[0]);
      Server server = server(
          PinlessServerCredentials.altsBuilder().handshakerAddress(address(serverSide)).build());
      ManagedChannel channel = channel(server, pinlessChannelCreds());
      try {
        StatusRuntimeException e = callFails(channel);
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(e.getStatus().getDescription().contains((String) c[1]),
            e.getStatus().toString());
      } finally {
        close(channel, server);
        Handshakers.stop(serverSide);
      }
    }
    assertTrue(peersSeen.isEmpty(), "no call reached the server");
  }

  /**
   * A TCP proxy on loopback that replaces the X25519 public key in the first handshake message
   * each way with random bytes, and relays everything else as it is.
   */
  private static final class KeyShareRewriter implements AutoCloseable {
    private final ServerSocket listener;
    private final List<Socket> sockets = new java.util.concurrent.CopyOnWriteArrayList<>();

    KeyShareRewriter(int targetPort) throws java.io.IOException {
      listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
      Thread acceptor = new Thread(() -> {
        try {
          while (true) {
            Socket client = listener.accept();
            Socket server = new Socket(InetAddress.getLoopbackAddress(), targetPort);
            sockets.add(client);
            sockets.add(server);
            pump(client, server);
            pump(server, client);
          }
        } catch (java.io.IOException e) {
          // Closed.
        }
      }, "key-share-rewriter");
      acceptor.setDaemon(true);
      acceptor.start();
    }

    int port() {
      return listener.getLocalPort();
    }

    private static void pump(Socket from, Socket to) {
      Thread t = new Thread(() -> {
        try {
          java.io.DataInputStream in = new java.io.DataInputStream(from.getInputStream());
          java.io.DataOutputStream out = new java.io.DataOutputStream(to.getOutputStream());
          byte[] message = new byte[in.readInt()];
          in.readFully(message);
          byte[] share = new byte[32];
          new java.util.Random(message.length).nextBytes(share);
          byte[] rewritten = io.pinless.alts.handshake.proto.LocalHello.parseFrom(message)
              .toBuilder().setPublicKey(ByteString.copyFrom(share)).build().toByteArray();
          out.writeInt(rewritten.length);
          out.write(rewritten);
          out.flush();
          in.transferTo(out);
        } catch (java.io.IOException e) {
          // Either end closed.
        } finally {
          try {
            from.close();
            to.close();
          } catch (java.io.IOException e) {
            // Closing.
          }
        }
      }, "key-share-rewriter-pump");
      t.setDaemon(true);
      t.start();
    }

    @Override
    public void close() throws java.io.IOException {
      listener.close();
      for (Socket s : sockets) {
        s.close();
      }
    }
  }

  @Test
  void aManInTheMiddleThatRewritesTheKeySharesFailsTheHandshake() throws Exception {
    Server server = server(pinlessServerCreds());
    try (KeyShareRewriter proxy = new KeyShareRewriter(server.getPort())) {
      ManagedChannel channel = Grpc.newChannelBuilder("127.0.0.1:" + proxy.port(),
              pinlessChannelCreds("server-sa"))
          .build();
      try {
        StatusRuntimeException e = callFails(channel);
        assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(
            e.getStatus().getDescription().contains("server's handshake MAC does not verify"),
            e.getStatus().toString());
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    } finally {
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertTrue(peersSeen.isEmpty(), "no call reached the server");
  }

  @Test
  void theContextIsNullOffAlts() {
    assertEquals(null, PinlessAltsContext.from(io.grpc.Attributes.EMPTY));
    assertNotNull(PinlessChannelCredentials.altsBuilder().build());
  }
}
