package io.pinless.grpc;

import io.pinless.testing.TestCertificates.Identity;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateEncodingException;
import java.util.Base64;

/** Test certificates and keys as the PEM streams grpc's portable credentials read. */
final class Pem {
  private Pem() {}

  /** {@code identity}'s certificate. */
  static InputStream certificate(Identity identity) throws CertificateEncodingException {
    return pem("CERTIFICATE", identity.certificate().getEncoded());
  }

  /** {@code identity}'s private key, PKCS#8. */
  static InputStream key(Identity identity) {
    return pem("PRIVATE KEY", identity.key().getEncoded());
  }

  private static InputStream pem(String type, byte[] der) {
    String body = Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(der);
    return new ByteArrayInputStream(
        ("-----BEGIN " + type + "-----\n" + body + "\n-----END " + type + "-----\n")
            .getBytes(StandardCharsets.US_ASCII));
  }
}
