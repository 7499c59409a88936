package io.pinless.grpc;

import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.netty.GrpcSslContexts;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.ByteArrayInputStream;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import javax.net.ssl.SSLException;
import javax.net.ssl.X509KeyManager;
import javax.net.ssl.X509TrustManager;

/**
 * grpc's portable TLS credentials as the {@link SslContext} grpc-netty would build from them:
 * {@code GrpcSslContexts} (OpenSSL's engine when netty-tcnative is present), the key and
 * certificate chain or key manager, the roots or trust manager (the JDK's defaults when neither
 * is given), and on a server the client-certificate policy.
 */
final class PortableTls {
  private PortableTls() {}

  /** What pinless takes of the portable credentials: mutual TLS and custom managers. */
  private static final EnumSet<TlsChannelCredentials.Feature> CLIENT_FEATURES = EnumSet.of(
      TlsChannelCredentials.Feature.MTLS, TlsChannelCredentials.Feature.CUSTOM_MANAGERS);
  private static final EnumSet<TlsServerCredentials.Feature> SERVER_FEATURES = EnumSet.of(
      TlsServerCredentials.Feature.MTLS, TlsServerCredentials.Feature.CUSTOM_MANAGERS);

  /** @throws IllegalArgumentException for a feature pinless does not take, or bad material */
  static SslContext clientContext(TlsChannelCredentials creds) {
    Set<TlsChannelCredentials.Feature> unknown = creds.incomprehensible(CLIENT_FEATURES);
    if (!unknown.isEmpty()) {
      throw new IllegalArgumentException("TLS features pinless does not take: " + unknown);
    }
    SslContextBuilder builder = GrpcSslContexts.forClient();
    if (creds.getKeyManagers() != null) {
      builder.keyManager(x509(creds.getKeyManagers(), X509KeyManager.class, "key"));
    } else if (creds.getPrivateKey() != null) {
      builder.keyManager(new ByteArrayInputStream(creds.getCertificateChain()),
          new ByteArrayInputStream(creds.getPrivateKey()), creds.getPrivateKeyPassword());
    }
    if (creds.getTrustManagers() != null) {
      builder.trustManager(x509(creds.getTrustManagers(), X509TrustManager.class, "trust"));
    } else if (creds.getRootCertificates() != null) {
      builder.trustManager(new ByteArrayInputStream(creds.getRootCertificates()));
    }
    return build(builder);
  }

  /** @throws IllegalArgumentException for a feature pinless does not take, or bad material */
  static SslContext serverContext(TlsServerCredentials creds) {
    Set<TlsServerCredentials.Feature> unknown = creds.incomprehensible(SERVER_FEATURES);
    if (!unknown.isEmpty()) {
      throw new IllegalArgumentException("TLS features pinless does not take: " + unknown);
    }
    SslContextBuilder builder = creds.getKeyManagers() != null
        ? GrpcSslContexts.configure(SslContextBuilder.forServer(
            x509(creds.getKeyManagers(), X509KeyManager.class, "key")))
        : GrpcSslContexts.forServer(new ByteArrayInputStream(creds.getCertificateChain()),
            new ByteArrayInputStream(creds.getPrivateKey()), creds.getPrivateKeyPassword());
    if (creds.getTrustManagers() != null) {
      builder.trustManager(x509(creds.getTrustManagers(), X509TrustManager.class, "trust"));
    } else if (creds.getRootCertificates() != null) {
      builder.trustManager(new ByteArrayInputStream(creds.getRootCertificates()));
    }
    switch (creds.getClientAuth()) {
      case REQUIRE:
        builder.clientAuth(ClientAuth.REQUIRE);
        break;
      case OPTIONAL:
        builder.clientAuth(ClientAuth.OPTIONAL);
        break;
      default:
        builder.clientAuth(ClientAuth.NONE);
    }
    return build(builder);
  }

  /** The first manager of the X.509 kind (the one a TLS engine uses). */
  private static <T> T x509(List<?> managers, Class<T> kind, String what) {
    for (Object manager : managers) {
      if (kind.isInstance(manager)) {
        return kind.cast(manager);
      }
    }
    throw new IllegalArgumentException("no X.509 " + what + " manager among " + managers);
  }

  private static SslContext build(SslContextBuilder builder) {
    try {
      return builder.build();
    } catch (SSLException | RuntimeException e) {
      throw new IllegalArgumentException("TLS credentials: " + e.getMessage(), e);
    }
  }
}
