package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ServerBuilder;
import io.grpc.ServerCredentials;
import io.grpc.netty.InternalNettyChannelBuilder;
import io.grpc.netty.InternalNettyChannelCredentials;
import io.grpc.netty.InternalNettyServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import java.util.List;

/**
 * The grpc-netty builders the transport providers hand out, with pinless credentials. Beside
 * {@link NettyNegotiators}, it is the one class that touches grpc-netty's {@code @Internal} API:
 * to give a builder made without credentials a negotiator, through accessors that are the same
 * from grpc-java 1.76 to 1.85. The providers reach grpc-netty only through here, so that loading
 * them needs no grpc-netty class.
 */
final class NettyBuilders {
  private NettyBuilders() {}

  /**
   * The grpc-netty classes this class calls, loaded.
   *
   * @throws LinkageError if grpc-netty is missing or lacks one of them
   */
  static List<Class<?>> classes() {
    return List.of(InternalNettyChannelBuilder.class, InternalNettyChannelCredentials.class,
        InternalNettyServerCredentials.class, NettyChannelBuilder.class, NettyServerBuilder.class);
  }

  /** grpc-netty's builder for {@code target} with {@code credentials}, as stock makes it. */
  static ManagedChannelBuilder<?> channel(String target, ChannelCredentials credentials) {
    return NettyChannelBuilder.forTarget(target, credentials);
  }

  /**
   * grpc-netty's builder for {@code port} with {@code credentials}, as stock makes it, that sheds
   * calls while the process is over its budget ({@link LoadShedding}).
   */
  static ServerBuilder<?> server(int port, ServerCredentials credentials) {
    return NettyServerBuilder.forPort(port, credentials).intercept(LoadShedding.interceptor());
  }

  /**
   * Has {@code builder} (made by {@code NettyChannelBuilder.forTarget(target)}, without
   * credentials) negotiate as {@code credentials} do, whatever was set on it before.
   *
   * @param credentials pinless channel credentials ({@link PinlessChannelCredentials})
   */
  static void use(NettyChannelBuilder builder, ChannelCredentials credentials) {
    InternalNettyChannelBuilder.setProtocolNegotiatorFactory(
        builder, InternalNettyChannelCredentials.toNegotiator(credentials));
  }

  /**
   * Has {@code builder} (made by {@code NettyServerBuilder.forPort(port)}, without credentials)
   * negotiate as {@code credentials} do, whatever was set on it before.
   *
   * @param credentials pinless server credentials ({@link PinlessServerCredentials})
   */
  static void use(NettyServerBuilder builder, ServerCredentials credentials) {
    // No offload executor: pinless runs TLS handshake tasks on its own pool.
    builder.protocolNegotiator(
        InternalNettyServerCredentials.toNegotiator(credentials).newNegotiator(null));
  }
}
