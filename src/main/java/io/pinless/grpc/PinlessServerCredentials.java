package io.pinless.grpc;

import io.grpc.ServerCredentials;

/**
 * Server credentials for grpc-java's Netty transport that install the pinless read path. Use them
 * with {@code NettyServerBuilder.forPort(port, creds)}, {@code NettyServerBuilder.forAddress(addr,
 * creds)} or {@code Grpc.newServerBuilderForPort(port, creds)}. With {@code
 * -Dpinless.enabled=false} (or {@code PINLESS_ENABLED=false}) they build the stock pipeline.
 */
public final class PinlessServerCredentials {
  private PinlessServerCredentials() {}

  /** Plaintext HTTP/2 (h2c) with the pinless read path. */
  public static ServerCredentials insecure() {
    return NettyNegotiators.serverCredentials(NettyNegotiators.Security.NONE);
  }
}
