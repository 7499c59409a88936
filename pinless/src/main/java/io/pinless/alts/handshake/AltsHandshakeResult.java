package io.pinless.alts.handshake;

import io.pinless.alts.AltsRecordStage;
import io.pinless.alts.handshake.proto.HandshakerResult;
import io.pinless.alts.handshake.proto.Identity;

/**
 * The user event {@link AltsHandshakeHandler} fires when a handshake succeeds: who the peer is
 * and what was negotiated, and the keyed {@link AltsRecordStage} for one handler to take. Once
 * the stage is taken (or the handshake handler has given it up) the event carries no key
 * material, so it may be kept for the connection's life.
 */
public final class AltsHandshakeResult {
  private final String peerServiceAccount;
  private final String localServiceAccount;
  private final String recordProtocol;
  private final int maxFrameSize;
  private final int peerRpcMajor;
  private final int peerRpcMinor;
  /** False when the handshaker says nothing about the peer is authenticated. */
  private final boolean authenticated;
  /** The record stage until taken; not part of equality. */
  private AltsRecordStage recordStage;

  AltsHandshakeResult(HandshakerResult result, int maxFrameSize, AltsRecordStage recordStage) {
    this.recordStage = recordStage;
    // Interned: a connection keeps these for its life, and thousands of connections share a few
    // identities and one protocol name.
    this.peerServiceAccount = name(result.getPeerIdentity()).intern();
    this.localServiceAccount = name(result.getLocalIdentity()).intern();
    this.recordProtocol = result.getRecordProtocol().intern();
    this.maxFrameSize = maxFrameSize;
    this.peerRpcMajor = result.getPeerRpcVersions().getMaxRpcVersion().getMajor();
    this.peerRpcMinor = result.getPeerRpcVersions().getMaxRpcVersion().getMinor();
    this.authenticated = !HandshakerProtocol.UNAUTHENTICATED.equals(result.getPeerIdentity()
        .getAttributesMap().get(HandshakerProtocol.AUTHENTICATION_ATTRIBUTE));
  }

  private static String name(Identity identity) {
    return identity.hasServiceAccount() ? identity.getServiceAccount() : identity.getHostname();
  }

  /**
   * Takes the record stage keyed by the handshake: the first call gets it, later calls null. The
   * taker installs it and releases it when the connection ends.
   */
  public AltsRecordStage takeRecordStage() {
    AltsRecordStage stage = recordStage;
    recordStage = null;
    return stage;
  }

  /**
   * Whether the handshaker authenticated the peer. False only when it says it did not (pinless's
   * local handshaker without a deployment key): then the peer's identity is only claimed, and
   * someone in between could read the traffic.
   */
  public boolean authenticated() {
    return authenticated;
  }

  /** The peer's service account (or host name), as the handshaker reports it. */
  public String peerServiceAccount() {
    return peerServiceAccount;
  }

  /** This end's service account (or host name) in the handshake. */
  public String localServiceAccount() {
    return localServiceAccount;
  }

  /** The record protocol in use, such as {@code ALTSRP_GCM_AES128_REKEY}. */
  public String recordProtocol() {
    return recordProtocol;
  }

  /** The largest record frame either end sends, in bytes. */
  public int maxFrameSize() {
    return maxFrameSize;
  }

  /** The highest RPC protocol version the peer supports, major part. */
  public int peerRpcMajor() {
    return peerRpcMajor;
  }

  /** The highest RPC protocol version the peer supports, minor part. */
  public int peerRpcMinor() {
    return peerRpcMinor;
  }

  /** Equal when every field is: two connections with the same peer, identities and settings. */
  @Override
  public boolean equals(Object o) {
    if (!(o instanceof AltsHandshakeResult)) {
      return false;
    }
    AltsHandshakeResult r = (AltsHandshakeResult) o;
    return peerServiceAccount.equals(r.peerServiceAccount)
        && localServiceAccount.equals(r.localServiceAccount)
        && recordProtocol.equals(r.recordProtocol)
        && maxFrameSize == r.maxFrameSize
        && peerRpcMajor == r.peerRpcMajor
        && peerRpcMinor == r.peerRpcMinor
        && authenticated == r.authenticated;
  }

  @Override
  public int hashCode() {
    return java.util.Objects.hash(peerServiceAccount, localServiceAccount, recordProtocol,
        maxFrameSize, peerRpcMajor, peerRpcMinor, authenticated);
  }

  @Override
  public String toString() {
    return "ALTS peer " + peerServiceAccount
        + (authenticated ? "" : " (unauthenticated: the identity is only claimed)")
        + " (local " + localServiceAccount + "), " + recordProtocol
        + ", frames up to " + maxFrameSize + " bytes, peer RPC "
        + peerRpcMajor + "." + peerRpcMinor;
  }
}
