package io.pinless.grpc;

import io.grpc.Attributes;
import io.grpc.Grpc;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/** The TLS peer a call's transport attributes name, as a gRPC application reads it. */
final class TlsPeer {
  private TlsPeer() {}

  /**
   * The subject of the first certificate the peer presented.
   *
   * @throws IllegalStateException if the attributes carry no TLS state
   * @throws SSLPeerUnverifiedException if the peer presented no certificate
   */
  static String subject(Attributes attributes) throws SSLPeerUnverifiedException {
    SSLSession negotiated = attributes.get(Grpc.TRANSPORT_ATTR_SSL_SESSION);
    if (negotiated == null) {
      throw new IllegalStateException("the call's attributes carry no TLS state");
    }
    return ((X509Certificate) negotiated.getPeerCertificates()[0])
        .getSubjectX500Principal().getName();
  }
}
