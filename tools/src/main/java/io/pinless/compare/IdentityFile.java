package io.pinless.compare;

import io.pinless.testing.TestCertificates;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.List;

/**
 * A TLS server identity handed to the server end's JVM in a file, so that its certificate chains
 * to the test CA of the client's process. The file has two lines: the key's algorithm and the key
 * (PKCS #8, base64), then the certificate (DER, base64).
 */
final class IdentityFile {
  private IdentityFile() {}

  /** Writes {@code identity} to a new file that only this user can read. */
  static Path write(TestCertificates.Identity identity)
      throws IOException, GeneralSecurityException {
    Path file = Files.createTempFile("pinless-compare-identity", ".txt");
    Base64.Encoder base64 = Base64.getEncoder();
    Files.writeString(file, identity.key().getAlgorithm() + " "
        + base64.encodeToString(identity.key().getEncoded()) + "\n"
        + base64.encodeToString(identity.certificate().getEncoded()) + "\n",
        StandardCharsets.US_ASCII);
    return file;
  }

  /** Reads what {@link #write} wrote. */
  static TestCertificates.Identity read(Path file) throws IOException, GeneralSecurityException {
    List<String> lines = Files.readAllLines(file, StandardCharsets.US_ASCII);
    String[] key = lines.get(0).split(" ");
    Base64.Decoder base64 = Base64.getDecoder();
    PrivateKey privateKey = KeyFactory.getInstance(key[0])
        .generatePrivate(new PKCS8EncodedKeySpec(base64.decode(key[1])));
    X509Certificate certificate = (X509Certificate) CertificateFactory.getInstance("X.509")
        .generateCertificate(new ByteArrayInputStream(base64.decode(lines.get(1))));
    return new TestCertificates.Identity(privateKey, certificate);
  }
}
