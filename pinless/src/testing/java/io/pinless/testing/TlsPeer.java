package io.pinless.testing;

import io.grpc.Attributes;
import io.grpc.Grpc;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/** What a call's transport attributes say of its TLS connection, as a gRPC application reads it. */
public final class TlsPeer {
  private TlsPeer() {}

  /**
   * The subject of the first certificate the peer presented.
   *
   * @throws IllegalStateException if the attributes carry no TLS state
   * @throws SSLPeerUnverifiedException if the peer presented no certificate
   */
  public static String subject(Attributes attributes) throws SSLPeerUnverifiedException {
    return ((X509Certificate) negotiated(attributes).getPeerCertificates()[0])
        .getSubjectX500Principal().getName();
  }

  /**
   * The cipher suite the connection negotiated.
   *
   * @throws IllegalStateException if the attributes carry no TLS state
   */
  public static String cipherSuite(Attributes attributes) {
    return negotiated(attributes).getCipherSuite();
  }

  private static SSLSession negotiated(Attributes attributes) {
    SSLSession negotiated = attributes.get(Grpc.TRANSPORT_ATTR_SSL_SESSION);
    if (negotiated == null) {
      throw new IllegalStateException("the call's attributes carry no TLS state");
    }
    return negotiated;
  }
}
