package io.pinless.grpc;

import io.grpc.Attributes;
import io.grpc.ClientCall;
import io.grpc.ServerCall;
import io.pinless.alts.handshake.AltsHandshakeResult;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What an ALTS connection made with pinless's credentials established, as calls see it: the
 * peer's and this end's identity, whether the peer is authenticated, the record protocol and the
 * peer's RPC version; in the spirit of grpc-alts's {@code AltsContextUtil}.
 *
 * <pre>
 *   PinlessAltsContext alts = PinlessAltsContext.from(serverCall);   // in a ServerInterceptor
 *   if (alts != null) { String peer = alts.peerServiceAccount(); }
 * </pre>
 *
 * <p>Connections with the same peer, identities and settings share one context object, so an
 * idle connection keeps a reference to it rather than a copy.
 */
public final class PinlessAltsContext {
  /** The transport attribute that carries the context. */
  public static final Attributes.Key<PinlessAltsContext> ATTR =
      Attributes.Key.create("io.pinless.alts-context");

  /**
   * Contexts shared by connections with equal results (a process talks to a few identities), up
   * to {@link #MAX_SHARED} of them; past that, each connection gets its own.
   */
  private static final ConcurrentHashMap<AltsHandshakeResult, PinlessAltsContext> SHARED =
      new ConcurrentHashMap<>();
  /** How many distinct contexts are shared at most. */
  static final int MAX_SHARED = 1024;

  private final AltsHandshakeResult result;

  private PinlessAltsContext(AltsHandshakeResult result) {
    this.result = result;
  }

  /**
   * The context for {@code result}: one shared with every connection whose result is equal, so a
   * connection keeps a reference and not a copy.
   */
  static PinlessAltsContext of(AltsHandshakeResult result) {
    PinlessAltsContext shared = SHARED.get(result);
    if (shared != null) {
      return shared;
    }
    if (SHARED.size() >= MAX_SHARED) {
      return new PinlessAltsContext(result);
    }
    return SHARED.computeIfAbsent(result, PinlessAltsContext::new);
  }

  /** The context of a server call's connection; null when it is not pinless ALTS. */
  public static PinlessAltsContext from(ServerCall<?, ?> call) {
    return from(call.getAttributes());
  }

  /** The context of a started client call's connection; null when it is not pinless ALTS. */
  public static PinlessAltsContext from(ClientCall<?, ?> call) {
    return from(call.getAttributes());
  }

  /** The context in transport attributes; null when there is none. */
  public static PinlessAltsContext from(Attributes attributes) {
    return attributes.get(ATTR);
  }

  /** The peer's service account (or host name). */
  public String peerServiceAccount() {
    return result.peerServiceAccount();
  }

  /** This end's service account (or host name). */
  public String localServiceAccount() {
    return result.localServiceAccount();
  }

  /** The record protocol, such as {@code ALTSRP_GCM_AES128_REKEY}. */
  public String recordProtocol() {
    return result.recordProtocol();
  }

  /** The largest record frame in use, in bytes. */
  public int maxFrameSize() {
    return result.maxFrameSize();
  }

  /** The peer's highest RPC protocol version, as {@code major.minor}. */
  public String peerRpcVersion() {
    return result.peerRpcMajor() + "." + result.peerRpcMinor();
  }

  /**
   * Whether the peer is authenticated. False when the handshaker says it is not (pinless's local
   * handshaker without a deployment key): the peer's identity is only claimed, and an active
   * attacker on the path could read and change the traffic.
   */
  public boolean authenticated() {
    return result.authenticated();
  }

  /**
   * {@code PRIVACY_AND_INTEGRITY} when the peer is {@link #authenticated()}, else {@code NONE}:
   * records are encrypted either way, but to an unauthenticated peer, who may be anyone. It is
   * the level calls see, so call credentials that demand privacy are not sent to such a peer.
   */
  public io.grpc.SecurityLevel securityLevel() {
    return securityLevel(result);
  }

  /** The security level of a connection with {@code result}. */
  static io.grpc.SecurityLevel securityLevel(AltsHandshakeResult result) {
    return result.authenticated()
        ? io.grpc.SecurityLevel.PRIVACY_AND_INTEGRITY
        : io.grpc.SecurityLevel.NONE;
  }

  /** What the handshake established; it says "unauthenticated" when the peer is not. */
  @Override
  public String toString() {
    return result.toString();
  }
}
