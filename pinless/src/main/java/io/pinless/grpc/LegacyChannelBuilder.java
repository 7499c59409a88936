package io.pinless.grpc;

import io.grpc.ForwardingChannelBuilder2;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.handler.ssl.SslContext;
import javax.net.ssl.SSLException;

/**
 * What {@code ManagedChannelBuilder.forAddress} and {@code forTarget} return while pinless is the
 * channel provider: grpc-netty's builder made without credentials, which takes the {@code
 * usePlaintext()} and {@code useTransportSecurity()} calls libraries make, and gets the pinless
 * negotiator for the chosen mode when it builds.
 *
 * <p>Why a wrapper: a builder made from credentials refuses those two calls ("Cannot change
 * security"), and {@code NettyChannelBuilder} is final. So this builder remembers the mode and
 * sets the negotiator at {@link #build()}, through the accessor grpc-netty has had since before
 * 1.76. Code that casts the builder to {@code NettyChannelBuilder} gets a {@code
 * ClassCastException}.
 */
final class LegacyChannelBuilder extends ForwardingChannelBuilder2<LegacyChannelBuilder> {
  /** The builder every setting goes to; never given credentials. */
  private final NettyChannelBuilder netty;
  /** Whether {@code usePlaintext()} was the last mode set; else TLS, grpc's default. */
  private boolean plaintext;

  private LegacyChannelBuilder(NettyChannelBuilder netty) {
    this.netty = netty;
  }

  /** A builder for {@code host:port}, as {@code NettyChannelBuilder.forAddress(host, port)}. */
  static LegacyChannelBuilder ofAddress(String host, int port) {
    return new LegacyChannelBuilder(NettyChannelBuilder.forAddress(host, port));
  }

  /** A builder for {@code target}, as {@code NettyChannelBuilder.forTarget(target)}. */
  static LegacyChannelBuilder ofTarget(String target) {
    return new LegacyChannelBuilder(NettyChannelBuilder.forTarget(target));
  }

  @Override
  protected ManagedChannelBuilder<?> delegate() {
    return netty;
  }

  /** h2c with the pinless read path. */
  @Override
  public LegacyChannelBuilder usePlaintext() {
    plaintext = true;
    return this;
  }

  /** TLS with the pinless read path, trusting the JDK's default trust store (the default). */
  @Override
  public LegacyChannelBuilder useTransportSecurity() {
    plaintext = false;
    return this;
  }

  /**
   * The channel, with the pinless negotiator for the mode set last.
   *
   * @throws IllegalStateException if TLS is wanted and the JDK's default trust store does not load
   */
  @Override
  public ManagedChannel build() {
    NettyBuilders.use(netty, plaintext
        ? PinlessChannelCredentials.insecure()
        : PinlessChannelCredentials.tls(defaultClientContext()));
    return netty.build();
  }

  /** A client context as grpc-netty's {@code useTransportSecurity()} makes one for a channel. */
  private static SslContext defaultClientContext() {
    try {
      return GrpcSslContexts.forClient().build();
    } catch (SSLException e) {
      throw new IllegalStateException("TLS: the default client SslContext does not build", e);
    }
  }
}
