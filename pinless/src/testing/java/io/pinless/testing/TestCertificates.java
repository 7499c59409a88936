package io.pinless.testing;

import io.grpc.netty.GrpcSslContexts;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.math.BigInteger;
import java.net.InetAddress;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLException;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * Certificates made at test time: a test CA, server certificates for {@code localhost} and
 * 127.0.0.1 (and expired or wrong-host ones), client certificates, and gRPC contexts over them.
 */
public final class TestCertificates {
  /** A private key and its certificate. */
  public record Identity(PrivateKey key, X509Certificate certificate) {}

  /** The CA every good certificate here chains to. */
  public static final Identity CA;
  /** A server certificate for localhost and 127.0.0.1, valid now. */
  public static final Identity SERVER;
  /** A client certificate, CN=pinless-test-client. */
  public static final Identity CLIENT;

  private static final AtomicLong SERIAL = new AtomicLong(1);

  static {
    try {
      KeyPair ca = keyPair();
      CA = new Identity(ca.getPrivate(), sign("CN=pinless-test-ca", ca, ca, null, true,
          Instant.now().minus(Duration.ofDays(1)), Instant.now().plus(Duration.ofDays(30))));
      SERVER = server("localhost", "127.0.0.1");
      CLIENT = issue("CN=pinless-test-client", null, false);
    } catch (Exception e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private TestCertificates() {}

  /** A server certificate signed by {@link #CA} for the given names and addresses. */
  public static Identity server(String... hosts) throws Exception {
    return issue("CN=" + hosts[0], hosts, false);
  }

  /** A server certificate for localhost and 127.0.0.1 whose validity ended yesterday. */
  public static Identity expiredServer() throws Exception {
    KeyPair pair = keyPair();
    return new Identity(pair.getPrivate(), sign("CN=localhost", pair, keyPairOf(CA), CA.certificate(),
        false, Instant.now().minus(Duration.ofDays(10)), Instant.now().minus(Duration.ofDays(1)),
        "localhost", "127.0.0.1"));
  }

  /** A certificate for localhost and 127.0.0.1 that signs itself (no CA trusts it). */
  public static Identity selfSignedServer() throws Exception {
    KeyPair pair = keyPair();
    return new Identity(pair.getPrivate(), sign("CN=localhost", pair, pair, null, false,
        Instant.now().minus(Duration.ofDays(1)), Instant.now().plus(Duration.ofDays(1)),
        "localhost", "127.0.0.1"));
  }

  /** A server context of {@code provider} over {@code identity}, trusting {@link #CA}'s clients. */
  public static SslContext serverContext(SslProvider provider, Identity identity, ClientAuth auth)
      throws SSLException {
    return GrpcSslContexts.configure(
            SslContextBuilder.forServer(identity.key(), identity.certificate()), provider)
        .trustManager(CA.certificate())
        .clientAuth(auth)
        .build();
  }

  /** A client context of {@code provider} trusting {@link #CA}, presenting {@code identity} if not null. */
  public static SslContext clientContext(SslProvider provider, Identity identity)
      throws SSLException {
    SslContextBuilder builder = GrpcSslContexts.configure(SslContextBuilder.forClient(), provider)
        .trustManager(CA.certificate());
    if (identity != null) {
      builder.keyManager(identity.key(), identity.certificate());
    }
    return builder.build();
  }

  private static Identity issue(String subject, String[] hosts, boolean ca) throws Exception {
    KeyPair pair = keyPair();
    return new Identity(pair.getPrivate(), sign(subject, pair, keyPairOf(CA), CA.certificate(), ca,
        Instant.now().minus(Duration.ofDays(1)), Instant.now().plus(Duration.ofDays(30)),
        hosts == null ? new String[0] : hosts));
  }

  private static KeyPair keyPairOf(Identity identity) {
    return new KeyPair(identity.certificate().getPublicKey(), identity.key());
  }

  private static KeyPair keyPair() throws GeneralSecurityException {
    KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
    generator.initialize(new ECGenParameterSpec("secp256r1"));
    return generator.generateKeyPair();
  }

  private static X509Certificate sign(String subject, KeyPair subjectKeys, KeyPair issuerKeys,
      X509Certificate issuer, boolean ca, Instant from, Instant to, String... hosts)
      throws Exception {
    X500Name issuerName = issuer == null
        ? new X500Name(subject) : new X500Name(issuer.getSubjectX500Principal().getName());
    JcaX509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(issuerName,
        BigInteger.valueOf(SERIAL.getAndIncrement()), Date.from(from), Date.from(to),
        new X500Name(subject), subjectKeys.getPublic());
    builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(ca));
    if (ca) {
      builder.addExtension(Extension.keyUsage, true,
          new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
    }
    if (hosts.length > 0) {
      GeneralName[] names = new GeneralName[hosts.length];
      for (int i = 0; i < hosts.length; i++) {
        boolean address = Character.isDigit(hosts[i].charAt(0)) || hosts[i].contains(":");
        names[i] = address
            ? new GeneralName(GeneralName.iPAddress, InetAddress.getByName(hosts[i]).getHostAddress())
            : new GeneralName(GeneralName.dNSName, hosts[i]);
      }
      builder.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(names));
    }
    return new JcaX509CertificateConverter().getCertificate(
        builder.build(new JcaContentSignerBuilder("SHA256withECDSA").build(issuerKeys.getPrivate())));
  }
}
