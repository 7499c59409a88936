package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pinless.alts.handshake.proto.HandshakeProtocol;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.Identity;
import io.pinless.alts.handshake.proto.LocalFinished;
import io.pinless.alts.handshake.proto.LocalHello;
import io.pinless.alts.handshake.proto.NextHandshakeMessageReq;
import io.pinless.alts.handshake.proto.ServerHandshakeParameters;
import io.pinless.alts.handshake.proto.StartClientHandshakeReq;
import io.pinless.alts.handshake.proto.StartServerHandshakeReq;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * Property: whatever requests and peer bytes reach two local handshakes (an honest relay, its
 * messages mutated, split or replaced, random protobufs, out of order), every request gets one
 * response with a status a peer can cause, and no end gives out a key its peer did not prove.
 *
 * <p>Two ends, each with no deployment key or one of two, are driven step by step; the fuzzer
 * picks each step. All zero bytes make an honest unkeyed handshake. Checked after every step:
 * one response per request, its status one of those a peer can cause (never INTERNAL or
 * UNKNOWN), no exception, {@code bytes_consumed} within the bytes given, at most one partial
 * message held, an ended handshake stays ended, and a result has 44 bytes of key data, a frame
 * size no larger than its end asked for, the authentication its end's key gives, and (keyed)
 * only a peer with the same key. Two results agree on the key. The service holds no {@code
 * ByteBuf}: nothing can leak; the steps are bounded and synchronous: nothing can hang.
 */
class LocalHandshakerServiceFuzzTest {
  private static final byte[][] KEYS = {
    null, "fuzz deployment key number one..".getBytes(java.nio.charset.StandardCharsets.US_ASCII),
    "fuzz deployment key number two..".getBytes(java.nio.charset.StandardCharsets.US_ASCII)
  };
  private static final String REKEY = HandshakerProtocol.RECORD_PROTOCOL_REKEY;
  private static final Set<Integer> PEER_CAUSED = Set.of(
      Status.Code.OK.value(), Status.Code.INVALID_ARGUMENT.value(),
      Status.Code.FAILED_PRECONDITION.value(), Status.Code.PERMISSION_DENIED.value(),
      Status.Code.UNAUTHENTICATED.value());
  private static final int MAX_STEPS = 16;

  /** One end: its handshake, what it sent its peer and not yet delivered, what it reported. */
  private static final class End {
    final byte[] key;
    final LocalHandshake handshake;
    final List<HandshakerResp> responses = new ArrayList<>();
    boolean completed;
    boolean started;
    boolean ended;
    /** The frame size its start asked for; 0 when none. */
    int asked;
    ByteString outbox = ByteString.EMPTY;
    HandshakerResp result;

    End(String account, byte[] key) {
      this.key = key;
      this.handshake = (LocalHandshake) new LocalHandshakerService(account, key).newHandshake(
          new StreamObserver<>() {
            @Override
            public void onNext(HandshakerResp value) {
              assertFalse(completed, "a response after the stream completed");
              responses.add(value);
            }

            @Override
            public void onError(Throwable t) {
              throw new AssertionError("the service never fails the stream", t);
            }

            @Override
            public void onCompleted() {
              completed = true;
            }
          });
    }
  }

  @FuzzTest
  void handshakeMessages(FuzzedDataProvider data) throws Exception {
    byte[] clientKey = KEYS[data.consumeInt(0, KEYS.length - 1)];
    byte[] serverKey =
        data.consumeBoolean() ? KEYS[data.consumeInt(0, KEYS.length - 1)] : clientKey;
    End client = new End("client-sa", clientKey);
    End server = new End("server-sa", serverKey);
    int steps = MAX_STEPS - data.consumeInt(0, MAX_STEPS - 1);
    for (int step = 0; step < steps && !(client.completed && server.completed); step++) {
      boolean toServer = data.consumeBoolean();
      End to = toServer ? server : client;
      End from = toServer ? client : server;
      switch (data.consumeInt(0, 6)) {
        case 0: // the honest relay's next step
          honest(client, server);
          break;
        case 1: // what the other end sent, mutated
          deliver(to, mutate(from.outbox, data));
          from.outbox = ByteString.EMPTY;
          break;
        case 2: // part of what the other end sent
          int cut = data.consumeInt(0, from.outbox.size());
          deliver(to, from.outbox.substring(0, cut));
          from.outbox = from.outbox.substring(cut);
          break;
        case 3: // raw bytes
          deliver(to, ByteString.copyFrom(data.consumeBytes(data.consumeInt(0, 64))));
          break;
        case 4: // a hello or finished message of the fuzzer's own
          deliver(to, data.consumeBoolean() ? frame(hello(data)) : frame(
              LocalFinished.newBuilder().setMac(ByteString.copyFrom(data.consumeBytes(
                  data.consumeInt(0, 40)))).build().toByteArray()));
          break;
        case 5: // any request
          send(to, request(data));
          break;
        default: // the stream ends
          if (!to.completed) {
            to.handshake.onCompleted();
            assertTrue(to.completed, "onCompleted completes the stream");
          }
      }
      check(client, server);
    }
  }

  /** Starts the client, or gives one end what the other sent. */
  private static void honest(End client, End server) {
    if (!client.started) {
      send(client, HandshakerReq.newBuilder()
          .setClientStart(StartClientHandshakeReq.newBuilder()
              .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
              .addRecordProtocols(REKEY)
              .setMaxFrameSize(131072))
          .build());
    } else if (!client.outbox.isEmpty()) {
      deliver(server, client.outbox);
      client.outbox = ByteString.EMPTY;
    } else if (!server.outbox.isEmpty()) {
      deliver(client, server.outbox);
      server.outbox = ByteString.EMPTY;
    }
  }

  /** Peer bytes for {@code to}: in its {@code server_start} if it has none yet, else a next. */
  private static void deliver(End to, ByteString bytes) {
    if (!to.started) {
      send(to, HandshakerReq.newBuilder()
          .setServerStart(StartServerHandshakeReq.newBuilder()
              .putHandshakeParameters(HandshakerProtocol.ALTS_PARAMETERS_KEY,
                  ServerHandshakeParameters.newBuilder().addRecordProtocols(REKEY).build())
              .setInBytes(bytes)
              .setMaxFrameSize(65536))
          .build());
    } else {
      send(to, HandshakerReq.newBuilder()
          .setNext(NextHandshakeMessageReq.newBuilder().setInBytes(bytes))
          .build());
    }
  }

  /** Sends {@code req} to {@code to} and checks its one response. */
  private static void send(End to, HandshakerReq req) {
    if (to.completed) {
      return;
    }
    boolean wasEnded = to.ended;
    int before = to.responses.size();
    to.handshake.onNext(req);
    assertEquals(before + 1, to.responses.size(), "one response per request");
    HandshakerResp resp = to.responses.get(before);
    int code = resp.getStatus().getCode();
    assertTrue(PEER_CAUSED.contains(code), "status " + code + ": " + resp.getStatus().getDetails());
    if (wasEnded) {
      assertEquals(Status.Code.FAILED_PRECONDITION.value(), code, "an ended handshake stays ended");
      return;
    }
    ByteString in = req.hasNext() ? req.getNext().getInBytes()
        : req.hasServerStart() ? req.getServerStart().getInBytes() : ByteString.EMPTY;
    assertTrue(resp.getBytesConsumed() <= in.size(),
        "consumed " + resp.getBytesConsumed() + " of " + in.size());
    if (!to.started && (req.hasClientStart() || req.hasServerStart())) {
      to.started = true;
      to.asked = req.hasClientStart() ? req.getClientStart().getMaxFrameSize()
          : req.getServerStart().getMaxFrameSize();
    }
    to.outbox = to.outbox.concat(resp.getOutFrames());
    if (code != 0 || resp.hasResult()) {
      to.ended = true;
    }
    if (resp.hasResult()) {
      assertEquals(0, code, "a result only with OK");
      to.result = resp;
    }
    assertTrue(to.handshake.heldBytes() <= 4 + LocalHandshakerService.MAX_HELLO_BYTES,
        "held " + to.handshake.heldBytes());
  }

  private static void check(End client, End server) {
    for (End end : List.of(client, server)) {
      if (end.result == null) {
        continue;
      }
      End other = end == client ? server : client;
      var result = end.result.getResult();
      assertEquals(LocalKeyAgreement.KEY_DATA_BYTES, result.getKeyData().size());
      if (end.asked != 0) {
        assertTrue(Integer.compareUnsigned(result.getMaxFrameSize(), end.asked) <= 0,
            "frame size " + Integer.toUnsignedString(result.getMaxFrameSize()) + " above the "
                + Integer.toUnsignedString(end.asked) + " asked for");
      }
      assertEquals(end.key == null ? HandshakerProtocol.UNAUTHENTICATED
              : HandshakerProtocol.AUTHENTICATED_BY_DEPLOYMENT_KEY,
          result.getPeerIdentity().getAttributesMap()
              .get(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE));
      if (end.key != null) {
        assertArrayEquals(end.key, other.key, "a keyed end completed with a peer without its key");
      }
    }
    if (client.result != null && server.result != null) {
      assertEquals(client.result.getResult().getKeyData(), server.result.getResult().getKeyData(),
          "two results, two keys");
    }
  }

  /** {@code bytes} with one mutation the fuzzer picks. */
  private static ByteString mutate(ByteString bytes, FuzzedDataProvider data) {
    byte[] b = bytes.toByteArray();
    switch (data.consumeInt(0, 4)) {
      case 0: // flip a bit
        if (b.length > 0) {
          int at = data.consumeInt(0, b.length - 1);
          b[at] ^= (byte) (1 << data.consumeInt(0, 7));
        }
        return ByteString.copyFrom(b);
      case 1: // truncate
        return ByteString.copyFrom(b, 0, data.consumeInt(0, b.length));
      case 2: // a hostile length in front
        return ByteString.copyFrom(ByteBuffer.allocate(4).putInt(data.consumeInt()).array())
            .concat(bytes.substring(Math.min(4, b.length)));
      case 3: // the first message's fields changed, re-framed
        return rewriteFirst(bytes, data);
      default: // bytes appended
        return bytes.concat(ByteString.copyFrom(data.consumeBytes(data.consumeInt(0, 32))));
    }
  }

  /** The first framed message of {@code bytes} with fields the fuzzer picks, if it is a hello. */
  private static ByteString rewriteFirst(ByteString bytes, FuzzedDataProvider data) {
    if (bytes.size() < 4) {
      return bytes;
    }
    int length = bytes.substring(0, 4).asReadOnlyByteBuffer().getInt();
    if (length < 0 || 4 + length > bytes.size()) {
      return bytes;
    }
    LocalHello hello;
    try {
      hello = LocalHello.parseFrom(bytes.substring(4, 4 + length));
    } catch (InvalidProtocolBufferException e) {
      return bytes;
    }
    LocalHello.Builder b = hello.toBuilder();
    switch (data.consumeInt(0, 4)) {
      case 0:
        b.setPublicKey(ByteString.copyFrom(data.consumeBytes(data.consumeInt(0, 40))));
        break;
      case 1:
        b.setMaxFrameSize(data.consumeInt());
        break;
      case 2:
        b.setDeploymentKey(!hello.getDeploymentKey());
        break;
      case 3:
        b.clearRecordProtocols().addRecordProtocols(data.consumeString(30));
        break;
      default:
        b.setIdentity(Identity.newBuilder().setServiceAccount(data.consumeString(20))
            .putAttributes(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE, data.consumeString(20)));
    }
    return frame(b.build().toByteArray()).concat(bytes.substring(4 + length));
  }

  /** A hello of the fuzzer's own. */
  private static byte[] hello(FuzzedDataProvider data) {
    LocalHello.Builder b = LocalHello.newBuilder()
        .setPublicKey(ByteString.copyFrom(data.consumeBytes(data.consumeInt(0, 40))))
        .setMaxFrameSize(data.consumeInt())
        .setDeploymentKey(data.consumeBoolean())
        .setRefusal(data.consumeBoolean() ? data.consumeString(20) : "");
    for (int i = data.consumeInt(0, 2); i > 0; i--) {
      b.addRecordProtocols(data.consumeBoolean() ? REKEY : data.consumeString(20));
    }
    return b.build().toByteArray();
  }

  /** A request of any kind: from protobuf bytes when they parse, else a start of the fuzzer's. */
  private static HandshakerReq request(FuzzedDataProvider data) {
    if (data.consumeBoolean()) {
      try {
        return HandshakerReq.parseFrom(data.consumeBytes(data.consumeInt(0, 128)));
      } catch (InvalidProtocolBufferException e) {
        return HandshakerReq.getDefaultInstance();
      }
    }
    if (data.consumeBoolean()) {
      return HandshakerReq.newBuilder()
          .setClientStart(StartClientHandshakeReq.newBuilder()
              .setHandshakeSecurityProtocolValue(data.consumeInt(0, 3))
              .addRecordProtocols(data.consumeBoolean() ? REKEY : data.consumeString(20))
              .addTargetIdentities(Identity.newBuilder().setServiceAccount(data.consumeString(10)))
              .setMaxFrameSize(data.consumeInt()))
          .build();
    }
    StartServerHandshakeReq.Builder start = StartServerHandshakeReq.newBuilder()
        .setInBytes(ByteString.copyFrom(data.consumeBytes(data.consumeInt(0, 64))))
        .setMaxFrameSize(data.consumeInt());
    if (data.consumeBoolean()) {
      start.putHandshakeParameters(data.consumeInt(0, 3), ServerHandshakeParameters.newBuilder()
          .addRecordProtocols(data.consumeBoolean() ? REKEY : data.consumeString(20)).build());
    }
    return HandshakerReq.newBuilder().setServerStart(start).build();
  }

  private static ByteString frame(byte[] message) {
    return ByteString.copyFrom(ByteBuffer.allocate(4).putInt(message.length).array())
        .concat(ByteString.copyFrom(message));
  }
}
