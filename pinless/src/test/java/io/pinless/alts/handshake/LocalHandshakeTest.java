package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
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
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The local handshake's authentication, each end driven directly: the same deployment key
 * agrees, anything else fails before a key is given out, and without a key the result says
 * nothing is authenticated.
 */
class LocalHandshakeTest {
  private static final String REKEY = HandshakerProtocol.RECORD_PROTOCOL_REKEY;
  private static final byte[] KEY = key(1);
  private static final byte[] OTHER_KEY = key(2);

  private static byte[] key(int seed) {
    byte[] key = new byte[32];
    for (int i = 0; i < key.length; i++) {
      key[i] = (byte) (seed * 31 + i);
    }
    return key;
  }

  /** One end: each request must get exactly one response, at once. */
  private static final class End {
    private final List<HandshakerResp> responses = new ArrayList<>();
    private final StreamObserver<HandshakerReq> requests;

    End(String account, byte[] deploymentKey) {
      requests = new LocalHandshakerService(account, deploymentKey).newHandshake(
          new StreamObserver<>() {
            @Override
            public void onNext(HandshakerResp value) {
              responses.add(value);
            }

            @Override
            public void onError(Throwable t) {
              throw new AssertionError("the service never fails the stream", t);
            }

            @Override
            public void onCompleted() {}
          });
    }

    HandshakerResp send(HandshakerReq req) {
      int before = responses.size();
      requests.onNext(req);
      assertEquals(before + 1, responses.size(), "one response per request");
      return responses.get(before);
    }

    HandshakerResp start() {
      return send(HandshakerReq.newBuilder()
          .setClientStart(StartClientHandshakeReq.newBuilder()
              .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
              .addRecordProtocols(REKEY)
              .setMaxFrameSize(131072))
          .build());
    }

    HandshakerResp start(ByteString in) {
      return send(HandshakerReq.newBuilder()
          .setServerStart(StartServerHandshakeReq.newBuilder()
              .putHandshakeParameters(HandshakerProtocol.ALTS_PARAMETERS_KEY,
                  ServerHandshakeParameters.newBuilder().addRecordProtocols(REKEY).build())
              .setInBytes(in)
              .setMaxFrameSize(131072))
          .build());
    }

    HandshakerResp next(ByteString in) {
      return send(HandshakerReq.newBuilder()
          .setNext(NextHandshakeMessageReq.newBuilder().setInBytes(in))
          .build());
    }
  }

  /** The client's and server's last responses of a handshake relayed as is. */
  private static HandshakerResp[] relay(End client, End server) {
    HandshakerResp s1 = server.start(client.start().getOutFrames());
    if (s1.getStatus().getCode() != 0) {
      return new HandshakerResp[] {client.next(s1.getOutFrames()), s1};
    }
    HandshakerResp c2 = client.next(s1.getOutFrames());
    if (c2.getStatus().getCode() != 0) {
      return new HandshakerResp[] {c2, s1};
    }
    return new HandshakerResp[] {c2, server.next(c2.getOutFrames())};
  }

  private static String authentication(HandshakerResp resp) {
    return resp.getResult().getPeerIdentity().getAttributesMap()
        .get(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE);
  }

  private static void assertFailed(HandshakerResp resp, Status.Code code, String details) {
    assertEquals(code.value(), resp.getStatus().getCode(), resp.getStatus().getDetails());
    assertTrue(resp.getStatus().getDetails().contains(details), resp.getStatus().getDetails());
    assertFalse(resp.hasResult());
  }

  @Test
  void theSameDeploymentKeyAgreesAndBothEndsSayTheyAreAuthenticated() {
    HandshakerResp[] last = relay(new End("client-sa", KEY), new End("server-sa", KEY));
    for (HandshakerResp r : last) {
      assertEquals(0, r.getStatus().getCode(), r.getStatus().getDetails());
      assertEquals(HandshakerProtocol.AUTHENTICATED_BY_DEPLOYMENT_KEY, authentication(r));
    }
    assertEquals(last[0].getResult().getKeyData(), last[1].getResult().getKeyData());
    assertEquals("server-sa", last[0].getResult().getPeerIdentity().getServiceAccount());
    assertEquals("client-sa", last[1].getResult().getPeerIdentity().getServiceAccount());
  }

  @Test
  void withoutAKeyBothEndsSayNothingIsAuthenticated() {
    for (HandshakerResp r : relay(new End("client-sa", null), new End("server-sa", null))) {
      assertEquals(HandshakerProtocol.UNAUTHENTICATED, authentication(r));
    }
  }

  @Test
  void anotherKeyFailsTheClientAtTheServersMac() {
    HandshakerResp[] last = relay(new End("client-sa", KEY), new End("server-sa", OTHER_KEY));
    assertFailed(last[0], Status.Code.UNAUTHENTICATED, "server's handshake MAC does not verify");
    assertTrue(last[0].getOutFrames().isEmpty(), "the client sends no MAC of its own");
    assertFalse(last[1].hasResult(), "the server waits for a MAC that never comes");
  }

  @Test
  void theServerRefusesAClientMacThatDoesNotVerify() {
    End client = new End("client-sa", KEY);
    End server = new End("server-sa", KEY);
    client.next(server.start(client.start().getOutFrames()).getOutFrames());
    byte[] forged = LocalFinished.newBuilder().setMac(ByteString.copyFrom(new byte[32])).build()
        .toByteArray();
    assertFailed(server.next(frame(forged)), Status.Code.UNAUTHENTICATED,
        "client's handshake MAC does not verify");
  }

  @Test
  void oneEndWithAKeyAndTheOtherWithoutFailBothWays() {
    End client = new End("client-sa", KEY);
    End server = new End("server-sa", null);
    HandshakerResp[] keyedClient = relay(client, server);
    assertFailed(keyedClient[0], Status.Code.UNAUTHENTICATED,
        "this handshaker has a deployment key and the server's has none");
    assertFalse(keyedClient[1].hasResult());
    assertFailed(server.next(frame(LocalFinished.getDefaultInstance().toByteArray())),
        Status.Code.UNAUTHENTICATED,
        "the client's handshaker has a deployment key and this one has none");

    HandshakerResp[] keyedServer = relay(new End("client-sa", null), new End("server-sa", KEY));
    assertFailed(keyedServer[0], Status.Code.UNAUTHENTICATED,
        "the server's handshaker has a deployment key and this one has none");
    assertFalse(keyedServer[1].hasResult());
  }

  /**
   * Someone in between runs a handshake of its own with each end, through handshakers with
   * {@code mitmKey} (null: none). Returns the client's and the server's last responses.
   */
  private static HandshakerResp[] inTheMiddle(byte[] endsKey, byte[] mitmKey) {
    End client = new End("client-sa", endsKey);
    End server = new End("server-sa", endsKey);
    End mitmAsServer = new End("server-sa", mitmKey);
    End mitmAsClient = new End("client-sa", mitmKey);
    HandshakerResp[] toClient = relay(client, mitmAsServer);
    HandshakerResp[] toServer = relay(mitmAsClient, server);
    return new HandshakerResp[] {toClient[0], toServer[1]};
  }

  @Test
  void aManInTheMiddleWithAnotherKeyOrNoneFailsAtBothEnds() {
    for (byte[] mitmKey : new byte[][] {OTHER_KEY, null}) {
      HandshakerResp[] ends = inTheMiddle(KEY, mitmKey);
      assertFalse(ends[0].hasResult(), "the client gives out no key");
      assertFalse(ends[1].hasResult(), "the server gives out no key");
      assertNotEquals(0, ends[0].getStatus().getCode());
    }
  }

  @Test
  void withoutAKeyAManInTheMiddleSucceedsAndTheResultsSaySo() {
    HandshakerResp[] ends = inTheMiddle(null, null);
    for (HandshakerResp r : ends) {
      assertTrue(r.hasResult());
      assertEquals(HandshakerProtocol.UNAUTHENTICATED, authentication(r));
    }
  }

  /** {@code frames} with the public key of the hello at its start replaced. */
  private static ByteString withPublicKey(ByteString frames, byte[] publicKey) throws Exception {
    int length = frames.substring(0, 4).asReadOnlyByteBuffer().getInt();
    LocalHello hello = LocalHello.parseFrom(frames.substring(4, 4 + length));
    return frame(hello.toBuilder().setPublicKey(ByteString.copyFrom(publicKey)).build()
        .toByteArray()).concat(frames.substring(4 + length));
  }

  @Test
  void rewrittenKeySharesFailTheHandshake() throws Exception {
    End client = new End("client-sa", KEY);
    End server = new End("server-sa", KEY);
    byte[] mitm = new LocalKeyAgreement().publicKey();
    HandshakerResp s1 = server.start(withPublicKey(client.start().getOutFrames(), mitm));
    assertEquals(0, s1.getStatus().getCode(), s1.getStatus().getDetails());
    HandshakerResp c2 = client.next(withPublicKey(s1.getOutFrames(), mitm));
    assertFailed(c2, Status.Code.UNAUTHENTICATED, "server's handshake MAC does not verify");
  }

  @Test
  void aPeerCannotClaimToBeAuthenticated() {
    End client = new End("client-sa", null);
    End server = new End("server-sa", null);
    HandshakerResp c1 = client.send(HandshakerReq.newBuilder()
        .setClientStart(StartClientHandshakeReq.newBuilder()
            .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
            .addRecordProtocols(REKEY)
            .setLocalIdentity(Identity.newBuilder().setServiceAccount("client-sa")
                .putAttributes(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE,
                    HandshakerProtocol.AUTHENTICATED_BY_DEPLOYMENT_KEY)))
        .build());
    HandshakerResp s1 = server.start(c1.getOutFrames());
    HandshakerResp s2 = server.next(client.next(s1.getOutFrames()).getOutFrames());
    assertEquals(HandshakerProtocol.UNAUTHENTICATED, authentication(s2));
  }

  /** Regression (fuzzing): a frame size of 2^32 - 1 compared as -1 won as the smaller one. */
  @Test
  void aClientFrameSizeAboveTwoGibibytesIsNotTakenForASmallOne() {
    End client = new End("client-sa", null);
    End server = new End("server-sa", null);
    HandshakerResp c1 = client.send(HandshakerReq.newBuilder()
        .setClientStart(StartClientHandshakeReq.newBuilder()
            .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
            .addRecordProtocols(REKEY)
            .setMaxFrameSize(-1))
        .build());
    HandshakerResp c2 = client.next(server.start(c1.getOutFrames()).getOutFrames());
    assertTrue(c2.hasResult(), c2.getStatus().getDetails());
    HandshakerResp s2 = server.next(c2.getOutFrames());
    assertTrue(s2.hasResult(), s2.getStatus().getDetails());
    assertEquals(131072, s2.getResult().getMaxFrameSize(), "what the server asked for");
    assertEquals(131072, c2.getResult().getMaxFrameSize(), "what the server chose");
  }

  /** The ephemeral X25519 key pair a handshake still references; null once it ended. */
  private static Object keyPair(End end) throws ReflectiveOperationException {
    java.lang.reflect.Field keys = LocalHandshake.class.getDeclaredField("keys");
    keys.setAccessible(true);
    return keys.get(end.requests);
  }

  /**
   * Regression (review): an ended handshake kept its X25519 private key, which with the peer's
   * public key in the hellos rebuilds the record key for as long as the stream object lives.
   */
  @Test
  void anEndedHandshakeHoldsNoPrivateKey() throws Exception {
    End client = new End("client-sa", KEY);
    End server = new End("server-sa", KEY);
    HandshakerResp[] last = relay(client, server);
    assertTrue(last[0].hasResult() && last[1].hasResult());
    assertNull(keyPair(client), "the client's key pair after its result");
    assertNull(keyPair(server), "the server's key pair after its result");

    End refused = new End("server-sa", OTHER_KEY);
    relay(new End("client-sa", KEY), refused);
    assertFailed(refused.next(frame(LocalFinished.newBuilder()
            .setMac(ByteString.copyFrom(new byte[32])).build().toByteArray())),
        Status.Code.UNAUTHENTICATED, "client's handshake MAC does not verify");
    assertNull(keyPair(refused), "the server's key pair after it refused");
  }

  @Test
  void aShortDeploymentKeyIsRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new LocalHandshakerService("a", new byte[15]));
    assertTrue(e.getMessage().contains("15 bytes"), e.getMessage());
  }

  /**
   * Regression (review): a key buffer never filled (all zero bytes) or one byte repeated was taken
   * as a deployment key, and every handshake reported a peer authenticated by a key anyone can
   * guess.
   */
  @Test
  void aDeploymentKeyOfOneRepeatedByteIsRefused() {
    byte[] as = new byte[32];
    java.util.Arrays.fill(as, (byte) 'a');
    for (byte[] guessable : new byte[][] {new byte[32], as}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> new LocalHandshakerService("a", guessable));
      assertTrue(e.getMessage().contains("one byte repeated"), e.getMessage());
    }
  }

  private static ByteString frame(byte[] message) {
    return ByteString.copyFrom(ByteBuffer.allocate(4).putInt(message.length).array())
        .concat(ByteString.copyFrom(message));
  }
}
