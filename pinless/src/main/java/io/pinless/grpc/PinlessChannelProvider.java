package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.CompositeChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelProvider;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.TlsChannelCredentials;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Collection;
import java.util.List;

/**
 * pinless as gRPC's channel provider, so that {@code ManagedChannelBuilder.forAddress}, {@code
 * forTarget} and {@code Grpc.newChannelBuilder} build channels with the pinless read path and no
 * code change. gRPC's service loader finds it in the pinless jar. It is available only with
 * {@code -Dpinless.provider=true} (or {@code PINLESS_PROVIDER=true}), and never with {@code
 * pinless.enabled=false}: then grpc-netty's own provider serves, as without pinless.
 *
 * <p>It serves insecure and TLS credentials ({@code TlsChannelCredentials}), also inside {@code
 * CompositeChannelCredentials}, whose call credentials still apply. It declines others (ALTS,
 * Google default, xDS, choice, unknown ones), and the registry falls through to the next provider,
 * grpc-netty's. The builders of {@code forAddress} and {@code forTarget} take {@code
 * usePlaintext()} and {@code useTransportSecurity()}; TLS, with the JDK's default trust store, is
 * their default, as grpc's.
 */
public final class PinlessChannelProvider extends ManagedChannelProvider {
  /** Above grpc-netty's and grpc-netty-shaded's 5, so registries ask pinless first. */
  static final int PRIORITY = 6;

  private final boolean available;

  /** The provider as gRPC's service loader makes it: on as {@code pinless.provider} says. */
  public PinlessChannelProvider() {
    this(ProviderSwitch.read());
  }

  /** A provider switched on or off whatever the settings say. */
  PinlessChannelProvider(boolean on) {
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
    return PRIORITY;
  }

  /** A builder for {@code host:port} that takes {@code usePlaintext()}; TLS by default. */
  @Override
  protected ManagedChannelBuilder<?> builderForAddress(String name, int port) {
    return LegacyChannelBuilder.ofAddress(name, port);
  }

  /** A builder for {@code target} that takes {@code usePlaintext()}; TLS by default. */
  @Override
  protected ManagedChannelBuilder<?> builderForTarget(String target) {
    return LegacyChannelBuilder.ofTarget(target);
  }

  /**
   * grpc-netty's builder with pinless credentials for {@code creds}, or an error naming what
   * pinless does not serve, so the registry tries the next provider.
   */
  @Override
  protected NewChannelBuilderResult newChannelBuilder(String target, ChannelCredentials creds) {
    ChannelCredentials pinless;
    try {
      pinless = pinless(creds);
    } catch (IllegalArgumentException e) {
      return NewChannelBuilderResult.error("pinless: " + e.getMessage());
    }
    if (pinless == null) {
      return NewChannelBuilderResult.error(
          "pinless serves insecure and TLS credentials, not " + creds.getClass().getName());
    }
    return NewChannelBuilderResult.channelBuilder(NettyBuilders.channel(target, pinless));
  }

  /**
   * As {@link #newChannelBuilder(String, ChannelCredentials)} with gRPC's default name resolvers;
   * with others, declined, so grpc-netty's provider resolves with them. gRPC calls this from 1.83
   * on ({@code Grpc.newChannelBuilder(target, creds, registry)}); before, it is never called.
   */
  // No @Override: grpc-java 1.76 does not have the method.
  protected NewChannelBuilderResult newChannelBuilder(String target, ChannelCredentials creds,
      NameResolverRegistry nameResolverRegistry, NameResolverProvider nameResolverProvider) {
    if (nameResolverRegistry != null
        && nameResolverRegistry != NameResolverRegistry.getDefaultRegistry()) {
      return NewChannelBuilderResult.error("pinless takes gRPC's default name resolvers only");
    }
    return newChannelBuilder(target, creds);
  }

  /** IPv4 and IPv6 addresses, as grpc-netty's provider; Unix domain sockets fall through to it. */
  @Override
  protected Collection<Class<? extends SocketAddress>> getSupportedSocketAddressTypes() {
    return List.of(InetSocketAddress.class);
  }

  /**
   * The pinless credentials that serve {@code creds}, or null for credentials pinless declines.
   *
   * @throws IllegalArgumentException for TLS credentials pinless cannot serve ({@link
   *     PinlessChannelCredentials#from})
   */
  private static ChannelCredentials pinless(ChannelCredentials creds) {
    if (creds instanceof InsecureChannelCredentials || creds instanceof TlsChannelCredentials) {
      return PinlessChannelCredentials.from(creds);
    }
    if (creds instanceof CompositeChannelCredentials) {
      CompositeChannelCredentials composite = (CompositeChannelCredentials) creds;
      ChannelCredentials channel = pinless(composite.getChannelCredentials());
      return channel == null
          ? null
          : CompositeChannelCredentials.create(channel, composite.getCallCredentials());
    }
    return null;
  }
}
