package io.pinless.grpc;

import io.grpc.InsecureServerCredentials;
import io.grpc.ServerBuilder;
import io.grpc.ServerCredentials;
import io.grpc.ServerProvider;
import io.grpc.TlsServerCredentials;

/**
 * pinless as gRPC's server provider, so that {@code ServerBuilder.forPort} and {@code
 * Grpc.newServerBuilderForPort} build servers with the pinless read path and no code change.
 * gRPC's service loader finds it in the pinless jar. It is available only with {@code
 * -Dpinless.provider=true} (or {@code PINLESS_PROVIDER=true}), and never with {@code
 * pinless.enabled=false}: then grpc-netty's own provider serves, as without pinless.
 *
 * <p>It serves insecure and TLS credentials ({@code TlsServerCredentials}) and declines others,
 * which the registry then offers to the next provider, grpc-netty's. The builder of {@code
 * forPort} serves h2c, or TLS after {@code useTransportSecurity(certChain, key)}.
 */
public final class PinlessServerProvider extends ServerProvider {
  private final boolean available;

  /** The provider as gRPC's service loader makes it: on as {@code pinless.provider} says. */
  public PinlessServerProvider() {
    this(ProviderSwitch.read());
  }

  /** A provider switched on or off whatever the settings say. */
  PinlessServerProvider(boolean on) {
    this.available = ProviderSwitch.available(on);
  }

  /**
   * Whether {@code pinless.provider} is on (and {@code pinless.enabled} is not off), as read when
   * the provider was made. A failure to load pinless's settings or grpc-netty makes it false and
   * is logged.
   */
  @Override
  protected boolean isAvailable() {
    return available;
  }

  /** 6, above grpc-netty's 5. */
  @Override
  protected int priority() {
    return PinlessChannelProvider.PRIORITY;
  }

  /** A builder for {@code port} that takes {@code useTransportSecurity}; h2c by default. */
  @Override
  protected ServerBuilder<?> builderForPort(int port) {
    return LegacyServerBuilder.ofPort(port);
  }

  /**
   * grpc-netty's builder with pinless credentials for {@code creds}, or an error naming what
   * pinless does not serve, so the registry tries the next provider.
   */
  @Override
  protected NewServerBuilderResult newServerBuilderForPort(int port, ServerCredentials creds) {
    if (!(creds instanceof InsecureServerCredentials || creds instanceof TlsServerCredentials)) {
      return NewServerBuilderResult.error(
          "pinless serves insecure and TLS credentials, not " + creds.getClass().getName());
    }
    try {
      return NewServerBuilderResult.serverBuilder(
          NettyBuilders.server(port, PinlessServerCredentials.from(creds)));
    } catch (IllegalArgumentException e) {
      return NewServerBuilderResult.error("pinless: " + e.getMessage());
    }
  }
}
