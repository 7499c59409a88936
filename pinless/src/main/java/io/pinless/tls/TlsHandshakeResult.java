package io.pinless.tls;

import io.pinless.connection.RecordStage;
import javax.net.ssl.SSLSession;

/**
 * Fired by {@link TlsHandshakeHandler} when a TLS handshake has succeeded: what was negotiated
 * and the record stage that carries the connection from here on. A handler behind the handshake
 * handler takes the stage ({@link #takeRecordStage}) and installs it; a stage nobody takes fails
 * the connection.
 */
public final class TlsHandshakeResult {
  private final SSLSession negotiated;
  private final String applicationProtocol;
  private TlsRecordStage stage;

  TlsHandshakeResult(TlsRecordStage stage) {
    this.stage = stage;
    this.negotiated = stage.engine().getSession();
    this.applicationProtocol = stage.engine().getApplicationProtocol();
  }

  /** What was negotiated: the peer's certificates, the protocol version and cipher suite. */
  public SSLSession negotiated() {
    return negotiated;
  }

  /** The protocol ALPN selected ({@code h2}). */
  public String applicationProtocol() {
    return applicationProtocol;
  }

  /**
   * Takes the record stage; the taker owns it (it releases the engine when released).
   *
   * @return the stage the first time; null after
   */
  public RecordStage takeRecordStage() {
    RecordStage taken = stage;
    stage = null;
    return taken;
  }
}
