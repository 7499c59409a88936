package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.pinless.alts.handshake.proto.HandshakeProtocol;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.Identity;
import io.pinless.alts.handshake.proto.LocalFinished;
import io.pinless.alts.handshake.proto.LocalHello;
import io.pinless.alts.handshake.proto.NextHandshakeMessageReq;
import io.pinless.alts.handshake.proto.RpcProtocolVersions;
import io.pinless.alts.handshake.proto.ServerHandshakeParameters;
import io.pinless.alts.handshake.proto.StartClientHandshakeReq;
import io.pinless.alts.handshake.proto.StartServerHandshakeReq;
import io.pinless.testing.Handshakers;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The local handshaker service over real gRPC: two services (one per end, as two processes would
 * have) run handshakes whose bytes the test relays, and every refusal is checked.
 */
class LocalHandshakerServiceTest {
  private static final String REKEY = HandshakerProtocol.RECORD_PROTOCOL_REKEY;
  private static final RpcProtocolVersions V21 =
      RpcProtocolVersions.newBuilder()
          .setMaxRpcVersion(RpcProtocolVersions.Version.newBuilder().setMajor(2).setMinor(1))
          .setMinRpcVersion(RpcProtocolVersions.Version.newBuilder().setMajor(2).setMinor(1))
          .build();

  private static Server clientSide;
  private static Server serverSide;
  private static ManagedChannel toClientSide;
  private static ManagedChannel toServerSide;

  @BeforeAll
  static void start() throws Exception {
    clientSide = Handshakers.start("client-sa");
    serverSide = Handshakers.start("server-sa");
    toClientSide = channel(clientSide);
    toServerSide = channel(serverSide);
  }

  @AfterAll
  static void stop() throws Exception {
    for (ManagedChannel c : new ManagedChannel[] {toClientSide, toServerSide}) {
      c.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    Handshakers.stop(clientSide, serverSide);
  }

  private static ManagedChannel channel(Server server) {
    return NettyChannelBuilder.forAddress(
            server.getListenSockets().get(0), InsecureChannelCredentials.create())
        .build();
  }

  /** One DoHandshake stream: send a request, take its response. */
  private static final class Stream {
    final BlockingQueue<Object> responses = new LinkedBlockingQueue<>();
    final StreamObserver<HandshakerReq> requests;

    Stream(ManagedChannel channel) {
      requests =
          ClientCalls.asyncBidiStreamingCall(
              channel.newCall(HandshakerProtocol.DO_HANDSHAKE, CallOptions.DEFAULT),
              new StreamObserver<>() {
                @Override
                public void onNext(HandshakerResp value) {
                  responses.add(value);
                }

                @Override
                public void onError(Throwable t) {
                  responses.add(t);
                }

                @Override
                public void onCompleted() {}
              });
    }

    HandshakerResp send(HandshakerReq req) throws InterruptedException {
      requests.onNext(req);
      Object got = responses.poll(60, TimeUnit.SECONDS);
      assertTrue(got instanceof HandshakerResp, "a response to every request, got " + got);
      return (HandshakerResp) got;
    }

    void close() {
      requests.onCompleted();
    }
  }

  private static HandshakerReq clientStart(int maxFrameSize, String... targets) {
    StartClientHandshakeReq.Builder start =
        StartClientHandshakeReq.newBuilder()
            .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
            .addApplicationProtocols("grpc")
            .addRecordProtocols(REKEY)
            .setRpcVersions(V21)
            .setMaxFrameSize(maxFrameSize);
    for (String target : targets) {
      start.addTargetIdentities(Identity.newBuilder().setServiceAccount(target));
    }
    return HandshakerReq.newBuilder().setClientStart(start).build();
  }

  private static HandshakerReq serverStart(ByteString inBytes, int maxFrameSize, String record) {
    return HandshakerReq.newBuilder()
        .setServerStart(
            StartServerHandshakeReq.newBuilder()
                .addApplicationProtocols("grpc")
                .putHandshakeParameters(
                    HandshakerProtocol.ALTS_PARAMETERS_KEY,
                    ServerHandshakeParameters.newBuilder().addRecordProtocols(record).build())
                .setInBytes(inBytes)
                .setRpcVersions(V21)
                .setMaxFrameSize(maxFrameSize))
        .build();
  }

  private static HandshakerReq next(ByteString inBytes) {
    return HandshakerReq.newBuilder()
        .setNext(NextHandshakeMessageReq.newBuilder().setInBytes(inBytes))
        .build();
  }

  @Test
  void bothEndsAgreeOnAKeyAndSeeEachOthersIdentity() throws Exception {
    Stream client = new Stream(toClientSide);
    Stream server = new Stream(toServerSide);
    HandshakerResp c1 = client.send(clientStart(131072));
    assertEquals(0, c1.getStatus().getCode());
    assertFalse(c1.hasResult());
    assertFalse(c1.getOutFrames().isEmpty(), "the client's hello, for the server");

    HandshakerResp s1 = server.send(serverStart(c1.getOutFrames(), 16384, REKEY));
    assertEquals(0, s1.getStatus().getCode(), s1.getStatus().getDetails());
    assertEquals(c1.getOutFrames().size(), s1.getBytesConsumed());
    assertFalse(s1.hasResult(), "the server waits for the client's MAC");
    assertFalse(s1.getOutFrames().isEmpty(), "the server's hello and MAC, for the client");

    HandshakerResp c2 = client.send(next(s1.getOutFrames()));
    assertEquals(0, c2.getStatus().getCode(), c2.getStatus().getDetails());
    assertEquals(s1.getOutFrames().size(), c2.getBytesConsumed());
    assertTrue(c2.hasResult());
    assertFalse(c2.getOutFrames().isEmpty(), "the client's MAC, for the server");

    HandshakerResp s2 = server.send(next(c2.getOutFrames()));
    assertEquals(0, s2.getStatus().getCode(), s2.getStatus().getDetails());
    assertEquals(c2.getOutFrames().size(), s2.getBytesConsumed());
    assertTrue(s2.hasResult());
    assertTrue(s2.getOutFrames().isEmpty());

    assertEquals(LocalKeyAgreement.KEY_DATA_BYTES, s2.getResult().getKeyData().size());
    assertEquals(s2.getResult().getKeyData(), c2.getResult().getKeyData(), "one shared key");
    assertEquals(REKEY, c2.getResult().getRecordProtocol());
    assertEquals("grpc", c2.getResult().getApplicationProtocol());
    assertEquals("client-sa", s2.getResult().getPeerIdentity().getServiceAccount());
    assertEquals("server-sa", c2.getResult().getPeerIdentity().getServiceAccount());
    assertEquals(16384, s2.getResult().getMaxFrameSize(), "the smaller of 128 KiB and 16 KiB");
    assertEquals(16384, c2.getResult().getMaxFrameSize());
    assertEquals(V21, c2.getResult().getPeerRpcVersions());
    for (HandshakerResp r : List.of(c2, s2)) {
      assertEquals(HandshakerProtocol.UNAUTHENTICATED, authentication(r), "no deployment key");
    }
    client.close();
    server.close();
  }

  private static String authentication(HandshakerResp resp) {
    return resp.getResult().getPeerIdentity().getAttributesMap()
        .get(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE);
  }

  /** The two results of a handshake relayed between {@code client} and {@code server} as is. */
  private static HandshakerResp[] handshake(Stream client, Stream server) throws Exception {
    HandshakerResp s1 =
        server.send(serverStart(client.send(clientStart(0)).getOutFrames(), 0, REKEY));
    assertEquals(0, s1.getStatus().getCode(), s1.getStatus().getDetails());
    HandshakerResp c2 = client.send(next(s1.getOutFrames()));
    assertEquals(0, c2.getStatus().getCode(), c2.getStatus().getDetails());
    HandshakerResp s2 = server.send(next(c2.getOutFrames()));
    assertEquals(0, s2.getStatus().getCode(), s2.getStatus().getDetails());
    assertTrue(c2.hasResult() && s2.hasResult());
    client.close();
    server.close();
    return new HandshakerResp[] {c2, s2};
  }

  @Test
  void everyHandshakeHasItsOwnKey() throws Exception {
    ByteString first =
        handshake(new Stream(toClientSide), new Stream(toServerSide))[0].getResult().getKeyData();
    ByteString second =
        handshake(new Stream(toClientSide), new Stream(toServerSide))[0].getResult().getKeyData();
    assertFalse(first.equals(second),
        "ephemeral keys: " + HexFormat.of().formatHex(first.toByteArray()));
  }

  @Test
  void messagesSplitAcrossRequestsWithRecordsBehindThem() throws Exception {
    Stream client = new Stream(toClientSide);
    Stream server = new Stream(toServerSide);
    ByteString hello = client.send(clientStart(131072)).getOutFrames();
    HandshakerResp s1 = server.send(serverStart(hello.substring(0, 3), 131072, REKEY));
    assertEquals(0, s1.getStatus().getCode());
    assertEquals(3, s1.getBytesConsumed(), "took the three bytes, waits for more");
    assertFalse(s1.hasResult());
    HandshakerResp s2 = server.send(next(hello.substring(3)));
    assertEquals(hello.size() - 3, s2.getBytesConsumed());
    ByteString fromServer = s2.getOutFrames();
    // The server's hello and MAC a byte at a time: the client answers only once both are in.
    HandshakerResp c2 = null;
    for (int i = 0; i < fromServer.size(); i++) {
      c2 = client.send(next(fromServer.substring(i, i + 1)));
      assertEquals(0, c2.getStatus().getCode(), c2.getStatus().getDetails());
      assertEquals(1, c2.getBytesConsumed());
      assertEquals(i == fromServer.size() - 1, c2.hasResult(), "at byte " + i);
    }
    ByteString records = ByteString.copyFrom(new byte[] {1, 2, 3, 4, 5});
    HandshakerResp s3 = server.send(next(c2.getOutFrames().concat(records)));
    assertTrue(s3.hasResult(), s3.getStatus().getDetails());
    assertEquals(c2.getOutFrames().size(), s3.getBytesConsumed(),
        "the records behind the client's MAC are not consumed");
    assertEquals(s3.getResult().getKeyData(), c2.getResult().getKeyData());
    client.close();
    server.close();
  }

  @Test
  void noCommonRecordProtocolIsRefusedOnBothEnds() throws Exception {
    Stream client = new Stream(toClientSide);
    Stream server = new Stream(toServerSide);
    HandshakerResp s1 =
        server.send(serverStart(client.send(clientStart(0)).getOutFrames(), 0, "ALTSRP_GCM_AES128"));
    assertEquals(Status.Code.FAILED_PRECONDITION.value(), s1.getStatus().getCode());
    assertTrue(s1.getStatus().getDetails().contains("no common record protocol"), s1.getStatus().getDetails());
    assertFalse(s1.hasResult());
    HandshakerResp c2 = client.send(next(s1.getOutFrames()));
    assertEquals(Status.Code.FAILED_PRECONDITION.value(), c2.getStatus().getCode());
    assertTrue(c2.getStatus().getDetails().startsWith("the server refused"), c2.getStatus().getDetails());
    client.close();
    server.close();
  }

  @Test
  void aServerTheClientDoesNotAcceptIsRefused() throws Exception {
    Stream client = new Stream(toClientSide);
    Stream server = new Stream(toServerSide);
    HandshakerResp s1 = server.send(serverStart(client.send(clientStart(0, "someone-else")).getOutFrames(), 0, REKEY));
    HandshakerResp c2 = client.send(next(s1.getOutFrames()));
    assertEquals(Status.Code.PERMISSION_DENIED.value(), c2.getStatus().getCode());
    assertTrue(c2.getStatus().getDetails().contains("server-sa"), c2.getStatus().getDetails());
    assertFalse(c2.hasResult());
    client.close();
    server.close();
  }

  @Test
  void aHostileLengthIsRefusedBeforeAnythingIsBuffered() throws Exception {
    Stream server = new Stream(toServerSide);
    HandshakerResp s1 =
        server.send(serverStart(ByteString.copyFrom(new byte[] {0x7f, -1, -1, -1, 0}), 0, REKEY));
    assertEquals(Status.Code.INVALID_ARGUMENT.value(), s1.getStatus().getCode());
    assertTrue(s1.getStatus().getDetails().contains("limit"), s1.getStatus().getDetails());
    HandshakerResp after = server.send(next(ByteString.copyFrom(new byte[] {1})));
    assertEquals(Status.Code.FAILED_PRECONDITION.value(), after.getStatus().getCode(), "it stays ended");
    server.close();
  }

  @Test
  void garbageFromThePeerAndRequestsOutOfOrderAreRefused() throws Exception {
    Stream server = new Stream(toServerSide);
    HandshakerResp s1 =
        server.send(serverStart(ByteString.copyFrom(new byte[] {0, 0, 0, 3, -1, -1, -1}), 0, REKEY));
    assertEquals(Status.Code.INVALID_ARGUMENT.value(), s1.getStatus().getCode());
    assertTrue(s1.getStatus().getDetails().contains("malformed"), s1.getStatus().getDetails());
    server.close();

    Stream early = new Stream(toServerSide);
    HandshakerResp e1 = early.send(next(ByteString.copyFrom(new byte[] {1})));
    assertEquals(Status.Code.FAILED_PRECONDITION.value(), e1.getStatus().getCode());
    early.close();
  }

  /**
   * What a server that says {@code maxFrameSize} whatever the client asked sends back for the
   * client's hello frame: a hello, keyed as a local handshaker keys it, without a deployment key.
   */
  private static ByteString rogueServerReply(ByteString clientHelloFrame, int maxFrameSize)
      throws Exception {
    byte[] clientHello = clientHelloFrame.substring(4).toByteArray();
    LocalKeyAgreement keys = new LocalKeyAgreement();
    byte[] serverHello =
        LocalHello.newBuilder()
            .setPublicKey(ByteString.copyFrom(keys.publicKey()))
            .setIdentity(Identity.newBuilder().setServiceAccount("rogue"))
            .addRecordProtocols(REKEY)
            .setMaxFrameSize(maxFrameSize)
            .setRpcVersions(V21)
            .build()
            .toByteArray();
    LocalKeyAgreement.Secrets secrets = keys.secrets(
        LocalHello.parseFrom(clientHello).getPublicKey().toByteArray(), clientHello, serverHello,
        null);
    return frame(serverHello).concat(frame(
        LocalFinished.newBuilder().setMac(ByteString.copyFrom(secrets.mac(false))).build()
            .toByteArray()));
  }

  private static ByteString frame(byte[] message) {
    return ByteString.copyFrom(java.nio.ByteBuffer.allocate(4).putInt(message.length).array())
        .concat(ByteString.copyFrom(message));
  }

  @Test
  void aServerThatSaysALargerFrameSizeThanTheClientAskedForGetsTheClients() throws Exception {
    Stream client = new Stream(toClientSide);
    ByteString hello = client.send(clientStart(16384)).getOutFrames();
    HandshakerResp c2 = client.send(next(rogueServerReply(hello, 1 << 20)));
    assertEquals(0, c2.getStatus().getCode(), c2.getStatus().getDetails());
    assertEquals(16384, c2.getResult().getMaxFrameSize(), "what the client asked for, at most");
    client.close();
  }

  @Test
  void hkdfMatchesRfc5869TestCase1() throws Exception {
    HexFormat hex = HexFormat.of();
    byte[] okm =
        LocalKeyAgreement.hkdf(
            hex.parseHex("000102030405060708090a0b0c"),
            hex.parseHex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"),
            hex.parseHex("f0f1f2f3f4f5f6f7f8f9"),
            42);
    assertArrayEquals(
        hex.parseHex(
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
        okm);
  }

  @Test
  void rejectsAnEmptyIdentity() {
    Throwable t = null;
    try {
      new LocalHandshakerService("");
    } catch (IllegalArgumentException e) {
      t = e;
    }
    assertNotNull(t);
  }
}
