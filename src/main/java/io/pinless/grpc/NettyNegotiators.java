package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.grpc.internal.ObjectPool;
import io.grpc.netty.GrpcHttp2ConnectionHandler;
import io.grpc.netty.InternalNettyChannelCredentials;
import io.grpc.netty.InternalNettyServerCredentials;
import io.grpc.netty.InternalProtocolNegotiator;
import io.grpc.netty.InternalProtocolNegotiators;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.util.AsciiString;
import io.pinless.Settings;
import io.pinless.http2.Http2FrameSlicer;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadOnReadyHandler;
import java.util.concurrent.Executor;

/**
 * The one class that touches grpc-netty's {@code @Internal} negotiator API: it turns the pinless
 * pipeline into {@code ChannelCredentials} and {@code ServerCredentials} the way grpc-alts builds
 * its own. Once a connection is active, the negotiation handler puts {@link ReadOnReadyHandler}
 * at the head of the pipeline and {@link Http2FrameSlicer} in front of grpc-netty's handler,
 * switches that handler's cumulator to {@code COMPOSITE_CUMULATOR} (the slicer hands it whole
 * frames, so it never cumulates), and hands over to grpc-netty.
 */
final class NettyNegotiators {
  /** What the connection runs under the HTTP/2 layer. */
  enum Security {
    /** h2c. */
    NONE
  }

  private static final AsciiString HTTP = AsciiString.of("http");
  /** The port a plaintext target without one gets, as in grpc-netty. */
  private static final int DEFAULT_PLAINTEXT_PORT = 80;

  /** Connections whose pipeline got the pinless handlers, process-wide. */
  private static final java.util.concurrent.atomic.LongAdder INSTALLED =
      new java.util.concurrent.atomic.LongAdder();

  private NettyNegotiators() {}

  /** How many connections got the pinless handlers in this process. */
  static long installed() {
    return INSTALLED.sum();
  }

  static ChannelCredentials clientCredentials(Security security) {
    return clientCredentials(security, Settings.enabled());
  }

  static ServerCredentials serverCredentials(Security security) {
    return serverCredentials(security, Settings.enabled());
  }

  /** With {@code enabled} false: grpc-netty's stock plaintext negotiator. */
  static ChannelCredentials clientCredentials(Security security, boolean enabled) {
    if (!enabled) {
      return InternalNettyChannelCredentials.create(new StockClientFactory());
    }
    return InternalNettyChannelCredentials.create(new ClientFactory(security));
  }

  /** With {@code enabled} false: grpc-netty's stock plaintext negotiator. */
  static ServerCredentials serverCredentials(Security security, boolean enabled) {
    if (!enabled) {
      return InternalNettyServerCredentials.create(InternalProtocolNegotiators.serverPlaintext());
    }
    return InternalNettyServerCredentials.create(new ServerFactory(security));
  }

  private static final class StockClientFactory implements InternalProtocolNegotiator.ClientFactory {
    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator() {
      return InternalProtocolNegotiators.plaintext();
    }

    @Override
    public int getDefaultPort() {
      return DEFAULT_PLAINTEXT_PORT;
    }
  }

  private static final class ClientFactory implements InternalProtocolNegotiator.ClientFactory {
    private final Security security;

    ClientFactory(Security security) {
      this.security = security;
    }

    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator() {
      return new Negotiator(false, security);
    }

    @Override
    public int getDefaultPort() {
      return DEFAULT_PLAINTEXT_PORT;
    }
  }

  private static final class ServerFactory implements InternalProtocolNegotiator.ServerFactory {
    private final Security security;

    ServerFactory(Security security) {
      this.security = security;
    }

    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator(
        ObjectPool<? extends Executor> offloadExecutorPool) {
      return new Negotiator(true, security);
    }
  }

  private static final class Negotiator implements InternalProtocolNegotiator.ProtocolNegotiator {
    private final boolean server;
    private final Security security;

    Negotiator(boolean server, Security security) {
      this.server = server;
      this.security = security;
    }

    @Override
    public AsciiString scheme() {
      return HTTP;
    }

    @Override
    public ChannelHandler newHandler(GrpcHttp2ConnectionHandler grpcHandler) {
      ChannelHandler next = InternalProtocolNegotiators.grpcNegotiationHandler(grpcHandler);
      ChannelHandler install = new InstallHandler(next, grpcHandler, server);
      return InternalProtocolNegotiators.waitUntilActiveHandler(
          install, grpcHandler.getNegotiationLogger());
    }

    @Override
    public void close() {}
  }

  /** Installs the pinless handlers once the connection is active, then hands over to gRPC. */
  private static final class InstallHandler
      extends InternalProtocolNegotiators.ProtocolNegotiationHandler {
    private final GrpcHttp2ConnectionHandler grpcHandler;
    private final boolean server;

    InstallHandler(ChannelHandler next, GrpcHttp2ConnectionHandler grpcHandler, boolean server) {
      super(next, "pinless", grpcHandler.getNegotiationLogger());
      this.grpcHandler = grpcHandler;
      this.server = server;
    }

    @Override
    protected void protocolNegotiationEventTriggered(ChannelHandlerContext ctx) {
      ReadBudget budget = new ReadBudget(Settings.readBudgetBytes());
      ctx.pipeline().addFirst(
          "pinless-read", new ReadOnReadyHandler(budget, Settings.holdWhileUnwritable()));
      ctx.pipeline().addBefore(
          ctx.name(),
          "pinless-http2-slicer",
          new Http2FrameSlicer(server, Http2FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, true));
      grpcHandler.setCumulator(ByteToMessageDecoder.COMPOSITE_CUMULATOR);
      INSTALLED.increment();
      fireProtocolNegotiationEvent(ctx);
    }
  }
}
