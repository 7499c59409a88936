package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerCredentials;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.stub.ClientCalls;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * pinless credentials carry grpc-netty's (unshaded) negotiators, which grpc-netty-shaded cannot
 * run. Its builders reject them with a message of its own that names only the credentials' class
 * ({@code ProtocolNegotiators.from}: "Unsupported credential type: " + class name, in 1.76 as in
 * 1.85); the README and the credentials' Javadoc quote that message and say what to use instead.
 * {@code Grpc.newChannelBuilder} and {@code Grpc.newServerBuilderForPort} skip the shaded provider
 * and reach grpc-netty's.
 */
class ShadedBuildersTest {
  @Test
  void shadedChannelBuilderRejectsPinlessCredentialsNamingTheirClass() throws Exception {
    ChannelCredentials[] all = {
      PinlessChannelCredentials.insecure(),
      PinlessChannelCredentials.tls(GrpcSslContexts.forClient().build()),
    };
    for (ChannelCredentials creds : all) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder.forTarget(
              "localhost:443", creds));
      assertEquals("Unsupported credential type: io.grpc.netty.NettyChannelCredentials",
          e.getMessage());
    }
  }

  @Test
  void shadedServerBuilderRejectsPinlessCredentialsNamingTheirClass() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder.forPort(
            0, PinlessServerCredentials.insecure()));
    assertEquals("Unsupported credential type: io.grpc.netty.NettyServerCredentials",
        e.getMessage());
  }

  @Test
  void grpcBuildersReachGrpcNettyWithShadedPresent() throws Exception {
    ServerCredentials serverCreds = PinlessServerCredentials.insecure();
    ServerBuilder<?> serverBuilder = Grpc.newServerBuilderForPort(0, serverCreds);
    assertInstanceOf(io.grpc.netty.NettyServerBuilder.class, serverBuilder);
    Server server = serverBuilder.addService(TestService.definition()).build().start();
    ManagedChannel channel = null;
    try {
      ManagedChannelBuilder<?> channelBuilder = Grpc.newChannelBuilder(
          "localhost:" + server.getPort(), PinlessChannelCredentials.insecure());
      assertInstanceOf(io.grpc.netty.NettyChannelBuilder.class, channelBuilder);
      channel = channelBuilder.build();
      byte[] request = TestService.message(100, 1);
      assertArrayEquals(request, ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, io.grpc.CallOptions.DEFAULT, request));
    } finally {
      if (channel != null) {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }
}
