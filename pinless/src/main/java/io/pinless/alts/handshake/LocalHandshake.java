package io.pinless.alts.handshake;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pinless.alts.handshake.proto.HandshakeProtocol;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.HandshakerResult;
import io.pinless.alts.handshake.proto.HandshakerStatus;
import io.pinless.alts.handshake.proto.Identity;
import io.pinless.alts.handshake.proto.LocalFinished;
import io.pinless.alts.handshake.proto.LocalHello;
import io.pinless.alts.handshake.proto.RpcProtocolVersions;
import io.pinless.alts.handshake.proto.ServerHandshakeParameters;
import io.pinless.alts.handshake.proto.StartClientHandshakeReq;
import io.pinless.alts.handshake.proto.StartServerHandshakeReq;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.List;

/**
 * One end of one connection's local handshake: the state of one {@code DoHandshake} stream of
 * {@link LocalHandshakerService}. Every request gets exactly one response; the peer's bytes are
 * split into length-prefixed messages, and what follows the last one is the peer's first records,
 * never consumed.
 *
 * <pre>
 *   message = length u32 BE (at most 16 KiB) | LocalHello or LocalFinished
 * </pre>
 *
 * <p>Memory: at most one partial message of the peer's (16 KiB and its length) between requests;
 * the ephemeral private key until the peer's hello is in, and the derived secrets until the last
 * MAC, dropped and wiped when the handshake ends.
 */
final class LocalHandshake implements StreamObserver<HandshakerReq> {
  /** What the handshake waits for. */
  private enum Stage {
    /** A {@code client_start} or {@code server_start}. */
    START,
    /** Server: the client's hello. */
    CLIENT_HELLO,
    /** Client: the server's hello. */
    SERVER_HELLO,
    /** Client: the server's MAC. */
    SERVER_FINISHED,
    /** Server: the client's MAC. */
    CLIENT_FINISHED,
    /** A result was given or the handshake failed: later requests are refused. */
    ENDED
  }

  /** A handshake that cannot go on: the status to answer with. */
  private static final class Refusal extends Exception {
    final Status.Code code;

    Refusal(Status.Code code, String details) {
      super(details, null, false, false);
      this.code = code;
    }
  }

  private final StreamObserver<HandshakerResp> out;
  private final Identity defaultIdentity;
  /** The deployment key, or null when there is none. */
  private final byte[] deploymentKey;
  private Stage stage = Stage.START;
  private boolean client;
  private Identity identity;
  private List<Identity> acceptedPeers = List.of();
  private List<String> recordProtocols = List.of();
  /** What this end asked for; 0 when it did not say. */
  private int maxFrameSize;
  private RpcProtocolVersions rpcVersions = RpcProtocolVersions.getDefaultInstance();
  /** This end's ephemeral key pair, from its hello until the secrets are derived. */
  private LocalKeyAgreement keys;
  /** The client's hello as sent (the client end keeps its own; the server the peer's). */
  private byte[] clientHello;
  /** The peer's hello, once in. */
  private LocalHello peer;
  private String recordProtocol;
  /** The frame size of the result. */
  private int frameSize;
  private LocalKeyAgreement.Secrets secrets;
  /** Peer bytes received and not yet a whole message. */
  private ByteString pending = ByteString.EMPTY;

  LocalHandshake(
      StreamObserver<HandshakerResp> out, Identity defaultIdentity, byte[] deploymentKey) {
    this.out = out;
    this.defaultIdentity = defaultIdentity;
    this.deploymentKey = deploymentKey;
  }

  @Override
  public void onNext(HandshakerReq req) {
    HandshakerResp resp;
    try {
      resp = handle(req);
    } catch (Refusal r) {
      end();
      resp = failure(r.code, r.getMessage(), ByteString.EMPTY, 0);
    }
    out.onNext(resp);
  }

  private HandshakerResp handle(HandshakerReq req) throws Refusal {
    if (stage == Stage.ENDED) {
      throw new Refusal(Status.Code.FAILED_PRECONDITION, "the handshake has already ended");
    }
    switch (req.getReqOneofCase()) {
      case CLIENT_START:
        return startClient(req.getClientStart());
      case SERVER_START:
        return startServer(req.getServerStart());
      case NEXT:
        if (stage == Stage.START) {
          throw new Refusal(Status.Code.FAILED_PRECONDITION,
              "next before client_start or server_start");
        }
        return received(req.getNext().getInBytes());
      default:
        throw new Refusal(Status.Code.INVALID_ARGUMENT,
            "a request with no client_start, server_start or next");
    }
  }

  private HandshakerResp startClient(StartClientHandshakeReq start) throws Refusal {
    begin();
    client = true;
    if (start.getHandshakeSecurityProtocol() != HandshakeProtocol.ALTS) {
      throw new Refusal(Status.Code.INVALID_ARGUMENT,
          "handshake protocol " + start.getHandshakeSecurityProtocol() + " is not ALTS");
    }
    identity = start.hasLocalIdentity() ? start.getLocalIdentity() : defaultIdentity;
    acceptedPeers = start.getTargetIdentitiesList();
    recordProtocols = start.getRecordProtocolsList();
    maxFrameSize = start.getMaxFrameSize();
    rpcVersions = start.getRpcVersions();
    keys = newKeys();
    LocalHello hello =
        LocalHello.newBuilder()
            .setPublicKey(ByteString.copyFrom(keys.publicKey()))
            .setIdentity(identity)
            .addAllRecordProtocols(recordProtocols)
            .setMaxFrameSize(maxFrameSize)
            .setRpcVersions(rpcVersions)
            .setDeploymentKey(deploymentKey != null)
            .build();
    clientHello = hello.toByteArray();
    stage = Stage.SERVER_HELLO;
    return ok(frame(clientHello), 0).build();
  }

  private HandshakerResp startServer(StartServerHandshakeReq start) throws Refusal {
    begin();
    ServerHandshakeParameters params =
        start.getHandshakeParametersMap().get(HandshakerProtocol.ALTS_PARAMETERS_KEY);
    if (params == null) {
      throw new Refusal(Status.Code.INVALID_ARGUMENT,
          "server_start has no ALTS handshake parameters");
    }
    identity =
        params.getLocalIdentitiesCount() > 0 ? params.getLocalIdentities(0) : defaultIdentity;
    recordProtocols = params.getRecordProtocolsList();
    maxFrameSize = start.getMaxFrameSize();
    rpcVersions = start.getRpcVersions();
    stage = Stage.CLIENT_HELLO;
    return received(start.getInBytes());
  }

  private void begin() throws Refusal {
    if (stage != Stage.START) {
      throw new Refusal(Status.Code.FAILED_PRECONDITION, "a second client_start or server_start");
    }
  }

  /**
   * Takes peer bytes and every whole message in them. Answers with what this end sends back, the
   * result once the handshake is done (the bytes after its last message not consumed), or, while
   * a message is still partial, that it took every byte.
   */
  private HandshakerResp received(ByteString inBytes) throws Refusal {
    pending = pending.concat(inBytes);
    ByteString toPeer = ByteString.EMPTY;
    while (true) {
      if (pending.size() < 4) {
        return ok(toPeer, inBytes.size()).build();
      }
      int length = pending.substring(0, 4).asReadOnlyByteBuffer().getInt();
      if (length < 0 || length > LocalHandshakerService.MAX_HELLO_BYTES) {
        throw new Refusal(Status.Code.INVALID_ARGUMENT,
            "the peer's handshake message claims " + Integer.toUnsignedString(length)
                + " bytes, above the " + LocalHandshakerService.MAX_HELLO_BYTES + "-byte limit");
      }
      if (pending.size() < 4 + length) {
        return ok(toPeer, inBytes.size()).build();
      }
      byte[] message = pending.substring(4, 4 + length).toByteArray();
      pending = pending.substring(4 + length);
      int consumed = inBytes.size() - pending.size();
      Stage at = stage;
      try {
        toPeer = toPeer.concat(step(message));
      } catch (Refusal r) {
        end();
        // A server that refuses the client's hello tells the client why.
        return failure(r.code, r.getMessage(),
            at == Stage.CLIENT_HELLO ? refusal(r.getMessage()) : ByteString.EMPTY, consumed);
      }
      if (stage == Stage.ENDED) {
        // Bytes after the last message are the peer's first records: they are not consumed.
        pending = ByteString.EMPTY;
        HandshakerResult result = result();
        secrets.wipe();
        return ok(toPeer, consumed).setResult(result).build();
      }
    }
  }

  /** Takes one whole message of the peer's; returns what to send back. */
  private ByteString step(byte[] message) throws Refusal {
    try {
      switch (stage) {
        case CLIENT_HELLO:
          return clientHello(message);
        case SERVER_HELLO:
          serverHello(message);
          return ByteString.EMPTY;
        case SERVER_FINISHED:
          checkMac(message, false);
          stage = Stage.ENDED;
          return frame(LocalFinished.newBuilder()
              .setMac(ByteString.copyFrom(secrets.mac(true))).build().toByteArray());
        case CLIENT_FINISHED:
          checkDeploymentKey();
          checkMac(message, true);
          stage = Stage.ENDED;
          return ByteString.EMPTY;
        default:
          throw new IllegalStateException("no message is expected at " + stage);
      }
    } catch (GeneralSecurityException e) {
      throw new Refusal(Status.Code.INVALID_ARGUMENT,
          "the peer's key exchange is refused: " + e.getMessage());
    }
  }

  /** Server: the client's hello in, the server's hello and MAC out. */
  private ByteString clientHello(byte[] message) throws Refusal, GeneralSecurityException {
    peer = parseHello(message);
    // A client that disagrees on the key learns it from this end's hello and fails with the
    // reason on its side; this end refuses its MAC, if one comes, for the same reason.
    for (String offered : peer.getRecordProtocolsList()) {
      if (offered.equals(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
          && recordProtocols.contains(offered)) {
        recordProtocol = offered;
      }
    }
    if (recordProtocol == null) {
      throw new Refusal(Status.Code.FAILED_PRECONDITION,
          "no common record protocol: the client offered " + peer.getRecordProtocolsList()
              + ", this server " + recordProtocols + " (only "
              + HandshakerProtocol.RECORD_PROTOCOL_REKEY + " is supported)");
    }
    frameSize = negotiate(maxFrameSize, peer.getMaxFrameSize());
    keys = newKeys();
    byte[] serverHello =
        LocalHello.newBuilder()
            .setPublicKey(ByteString.copyFrom(keys.publicKey()))
            .setIdentity(identity)
            .addRecordProtocols(recordProtocol)
            .setMaxFrameSize(frameSize)
            .setRpcVersions(rpcVersions)
            .setDeploymentKey(deploymentKey != null)
            .build()
            .toByteArray();
    secrets = keys.secrets(peer.getPublicKey().toByteArray(), message, serverHello, deploymentKey);
    keys = null;
    stage = Stage.CLIENT_FINISHED;
    return frame(serverHello).concat(frame(LocalFinished.newBuilder()
        .setMac(ByteString.copyFrom(secrets.mac(false))).build().toByteArray()));
  }

  /** Client: the server's hello in; its MAC comes next. */
  private void serverHello(byte[] message) throws Refusal, GeneralSecurityException {
    peer = parseHello(message);
    if (!peer.getRefusal().isEmpty()) {
      throw new Refusal(
          Status.Code.FAILED_PRECONDITION, "the server refused: " + peer.getRefusal());
    }
    checkDeploymentKey();
    if (peer.getRecordProtocolsCount() != 1
        || !recordProtocols.contains(peer.getRecordProtocols(0))) {
      throw new Refusal(Status.Code.INVALID_ARGUMENT,
          "the server chose " + peer.getRecordProtocolsList() + ", not one of " + recordProtocols);
    }
    Identity claimed = withoutAttributes(peer.getIdentity());
    if (!acceptedPeers.isEmpty() && !acceptedPeers.contains(claimed)) {
      throw new Refusal(Status.Code.PERMISSION_DENIED,
          "the server is " + describe(peer.getIdentity()) + ", not one of the accepted "
              + acceptedPeers.stream().map(LocalHandshake::describe).toList());
    }
    recordProtocol = peer.getRecordProtocols(0);
    frameSize = negotiate(maxFrameSize, peer.getMaxFrameSize());
    secrets = keys.secrets(peer.getPublicKey().toByteArray(), clientHello, message, deploymentKey);
    keys = null;
    stage = Stage.SERVER_FINISHED;
  }

  private static LocalHello parseHello(byte[] message) throws Refusal {
    try {
      return LocalHello.parseFrom(message);
    } catch (InvalidProtocolBufferException e) {
      throw new Refusal(Status.Code.INVALID_ARGUMENT,
          "the peer's handshake message is malformed: " + e.getMessage());
    }
  }

  /** Both ends have a deployment key, or neither has. */
  private void checkDeploymentKey() throws Refusal {
    boolean ours = deploymentKey != null;
    if (peer.getDeploymentKey() != ours) {
      String peerName = client ? "the server's" : "the client's";
      throw new Refusal(Status.Code.UNAUTHENTICATED, ours
          ? "this handshaker has a deployment key and " + peerName + " has none"
          : peerName + " handshaker has a deployment key and this one has none");
    }
  }

  /** Checks the peer's MAC ({@code fromClient}: the client's) before any key is given out. */
  private void checkMac(byte[] message, boolean fromClient)
      throws Refusal, GeneralSecurityException {
    LocalFinished finished;
    try {
      finished = LocalFinished.parseFrom(message);
    } catch (InvalidProtocolBufferException e) {
      throw new Refusal(Status.Code.INVALID_ARGUMENT,
          "the peer's finished message is malformed: " + e.getMessage());
    }
    if (!secrets.verify(fromClient, finished.getMac().toByteArray())) {
      throw new Refusal(Status.Code.UNAUTHENTICATED, "the " + (fromClient ? "client" : "server")
          + "'s handshake MAC does not verify: "
          + (deploymentKey != null
              ? "its handshaker has another deployment key, or someone in between changed the"
                  + " handshake"
              : "someone in between changed the handshake"));
    }
  }

  private HandshakerResult result() {
    // The handshaker's own verdict, over anything the peer put in its identity.
    Identity peerIdentity = peer.getIdentity().toBuilder()
        .putAttributes(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE, deploymentKey != null
            ? HandshakerProtocol.AUTHENTICATED_BY_DEPLOYMENT_KEY
            : HandshakerProtocol.UNAUTHENTICATED)
        .build();
    return HandshakerResult.newBuilder()
        .setApplicationProtocol(HandshakerProtocol.APPLICATION_PROTOCOL)
        .setRecordProtocol(recordProtocol)
        .setKeyData(ByteString.copyFrom(secrets.keyData))
        .setPeerIdentity(peerIdentity)
        .setLocalIdentity(identity)
        .setPeerRpcVersions(peer.getRpcVersions())
        .setMaxFrameSize(frameSize)
        .build();
  }

  private static Identity withoutAttributes(Identity identity) {
    return identity.toBuilder().clearAttributes().build();
  }

  private static LocalKeyAgreement newKeys() throws Refusal {
    try {
      return new LocalKeyAgreement();
    } catch (GeneralSecurityException e) {
      throw new Refusal(Status.Code.INTERNAL, "X25519 is not available: " + e);
    }
  }

  /** The server's refusal, for the client to read. */
  private static ByteString refusal(String why) {
    return frame(LocalHello.newBuilder().setRefusal(why).build().toByteArray());
  }

  private void end() {
    stage = Stage.ENDED;
    pending = ByteString.EMPTY;
    // The private key and the hellos would rebuild every secret: none is kept past its use.
    keys = null;
    if (secrets != null) {
      secrets.wipe();
    }
  }

  /** Peer bytes held between requests: a partial message, at most its length and 16 KiB. */
  int heldBytes() {
    return pending.size();
  }

  @Override
  public void onError(Throwable t) {
    end();
  }

  @Override
  public void onCompleted() {
    end();
    out.onCompleted();
  }

  /**
   * The smaller of two frame sizes, where 0 means the end did not say. They are uint32 on the
   * wire: compared unsigned, so 2^32 - 1 is not taken for -1.
   */
  private static int negotiate(int ours, int theirs) {
    if (ours == 0 || theirs == 0) {
      return ours == 0 ? theirs : ours;
    }
    return Integer.compareUnsigned(ours, theirs) <= 0 ? ours : theirs;
  }

  private static ByteString frame(byte[] message) {
    return ByteString.copyFrom(ByteBuffer.allocate(4).putInt(message.length).array())
        .concat(ByteString.copyFrom(message));
  }

  private static HandshakerResp.Builder ok(ByteString outFrames, int consumed) {
    return HandshakerResp.newBuilder()
        .setOutFrames(outFrames)
        .setBytesConsumed(consumed)
        .setStatus(status(Status.Code.OK, ""));
  }

  private static HandshakerResp failure(
      Status.Code code, String details, ByteString outFrames, int consumed) {
    return HandshakerResp.newBuilder()
        .setOutFrames(outFrames)
        .setBytesConsumed(consumed)
        .setStatus(status(code, details))
        .build();
  }

  private static HandshakerStatus status(Status.Code code, String details) {
    return HandshakerStatus.newBuilder().setCode(code.value()).setDetails(details).build();
  }

  private static String describe(Identity identity) {
    return identity.hasServiceAccount() ? "service account " + identity.getServiceAccount()
        : identity.hasHostname() ? "host " + identity.getHostname() : "an unnamed identity";
  }
}
