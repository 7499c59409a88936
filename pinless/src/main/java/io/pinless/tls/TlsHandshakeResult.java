package io.pinless.tls;

import io.grpc.Attributes;
import io.pinless.connection.RecordStage;
import java.security.cert.Certificate;

/**
 * Fired by {@link TlsHandshakeHandler} when a TLS handshake has succeeded: what was negotiated
 * and the record stage that carries the connection from here on. A handler behind the handshake
 * handler takes the stage ({@link #takeRecordStage}) and installs it; a stage nobody takes fails
 * the connection.
 */
public final class TlsHandshakeResult {
  private final Attributes transportAttributes;
  private final String cipherSuite;
  private final Certificate localCertificate;
  /** The first certificate of the peer's verified chain; null when it presented none. */
  private final Certificate peerCertificate;
  private final String applicationProtocol;
  private TlsRecordStage stage;

  TlsHandshakeResult(TlsRecordStage stage) {
    this.stage = stage;
    this.transportAttributes = TlsRecords.transportAttributes(stage.engine());
    this.cipherSuite = TlsRecords.cipherSuite(stage.engine());
    this.localCertificate = TlsRecords.localCertificate(stage.engine());
    this.peerCertificate = TlsRecords.peerCertificate(stage.engine());
    this.applicationProtocol = stage.engine().getApplicationProtocol();
  }

  /** gRPC's TLS transport attribute, for the transport's attributes. */
  public Attributes transportAttributes() {
    return transportAttributes;
  }

  /** The cipher suite negotiated. */
  public String cipherSuite() {
    return cipherSuite;
  }

  /** The first certificate this end presented, or null. */
  public Certificate localCertificate() {
    return localCertificate;
  }

  /** The first certificate of the peer's verified chain, or null when it presented none. */
  public Certificate peerCertificate() {
    return peerCertificate;
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
