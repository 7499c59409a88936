package io.pinless.alts.handshake;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.BindableService;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.pinless.alts.handshake.proto.HandshakeProtocol;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.HandshakerResult;
import io.pinless.alts.handshake.proto.HandshakerStatus;
import io.pinless.alts.handshake.proto.Identity;
import io.pinless.alts.handshake.proto.LocalHello;
import io.pinless.alts.handshake.proto.RpcProtocolVersions;
import io.pinless.alts.handshake.proto.ServerHandshakeParameters;
import io.pinless.alts.handshake.proto.StartClientHandshakeReq;
import io.pinless.alts.handshake.proto.StartServerHandshakeReq;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.List;

/**
 * An ALTS handshaker service for development, tests and private deployments off Google Cloud:
 * it implements {@code grpc.gcp.HandshakerService/DoHandshake} so that pinless, and grpc-java's
 * own ALTS pointed at it (with {@code setHandshakerAddressForTesting} and untrusted mode), can
 * secure connections without the metadata server.
 *
 * <p>Each {@code DoHandshake} stream is one end of one connection, with its own state; any number
 * run at once. The two ends (each talking to its own service, in the same process or not) agree
 * on a key by an ephemeral X25519 exchange carried in the connection itself, and derive the
 * record key with HKDF-SHA256 over both hello messages (see {@link LocalKeyAgreement}). Each end
 * tells the other its identity, which the other reports as the peer identity; it is asserted, not
 * proven: there are no certificates, so anyone who can reach the connection can claim any name.
 * Use it where the network is trusted, as grpc-java's untrusted ALTS mode assumes.
 *
 * <pre>
 *   client's service                    connection                   server's service
 *   client_start      -> out: [len u32 BE | LocalHello c] --------> server_start(in_bytes)
 *                                                                 <- result, out: [len | LocalHello s]
 *   next(in_bytes)   <-------------------------------------------
 *                     -> result
 * </pre>
 *
 * <p>Only {@code ALTSRP_GCM_AES128_REKEY} is offered, as by every handshaker. Failures (a request
 * out of order, no common record protocol, a server identity the client does not accept,
 * malformed or oversized bytes from the peer) answer with a non-OK {@link HandshakerStatus}
 * naming the problem, and end that handshake.
 */
public final class LocalHandshakerService implements BindableService {
  /** The identity this service speaks for when none is given or asked for. */
  public static final String DEFAULT_SERVICE_ACCOUNT = "pinless-local-handshaker";
  /** The largest hello accepted from a peer: a hostile length is refused before it is buffered. */
  static final int MAX_HELLO_BYTES = 16 * 1024;

  private final Identity localIdentity;

  /** A service that speaks for {@link #DEFAULT_SERVICE_ACCOUNT}. */
  public LocalHandshakerService() {
    this(DEFAULT_SERVICE_ACCOUNT);
  }

  /**
   * A service that speaks for {@code serviceAccount} on every handshake whose request names no
   * local identity of its own.
   */
  public LocalHandshakerService(String serviceAccount) {
    if (serviceAccount == null || serviceAccount.isEmpty()) {
      throw new IllegalArgumentException("serviceAccount must be a non-empty name");
    }
    this.localIdentity = Identity.newBuilder().setServiceAccount(serviceAccount).build();
  }

  @Override
  public ServerServiceDefinition bindService() {
    return ServerServiceDefinition.builder(HandshakerProtocol.SERVICE_NAME)
        .addMethod(HandshakerProtocol.DO_HANDSHAKE, ServerCalls.asyncBidiStreamingCall(Handshake::new))
        .build();
  }

  /** One end of one connection's handshake: the state of one {@code DoHandshake} stream. */
  private final class Handshake implements StreamObserver<HandshakerReq> {
    private final StreamObserver<HandshakerResp> out;
    /** True for the client end; set by the first request. */
    private boolean client;
    private boolean started;
    /** Set once the handshake has a result or failed: later requests are refused. */
    private boolean ended;
    private Identity identity;
    private List<Identity> acceptedPeers = List.of();
    private List<String> recordProtocols = List.of();
    private int maxFrameSize;
    private RpcProtocolVersions rpcVersions = RpcProtocolVersions.getDefaultInstance();
    private LocalKeyAgreement keys;
    /** The client's hello as sent (the client end keeps its own; the server the peer's). */
    private byte[] clientHello;
    /** Peer bytes received and not yet a whole hello. */
    private ByteString pending = ByteString.EMPTY;

    Handshake(StreamObserver<HandshakerResp> out) {
      this.out = out;
    }

    @Override
    public void onNext(HandshakerReq req) {
      if (ended) {
        fail(Status.Code.FAILED_PRECONDITION, "the handshake has already ended", 0);
        return;
      }
      try {
        switch (req.getReqOneofCase()) {
          case CLIENT_START:
            startClient(req.getClientStart());
            break;
          case SERVER_START:
            startServer(req.getServerStart());
            break;
          case NEXT:
            if (!started) {
              fail(Status.Code.FAILED_PRECONDITION, "next before client_start or server_start", 0);
            } else {
              received(req.getNext().getInBytes());
            }
            break;
          default:
            fail(Status.Code.INVALID_ARGUMENT, "a request with no client_start, server_start or next", 0);
        }
      } catch (GeneralSecurityException e) {
        fail(Status.Code.INTERNAL, "key agreement failed: " + e.getMessage(), 0);
      }
    }

    private void startClient(StartClientHandshakeReq start) throws GeneralSecurityException {
      if (!begin()) {
        return;
      }
      client = true;
      if (start.getHandshakeSecurityProtocol() != HandshakeProtocol.ALTS) {
        fail(Status.Code.INVALID_ARGUMENT,
            "handshake protocol " + start.getHandshakeSecurityProtocol() + " is not ALTS", 0);
        return;
      }
      identity = start.hasLocalIdentity() ? start.getLocalIdentity() : localIdentity;
      acceptedPeers = start.getTargetIdentitiesList();
      recordProtocols = start.getRecordProtocolsList();
      maxFrameSize = start.getMaxFrameSize();
      rpcVersions = start.getRpcVersions();
      keys = new LocalKeyAgreement();
      LocalHello hello =
          LocalHello.newBuilder()
              .setPublicKey(ByteString.copyFrom(keys.publicKey()))
              .setIdentity(identity)
              .addAllRecordProtocols(recordProtocols)
              .setMaxFrameSize(maxFrameSize)
              .setRpcVersions(rpcVersions)
              .build();
      clientHello = hello.toByteArray();
      out.onNext(ok(frame(clientHello), 0).build());
    }

    private void startServer(StartServerHandshakeReq start) throws GeneralSecurityException {
      if (!begin()) {
        return;
      }
      ServerHandshakeParameters params =
          start.getHandshakeParametersMap().get(HandshakerProtocol.ALTS_PARAMETERS_KEY);
      if (params == null) {
        fail(Status.Code.INVALID_ARGUMENT, "server_start has no ALTS handshake parameters", 0);
        return;
      }
      identity = params.getLocalIdentitiesCount() > 0 ? params.getLocalIdentities(0) : localIdentity;
      recordProtocols = params.getRecordProtocolsList();
      maxFrameSize = start.getMaxFrameSize();
      rpcVersions = start.getRpcVersions();
      received(start.getInBytes());
    }

    private boolean begin() {
      if (started) {
        fail(Status.Code.FAILED_PRECONDITION, "a second client_start or server_start", 0);
        return false;
      }
      started = true;
      return true;
    }

    /** Takes peer bytes; answers once a whole hello is in, else says it took them all. */
    private void received(ByteString inBytes) throws GeneralSecurityException {
      int before = pending.size();
      pending = pending.concat(inBytes);
      if (pending.size() < 4) {
        out.onNext(ok(ByteString.EMPTY, inBytes.size()).build());
        return;
      }
      int length = pending.substring(0, 4).asReadOnlyByteBuffer().getInt();
      if (length < 0 || length > MAX_HELLO_BYTES) {
        fail(Status.Code.INVALID_ARGUMENT,
            "the peer's handshake message claims " + Integer.toUnsignedString(length)
                + " bytes, above the " + MAX_HELLO_BYTES + "-byte limit",
            inBytes.size());
        return;
      }
      if (pending.size() < 4 + length) {
        out.onNext(ok(ByteString.EMPTY, inBytes.size()).build());
        return;
      }
      // Bytes after the hello are the peer's first records: they are not consumed.
      int consumed = 4 + length - before;
      byte[] helloBytes = pending.substring(4, 4 + length).toByteArray();
      pending = ByteString.EMPTY;
      LocalHello peer;
      try {
        peer = LocalHello.parseFrom(helloBytes);
      } catch (InvalidProtocolBufferException e) {
        fail(Status.Code.INVALID_ARGUMENT, "the peer's handshake message is malformed: " + e.getMessage(), consumed);
        return;
      }
      if (client) {
        finishClient(peer, helloBytes, consumed);
      } else {
        finishServer(peer, helloBytes, consumed);
      }
    }

    private void finishServer(LocalHello peer, byte[] peerHello, int consumed)
        throws GeneralSecurityException {
      String chosen = null;
      for (String offered : peer.getRecordProtocolsList()) {
        if (offered.equals(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
            && recordProtocols.contains(offered)) {
          chosen = offered;
        }
      }
      if (chosen == null) {
        String why = "no common record protocol: the client offered " + peer.getRecordProtocolsList()
            + ", this server " + recordProtocols + " (only " + HandshakerProtocol.RECORD_PROTOCOL_REKEY
            + " is supported)";
        LocalHello refusal = LocalHello.newBuilder().setRefusal(why).build();
        ended = true;
        out.onNext(
            HandshakerResp.newBuilder()
                .setOutFrames(frame(refusal.toByteArray()))
                .setBytesConsumed(consumed)
                .setStatus(status(Status.Code.FAILED_PRECONDITION, why))
                .build());
        return;
      }
      int frameSize = negotiate(maxFrameSize, peer.getMaxFrameSize());
      keys = new LocalKeyAgreement();
      byte[] serverHello =
          LocalHello.newBuilder()
              .setPublicKey(ByteString.copyFrom(keys.publicKey()))
              .setIdentity(identity)
              .addRecordProtocols(chosen)
              .setMaxFrameSize(frameSize)
              .setRpcVersions(rpcVersions)
              .build()
              .toByteArray();
      byte[] keyData = keys.keyData(peer.getPublicKey().toByteArray(), peerHello, serverHello);
      ended = true;
      out.onNext(
          ok(frame(serverHello), consumed)
              .setResult(result(chosen, keyData, peer, frameSize))
              .build());
    }

    private void finishClient(LocalHello peer, byte[] serverHello, int consumed)
        throws GeneralSecurityException {
      if (!peer.getRefusal().isEmpty()) {
        fail(Status.Code.FAILED_PRECONDITION, "the server refused: " + peer.getRefusal(), consumed);
        return;
      }
      if (peer.getRecordProtocolsCount() != 1 || !recordProtocols.contains(peer.getRecordProtocols(0))) {
        fail(Status.Code.INVALID_ARGUMENT,
            "the server chose " + peer.getRecordProtocolsList() + ", not one of " + recordProtocols,
            consumed);
        return;
      }
      if (!acceptedPeers.isEmpty() && !acceptedPeers.contains(peer.getIdentity())) {
        fail(Status.Code.PERMISSION_DENIED,
            "the server is " + describe(peer.getIdentity()) + ", not one of the accepted "
                + acceptedPeers.stream().map(LocalHandshakerService::describe).toList(),
            consumed);
        return;
      }
      byte[] keyData = keys.keyData(peer.getPublicKey().toByteArray(), clientHello, serverHello);
      ended = true;
      out.onNext(
          ok(ByteString.EMPTY, consumed)
              .setResult(result(peer.getRecordProtocols(0), keyData, peer, peer.getMaxFrameSize()))
              .build());
    }

    private HandshakerResult result(String recordProtocol, byte[] keyData, LocalHello peer, int frameSize) {
      return HandshakerResult.newBuilder()
          .setApplicationProtocol(HandshakerProtocol.APPLICATION_PROTOCOL)
          .setRecordProtocol(recordProtocol)
          .setKeyData(ByteString.copyFrom(keyData))
          .setPeerIdentity(peer.getIdentity())
          .setLocalIdentity(identity)
          .setPeerRpcVersions(peer.getRpcVersions())
          .setMaxFrameSize(frameSize)
          .build();
    }

    private void fail(Status.Code code, String details, int consumed) {
      ended = true;
      out.onNext(
          HandshakerResp.newBuilder()
              .setBytesConsumed(consumed)
              .setStatus(status(code, details))
              .build());
    }

    @Override
    public void onError(Throwable t) {
      ended = true;
    }

    @Override
    public void onCompleted() {
      ended = true;
      out.onCompleted();
    }
  }

  /** The smaller of two frame sizes, where 0 means the end did not say. */
  private static int negotiate(int ours, int theirs) {
    if (ours == 0 || theirs == 0) {
      return Math.max(ours, theirs);
    }
    return Math.min(ours, theirs);
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

  private static HandshakerStatus status(Status.Code code, String details) {
    return HandshakerStatus.newBuilder().setCode(code.value()).setDetails(details).build();
  }

  private static String describe(Identity identity) {
    return identity.hasServiceAccount() ? "service account " + identity.getServiceAccount()
        : identity.hasHostname() ? "host " + identity.getHostname() : "an unnamed identity";
  }
}
