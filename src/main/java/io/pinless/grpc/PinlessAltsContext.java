package io.pinless.grpc;

import io.grpc.Attributes;
import io.grpc.ClientCall;
import io.grpc.ServerCall;
import io.pinless.alts.handshake.AltsHandshakeResult;

/**
 * What an ALTS connection made with pinless's credentials established, as calls see it: the
 * peer's and this end's identity, the record protocol and the peer's RPC version; in the spirit
 * of grpc-alts's {@code AltsContextUtil}.
 *
 * <pre>
 *   PinlessAltsContext alts = PinlessAltsContext.from(serverCall);   // in a ServerInterceptor
 *   if (alts != null) { String peer = alts.peerServiceAccount(); }
 * </pre>
 */
public final class PinlessAltsContext {
  /** The transport attribute that carries the context. */
  public static final Attributes.Key<PinlessAltsContext> ATTR =
      Attributes.Key.create("io.pinless.alts-context");

  private final AltsHandshakeResult result;

  PinlessAltsContext(AltsHandshakeResult result) {
    this.result = result;
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

  /** Always {@code PRIVACY_AND_INTEGRITY}: every record is encrypted and authenticated. */
  public io.grpc.SecurityLevel securityLevel() {
    return io.grpc.SecurityLevel.PRIVACY_AND_INTEGRITY;
  }

  @Override
  public String toString() {
    return result.toString();
  }
}
