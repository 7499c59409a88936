package io.pinless.grpc;

import io.grpc.ForwardingServerBuilder;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyServerBuilder;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.File;
import java.io.InputStream;
import javax.net.ssl.SSLException;

/**
 * What {@code ServerBuilder.forPort} returns while pinless is the server provider: grpc-netty's
 * builder made without credentials, which takes {@code useTransportSecurity(certChain, key)} and
 * gets the pinless negotiator, h2c or TLS, when it builds. A builder made from credentials would
 * refuse that call, and {@code NettyServerBuilder} is final, so this wraps it. Code that casts the
 * builder to {@code NettyServerBuilder} gets a {@code ClassCastException}.
 */
final class LegacyServerBuilder extends ForwardingServerBuilder<LegacyServerBuilder> {
  /** The builder every setting goes to; never given credentials. */
  private final NettyServerBuilder netty;
  /** The TLS context {@code useTransportSecurity} built, or null for h2c. */
  private SslContext tls;

  private LegacyServerBuilder(NettyServerBuilder netty) {
    this.netty = netty;
  }

  /** A builder for {@code port}, as {@code NettyServerBuilder.forPort(port)}. */
  static LegacyServerBuilder ofPort(int port) {
    return new LegacyServerBuilder(NettyServerBuilder.forPort(port));
  }

  @Override
  protected ServerBuilder<?> delegate() {
    return netty;
  }

  /**
   * TLS with the pinless read path, with the PEM certificate chain and PKCS#8 key in the files.
   *
   * @throws IllegalArgumentException if they do not load
   */
  @Override
  public LegacyServerBuilder useTransportSecurity(File certChain, File privateKey) {
    tls = build(GrpcSslContexts.forServer(certChain, privateKey));
    return this;
  }

  /**
   * TLS with the pinless read path, with the PEM certificate chain and PKCS#8 key read from the
   * streams (not closed here).
   *
   * @throws IllegalArgumentException if they do not load
   */
  @Override
  public LegacyServerBuilder useTransportSecurity(InputStream certChain, InputStream privateKey) {
    tls = build(GrpcSslContexts.forServer(certChain, privateKey));
    return this;
  }

  /**
   * The server, with the pinless negotiator (TLS once a key was given, else h2c), shedding calls
   * first while the process is over its budget ({@link LoadShedding}).
   */
  @Override
  public Server build() {
    netty.intercept(LoadShedding.interceptor());
    NettyBuilders.use(netty, tls == null
        ? PinlessServerCredentials.insecure()
        : PinlessServerCredentials.tls(tls));
    return netty.build();
  }

  private static SslContext build(SslContextBuilder builder) {
    try {
      return builder.build();
    } catch (SSLException | RuntimeException e) {
      throw new IllegalArgumentException("TLS: the certificate chain or key does not load", e);
    }
  }
}
