package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelProvider;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerProvider;
import io.grpc.stub.ClientCalls;
import io.pinless.PinlessMetrics.Metric;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * gRPC's registries with {@code pinless.provider=true} and the rollback switch {@code
 * pinless.enabled=false}: the providers are off and stock grpc-netty serves. {@link
 * ProviderSwitchTest} runs this class in a JVM of its own.
 */
@EnabledIfSystemProperty(named = "pinless.enabled", matches = "false")
class RolledBackRegistryCalls {
  @Test
  void grpcNettyServesBothRegistries() throws Exception {
    assertFalse(new PinlessChannelProvider().isAvailable());
    assertFalse(new PinlessServerProvider().isAvailable());
    // grpc-alts brings grpc-netty-shaded: either grpc-netty is stock here.
    assertEquals("NettyChannelProvider",
        ManagedChannelProvider.provider().getClass().getSimpleName());
    assertEquals("NettyServerProvider", ServerProvider.provider().getClass().getSimpleName());

    long installed = Metric.CONNECTIONS_INSTALLED.value();
    Server server = ServerBuilder.forPort(0).addService(TestService.definition()).build().start();
    ManagedChannelBuilder<?> builder =
        ManagedChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext();
    assertEquals("NettyChannelBuilder", builder.getClass().getSimpleName());
    ManagedChannel channel = builder.build();
    try {
      byte[] request = message(1000, 4);
      assertArrayEquals(request, ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, CallOptions.DEFAULT, request));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertEquals(installed, Metric.CONNECTIONS_INSTALLED.value(), "no pinless pipeline");
  }
}
