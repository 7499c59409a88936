package io.pinless.grpc;

import io.grpc.ChannelCredentials;

/**
 * Client credentials for grpc-java's Netty transport that install the pinless read path. Use them
 * with {@code Grpc.newChannelBuilder(target, creds)} or {@code NettyChannelBuilder.forAddress(host,
 * port, creds)}, with any event loop (NIO, epoll, io_uring) and channel type the builder is given,
 * Unix domain sockets included. With {@code -Dpinless.enabled=false} (or {@code
 * PINLESS_ENABLED=false}) the same credentials build grpc-netty's stock pipeline.
 */
public final class PinlessChannelCredentials {
  private PinlessChannelCredentials() {}

  /** Plaintext HTTP/2 (h2c) with the pinless read path. */
  public static ChannelCredentials insecure() {
    return NettyNegotiators.clientCredentials(NettyNegotiators.Security.NONE);
  }
}
