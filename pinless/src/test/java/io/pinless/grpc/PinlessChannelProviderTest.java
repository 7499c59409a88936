package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallCredentials;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ChoiceChannelCredentials;
import io.grpc.CompositeChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelProvider;
import io.grpc.ManagedChannelProvider.NewChannelBuilderResult;
import io.grpc.Metadata;
import io.grpc.NameResolverRegistry;
import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.TlsChannelCredentials;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyChannelProvider;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.pinless.PinlessMetrics.Metric;
import java.io.ByteArrayInputStream;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The channel provider in this JVM, where {@code pinless.provider} is off, and made switched on
 * by hand. {@link ProviderSwitchTest} runs gRPC's registries with the switch on.
 */
class PinlessChannelProviderTest {
  private static final String TARGET = "localhost:443";

  /** Call credentials that add nothing. */
  private static final CallCredentials NO_CALL_CREDENTIALS = new CallCredentials() {
    @Override
    public void applyRequestMetadata(
        RequestInfo info, Executor executor, MetadataApplier applier) {
      applier.apply(new Metadata());
    }
  };

  /** Credentials no provider knows. */
  private static final class MadeUpCredentials extends ChannelCredentials {
    @Override
    public ChannelCredentials withoutBearerTokens() {
      return this;
    }
  }

  @Test
  void isOffByDefaultAndGrpcNettyServesTheLegacyBuilders() throws Exception {
    assertFalse(new PinlessChannelProvider().isAvailable());
    // grpc-alts brings grpc-netty-shaded: either grpc-netty is stock here.
    assertEquals("NettyChannelProvider",
        ManagedChannelProvider.provider().getClass().getSimpleName());
    long installed = Metric.CONNECTIONS_INSTALLED.value();
    Server server = ServerBuilder.forPort(0).addService(TestService.definition()).build().start();
    ManagedChannelBuilder<?> builder =
        ManagedChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext();
    assertEquals("NettyChannelBuilder", builder.getClass().getSimpleName());
    ManagedChannel channel = builder.build();
    try {
      byte[] request = message(1000, 1);
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
    PinlessChannelProvider provider = new PinlessChannelProvider(true);
    assertTrue(provider.isAvailable());
    assertTrue(provider.priority() > new NettyChannelProvider().priority());
    assertEquals(List.of(InetSocketAddress.class), provider.getSupportedSocketAddressTypes());
  }

  @Test
  void switchedOffItIsNotAvailable() {
    assertFalse(new PinlessChannelProvider(false).isAvailable());
  }

  @Test
  void servesInsecureTlsAndCompositeCredentials() {
    PinlessChannelProvider provider = new PinlessChannelProvider(true);
    for (ChannelCredentials creds : List.of(
        InsecureChannelCredentials.create(),
        TlsChannelCredentials.create(),
        CompositeChannelCredentials.create(TlsChannelCredentials.create(), NO_CALL_CREDENTIALS))) {
      NewChannelBuilderResult result = provider.newChannelBuilder(TARGET, creds);
      assertNull(result.getError(), creds.toString());
      assertInstanceOf(NettyChannelBuilder.class, result.getChannelBuilder());
    }
  }

  @Test
  void declinesCredentialsItCannotServe() {
    PinlessChannelProvider provider = new PinlessChannelProvider(true);
    for (ChannelCredentials creds : List.of(
        new MadeUpCredentials(),
        AltsChannelCredentials.create(),
        CompositeChannelCredentials.create(AltsChannelCredentials.create(), NO_CALL_CREDENTIALS),
        ChoiceChannelCredentials.create(InsecureChannelCredentials.create()),
        PinlessChannelCredentials.insecure())) {
      NewChannelBuilderResult result = provider.newChannelBuilder(TARGET, creds);
      assertNull(result.getChannelBuilder(), creds.toString());
      assertTrue(result.getError().startsWith("pinless serves insecure and TLS credentials, not "),
          result.getError());
    }
  }

  @Test
  void declinesTlsCredentialsWhoseKeyDoesNotLoad() throws Exception {
    ChannelCredentials creds = TlsChannelCredentials.newBuilder()
        .keyManager(new ByteArrayInputStream(new byte[] {'x'}),
            new ByteArrayInputStream(new byte[] {'y'}))
        .build();
    NewChannelBuilderResult result =
        new PinlessChannelProvider(true).newChannelBuilder(TARGET, creds);
    assertNull(result.getChannelBuilder());
    assertTrue(result.getError().startsWith("pinless: "), result.getError());
  }

  @Test
  void leavesOtherNameResolverRegistriesToGrpcNetty() {
    PinlessChannelProvider provider = new PinlessChannelProvider(true);
    ChannelCredentials creds = InsecureChannelCredentials.create();
    assertNotNull(provider.newChannelBuilder(
        TARGET, creds, NameResolverRegistry.getDefaultRegistry(), null).getChannelBuilder());
    NewChannelBuilderResult result =
        provider.newChannelBuilder(TARGET, creds, new NameResolverRegistry(), null);
    assertNull(result.getChannelBuilder());
    assertEquals("pinless takes gRPC's default name resolvers only", result.getError());
  }

  @Test
  void legacyBuilderTakesEitherSecurityModeAndBuildsThePinlessPipeline() throws Exception {
    PinlessChannelProvider provider = new PinlessChannelProvider(true);
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(TestService.definition())
        .build()
        .start();
    long installed = Metric.CONNECTIONS_INSTALLED.value();
    ManagedChannel channel = provider.builderForTarget("127.0.0.1:" + server.getPort())
        .useTransportSecurity()
        .usePlaintext()
        .build();
    try {
      byte[] request = message(70000, 2);
      assertArrayEquals(request, ClientCalls.blockingUnaryCall(
          channel, TestService.UNARY, CallOptions.DEFAULT, request));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    assertEquals(installed + 1, Metric.CONNECTIONS_INSTALLED.value(), "the client's pipeline");
  }
}
