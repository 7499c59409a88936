package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerCredentials;
import io.grpc.ServerProvider;
import io.grpc.ServerProvider.NewServerBuilderResult;
import io.grpc.TlsServerCredentials;
import io.grpc.alts.AltsServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.TestCertificates;
import java.io.ByteArrayInputStream;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The server provider in this JVM, where {@code pinless.provider} is off, and made switched on by
 * hand. {@link ProviderSwitchTest} runs gRPC's registries with the switch on.
 */
class PinlessServerProviderTest {
  /** Credentials no provider knows. */
  private static final class MadeUpCredentials extends ServerCredentials {}

  @Test
  void isOffByDefaultAndGrpcNettyServes() throws Exception {
    assertFalse(new PinlessServerProvider().isAvailable());
    // grpc-alts brings grpc-netty-shaded: either grpc-netty is stock here.
    assertEquals("NettyServerProvider", ServerProvider.provider().getClass().getSimpleName());
    ServerBuilder<?> builder =
        Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create());
    assertEquals("NettyServerBuilder", builder.getClass().getSimpleName());
    long installed = Metric.CONNECTIONS_INSTALLED.value();
    Server server = builder.addService(TestService.definition()).build().start();
    ManagedChannel channel = NettyChannelBuilder
        .forTarget("127.0.0.1:" + server.getPort(), InsecureChannelCredentials.create())
        .build();
    try {
      byte[] request = message(1000, 3);
      assertArrayEquals(request, ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, CallOptions.DEFAULT, request));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertEquals(installed, Metric.CONNECTIONS_INSTALLED.value(), "no pinless pipeline");
  }

  @Test
  void switchedOnItRanksAboveGrpcNetty() {
    PinlessServerProvider provider = new PinlessServerProvider(true);
    assertTrue(provider.isAvailable());
    assertTrue(provider.priority() > 5, "grpc-netty's priority is 5");
    assertFalse(new PinlessServerProvider(false).isAvailable());
  }

  @Test
  void servesInsecureAndTlsCredentials() throws Exception {
    PinlessServerProvider provider = new PinlessServerProvider(true);
    for (ServerCredentials creds : List.of(InsecureServerCredentials.create(),
        TlsServerCredentials.create(Pem.certificate(TestCertificates.SERVER),
            Pem.key(TestCertificates.SERVER)))) {
      NewServerBuilderResult result = provider.newServerBuilderForPort(0, creds);
      assertNull(result.getError(), creds.toString());
      assertInstanceOf(NettyServerBuilder.class, result.getServerBuilder());
    }
  }

  @Test
  void declinesCredentialsItCannotServe() {
    PinlessServerProvider provider = new PinlessServerProvider(true);
    for (ServerCredentials creds : List.of(new MadeUpCredentials(), AltsServerCredentials.create(),
        PinlessServerCredentials.insecure())) {
      NewServerBuilderResult result = provider.newServerBuilderForPort(0, creds);
      assertNull(result.getServerBuilder(), creds.toString());
      assertTrue(result.getError().startsWith("pinless serves insecure and TLS credentials, not "),
          result.getError());
    }
  }

  @Test
  void legacyBuilderRefusesAKeyThatDoesNotLoad() {
    ServerBuilder<?> builder = new PinlessServerProvider(true).builderForPort(0);
    assertThrows(IllegalArgumentException.class, () -> builder.useTransportSecurity(
        new ByteArrayInputStream(new byte[] {'x'}), new ByteArrayInputStream(new byte[] {'y'})));
  }
}
