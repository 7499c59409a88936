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
 * record key and each end's finished MAC from it ({@link LocalKeyAgreement}).
 *
 * <pre>
 *   client's service               connection                      server's service
 *   client_start -> out: [len u32 BE | hello c] ---------------> server_start(in_bytes)
 *                                  &lt;- out: [len | hello s][len | finished s]
 *   next(in_bytes) &lt;-------------------------------------------
 *     (checks finished s) -> result, out: [len | finished c] --> next(in_bytes)
 *                                                                (checks finished c) -> result
 * </pre>
 *
 * <p>Authentication depends on a deployment key: the same secret bytes given to every
 * handshaker of a deployment.
 *
 * <ul>
 *   <li>With a key, the key salts the key schedule. Each end proves it holds the key by its
 *       finished MAC, and each checks the other's before it gives out the record key. An end
 *       without the key fails, and so does someone in between who runs an exchange with each end.
 *       The key proves membership of the deployment, not an identity: any holder may claim any
 *       name. The service takes the local identity a request names, so every process that can
 *       reach a keyed service (on the loopback interface, every process of its host) is such a
 *       holder.
 *   <li>Without a key nothing is authenticated. Anyone who can reach the connection can claim any
 *       identity, and an active attacker on the path can read the traffic. pinless reports such
 *       a connection as {@code SecurityLevel.NONE}.
 *   <li>Both ends must agree on having a key. The client finds a mismatch in the server's hello
 *       and fails with the reason; the server refuses the client's MAC for it.
 * </ul>
 *
 * <p>The result says which in its peer identity's attribute {@link
 * HandshakerProtocol#AUTHENTICATION_ATTRIBUTE}, whatever the peer put there. grpc-java's own ALTS
 * does not read it: over a service without a key it still reports {@code
 * PRIVACY_AND_INTEGRITY} and the peer's claimed identity.
 *
 * <p>Only {@code ALTSRP_GCM_AES128_REKEY} is offered, as by every handshaker. The frame size is
 * the smaller of the two ends' (a peer's larger one is never taken). Failures (a request out of
 * order, no common record protocol, a server identity the client does not accept, a MAC that
 * does not verify, malformed or oversized bytes from the peer) answer with a non-OK {@link
 * HandshakerStatus} naming the problem, and end that handshake.
 */
public final class LocalHandshakerService implements BindableService {
  /** The identity this service speaks for when none is given or asked for. */
  public static final String DEFAULT_SERVICE_ACCOUNT = "pinless-local-handshaker";
  /** The largest handshake message accepted from a peer: a hostile length is refused early. */
  static final int MAX_HELLO_BYTES = 16 * 1024;
  /** The shortest deployment key taken: 128 bits. */
  static final int MIN_DEPLOYMENT_KEY_BYTES = 16;

  private final Identity localIdentity;
  /** The deployment key, or null when there is none. */
  private final byte[] deploymentKey;

  /** A service that speaks for {@link #DEFAULT_SERVICE_ACCOUNT}, without a deployment key. */
  public LocalHandshakerService() {
    this(DEFAULT_SERVICE_ACCOUNT);
  }

  /**
   * A service that speaks for {@code serviceAccount} on every handshake whose request names no
   * local identity of its own, without a deployment key: nothing it reports is authenticated.
   */
  public LocalHandshakerService(String serviceAccount) {
    this(serviceAccount, null);
  }

  /**
   * A service that speaks for {@code serviceAccount}, and authenticates its peers by {@code
   * deploymentKey}: only a peer whose handshaker holds the same key completes a handshake.
   *
   * @param deploymentKey at least 16 secret bytes shared by the deployment's handshakers (copied
   *     here), or null for none
   * @throws IllegalArgumentException if the account is empty, or the key shorter than 16 bytes or
   *     one byte repeated
   */
  public LocalHandshakerService(String serviceAccount, byte[] deploymentKey) {
    if (serviceAccount == null || serviceAccount.isEmpty()) {
      throw new IllegalArgumentException("serviceAccount must be a non-empty name");
    }
    if (deploymentKey != null && deploymentKey.length < MIN_DEPLOYMENT_KEY_BYTES) {
      throw new IllegalArgumentException("deploymentKey is " + deploymentKey.length
          + " bytes; at least " + MIN_DEPLOYMENT_KEY_BYTES + " are needed");
    }
    if (deploymentKey != null && oneByteRepeated(deploymentKey)) {
      // A buffer never filled, most likely: a key anyone can guess.
      throw new IllegalArgumentException("deploymentKey is one byte repeated ("
          + deploymentKey.length + " times " + (deploymentKey[0] & 0xff) + "), not a secret");
    }
    this.localIdentity = Identity.newBuilder().setServiceAccount(serviceAccount).build();
    this.deploymentKey = deploymentKey == null ? null : deploymentKey.clone();
  }

  private static boolean oneByteRepeated(byte[] key) {
    for (byte b : key) {
      if (b != key[0]) {
        return false;
      }
    }
    return true;
  }

  @Override
  public ServerServiceDefinition bindService() {
    return ServerServiceDefinition.builder(HandshakerProtocol.SERVICE_NAME)
        .addMethod(HandshakerProtocol.DO_HANDSHAKE,
            ServerCalls.asyncBidiStreamingCall(this::newHandshake))
        .build();
  }

  /** One {@code DoHandshake} stream's state: its requests in, its responses to {@code out}. */
  StreamObserver<HandshakerReq> newHandshake(StreamObserver<HandshakerResp> out) {
    return new LocalHandshake(out, localIdentity, deploymentKey);
  }
}
