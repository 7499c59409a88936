package io.pinless.grpc;

import io.grpc.Attributes;
import io.grpc.ChannelCredentials;
import io.grpc.SecurityLevel;
import io.grpc.ServerCredentials;
import io.grpc.internal.GrpcAttributes;
import io.grpc.internal.ObjectPool;
import io.grpc.netty.GrpcHttp2ConnectionHandler;
import io.grpc.netty.InternalNettyChannelCredentials;
import io.grpc.netty.InternalNettyServerCredentials;
import io.grpc.netty.InternalProtocolNegotiator;
import io.grpc.netty.InternalProtocolNegotiationEvent;
import io.grpc.netty.InternalProtocolNegotiators;
import io.grpc.netty.ProtocolNegotiationEvent;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.http2.Http2Settings;
import io.netty.util.AsciiString;
import io.pinless.Settings;
import io.pinless.alts.AltsRecordCodec;
import io.pinless.alts.AltsRecordDecoder;
import io.pinless.alts.handshake.AltsHandshakeHandler;
import io.pinless.alts.handshake.AltsHandshakeResult;
import io.pinless.http2.Http2FrameSlicer;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadOnReadyHandler;
import java.util.List;
import java.util.concurrent.Executor;

/**
 * The one class that touches grpc-netty's {@code @Internal} negotiator API: it turns the pinless
 * pipeline into {@code ChannelCredentials} and {@code ServerCredentials} the way grpc-alts builds
 * its own. Once a connection is active, the negotiation handler puts {@link ReadOnReadyHandler}
 * at the head of the pipeline and {@link Http2FrameSlicer} in front of grpc-netty's handler,
 * switches that handler's cumulator to {@code COMPOSITE_CUMULATOR} (the slicer hands it whole
 * frames, so it never cumulates), and hands over to grpc-netty. Then it has grpc-netty's encoder
 * send a second SETTINGS frame with the larger SETTINGS_MAX_FRAME_SIZE pinless advertises
 * (grpc-netty has no option for it): the encoder queues it as sent, and grpc-netty's decoder
 * applies it to its frame reader when the peer acknowledges it, as it does its initial settings.
 * The slicer takes the larger size from the start, as a peer may use a setting once it has
 * received it: before the acknowledgement, grpc-netty's reader answers a frame above 16 KiB that
 * reaches it whole with FRAME_SIZE_ERROR, while a DATA frame that reads cut reaches it in pieces
 * it accepts.
 */
final class NettyNegotiators {
  /** What the connection runs under the HTTP/2 layer. */
  enum Security {
    /** h2c. */
    NONE
  }

  /** How an ALTS connection is secured; null fields are not allowed. */
  record AltsOptions(String handshakerAddress, List<String> targetServiceAccounts,
      long handshakeTimeoutMillis) {}

  private static final AsciiString HTTP = AsciiString.of("http");
  private static final AsciiString HTTPS = AsciiString.of("https");
  /** The port a plaintext target without one gets, as in grpc-netty. */
  private static final int DEFAULT_PLAINTEXT_PORT = 80;
  /** The port an ALTS target without one gets, as in grpc-alts. */
  private static final int DEFAULT_ALTS_PORT = 443;

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
    return InternalNettyChannelCredentials.create(new ClientFactory(null));
  }

  /** With {@code enabled} false: grpc-netty's stock plaintext negotiator. */
  static ServerCredentials serverCredentials(Security security, boolean enabled) {
    if (!enabled) {
      return InternalNettyServerCredentials.create(InternalProtocolNegotiators.serverPlaintext());
    }
    return InternalNettyServerCredentials.create(new ServerFactory(null));
  }

  /** ALTS with the pinless pipeline (there is no stock ALTS at runtime to roll back to). */
  static ChannelCredentials altsClientCredentials(AltsOptions alts) {
    return InternalNettyChannelCredentials.create(new ClientFactory(alts));
  }

  /** ALTS with the pinless pipeline. */
  static ServerCredentials altsServerCredentials(AltsOptions alts) {
    return InternalNettyServerCredentials.create(new ServerFactory(alts));
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
    /** Null for plaintext. */
    private final AltsOptions alts;

    ClientFactory(AltsOptions alts) {
      this.alts = alts;
    }

    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator() {
      return new Negotiator(false, alts);
    }

    @Override
    public int getDefaultPort() {
      return alts == null ? DEFAULT_PLAINTEXT_PORT : DEFAULT_ALTS_PORT;
    }
  }

  private static final class ServerFactory implements InternalProtocolNegotiator.ServerFactory {
    /** Null for plaintext. */
    private final AltsOptions alts;

    ServerFactory(AltsOptions alts) {
      this.alts = alts;
    }

    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator(
        ObjectPool<? extends Executor> offloadExecutorPool) {
      return new Negotiator(true, alts);
    }
  }

  private static final class Negotiator implements InternalProtocolNegotiator.ProtocolNegotiator {
    private final boolean server;
    private final AltsOptions alts;

    Negotiator(boolean server, AltsOptions alts) {
      this.server = server;
      this.alts = alts;
    }

    @Override
    public AsciiString scheme() {
      return alts == null ? HTTP : HTTPS;
    }

    @Override
    public ChannelHandler newHandler(GrpcHttp2ConnectionHandler grpcHandler) {
      ChannelHandler next = InternalProtocolNegotiators.grpcNegotiationHandler(grpcHandler);
      ChannelHandler install = new InstallHandler(next, grpcHandler, server, alts);
      return InternalProtocolNegotiators.waitUntilActiveHandler(
          install, grpcHandler.getNegotiationLogger());
    }

    @Override
    public void close() {}
  }

  /**
   * Installs the pinless handlers once the connection is active; for ALTS, waits for the
   * handshake; then hands over to gRPC.
   */
  private static final class InstallHandler
      extends InternalProtocolNegotiators.ProtocolNegotiationHandler {
    private final GrpcHttp2ConnectionHandler grpcHandler;
    private final boolean server;
    private final AltsOptions alts;
    private ReadBudget budget;
    /** The connection's read handler, which runs the slicer (plaintext) or the record codec. */
    private ReadOnReadyHandler reads;

    InstallHandler(
        ChannelHandler next, GrpcHttp2ConnectionHandler grpcHandler, boolean server,
        AltsOptions alts) {
      super(next, "pinless", grpcHandler.getNegotiationLogger());
      this.grpcHandler = grpcHandler;
      this.server = server;
      this.alts = alts;
    }

    @Override
    protected void protocolNegotiationEventTriggered(ChannelHandlerContext ctx) {
      budget = new ReadBudget(Settings.readBudgetBytes());
      reads = new ReadOnReadyHandler(budget,
          Settings.holdWhileUnwritable(),
          alts == null ? ReadOnReadyHandler.MAX_READ_BYTES : ReadOnReadyHandler.ALTS_READ_BYTES);
      ctx.pipeline().addFirst("pinless-read", reads);
      INSTALLED.increment();
      if (alts == null) {
        // Plaintext: the slicer reads straight from the socket's buffers, with their headroom,
        // inside the read handler's entry.
        reads.host(newSlicer());
        fireProtocolNegotiationEvent(ctx);
        advertiseFrameSize(ctx);
        return;
      }
      ctx.pipeline().addBefore(ctx.name(), "pinless-alts-handshake",
          new AltsHandshakeHandler(!server, alts.handshakerAddress(),
              alts.targetServiceAccounts(), alts.handshakeTimeoutMillis()));
    }

    @Override
    protected void userEventTriggered0(ChannelHandlerContext ctx, Object evt) throws Exception {
      if (!(evt instanceof AltsHandshakeResult)) {
        super.userEventTriggered0(ctx, evt);
        return;
      }
      // The record decoder leaves the same headroom in its plaintext as the read handler does.
      // The slicer runs inside the decoder (hosted by the read handler, or in a record codec's
      // entry): no pipeline entry of its own.
      if (reads.hosted() instanceof AltsRecordDecoder) {
        ((AltsRecordDecoder) reads.hosted()).sliceFrames(newSlicer());
      } else {
        AltsRecordCodec records = ctx.pipeline().get(AltsRecordCodec.class);
        if (records == null) {
          throw new IllegalStateException("the ALTS handshake ended without a record decoder");
        }
        records.sliceFrames(newSlicer());
      }
      ProtocolNegotiationEvent event = getProtocolNegotiationEvent();
      Attributes attrs =
          InternalProtocolNegotiationEvent.getAttributes(event).toBuilder()
              .set(GrpcAttributes.ATTR_SECURITY_LEVEL, SecurityLevel.PRIVACY_AND_INTEGRITY)
              .set(PinlessAltsContext.ATTR, PinlessAltsContext.of((AltsHandshakeResult) evt))
              .build();
      replaceProtocolNegotiationEvent(InternalProtocolNegotiationEvent.withAttributes(event, attrs));
      fireProtocolNegotiationEvent(ctx);
      advertiseFrameSize(ctx);
    }

    /** Advertises {@link Settings#http2MaxFrameSize()} unless it is HTTP/2's default. */
    private void advertiseFrameSize(ChannelHandlerContext ctx) {
      int size = Settings.http2MaxFrameSize();
      ChannelHandlerContext grpcCtx = ctx.pipeline().context(grpcHandler);
      if (size == Http2FrameSlicer.DEFAULT_MAX_FRAME_SIZE || grpcCtx == null) {
        return;
      }
      grpcHandler.encoder().writeSettings(
          grpcCtx, new Http2Settings().maxFrameSize(size), grpcCtx.newPromise());
      grpcCtx.flush();
    }

    /**
     * A slicer of frames read with headroom (from the read handler or the record decoder); gRPC's
     * handler, which then only ever gets whole frames, is set to use what it is given as it is.
     */
    private Http2FrameSlicer newSlicer() {
      grpcHandler.setCumulator(ByteToMessageDecoder.COMPOSITE_CUMULATOR);
      return new Http2FrameSlicer(server, Settings.http2MaxFrameSize(), budget, true);
    }
  }
}
