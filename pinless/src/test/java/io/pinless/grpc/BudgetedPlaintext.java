package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.grpc.Status;
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
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.util.AsciiString;
import io.pinless.connection.ConnectionHandler;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadPolicy;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.Semaphore;

/**
 * Plaintext pinless credentials whose connections read against a read budget of a given size,
 * built as the production negotiator builds them but for the budget (which production takes from
 * {@code pinless.read.budgetBytes}). Every connection handler made is kept in {@link #handlers}.
 */
final class BudgetedPlaintext {
  private static final AsciiString HTTP = AsciiString.of("http");

  final long budgetBytes;
  final Queue<ConnectionHandler> handlers = new ConcurrentLinkedQueue<>();
  /** Counts the PINGs (not their acknowledgements) the connections receive. */
  final Semaphore pings = new Semaphore(0);

  BudgetedPlaintext(long budgetBytes) {
    this.budgetBytes = budgetBytes;
  }

  ServerCredentials server() {
    return InternalNettyServerCredentials.create(
        (InternalProtocolNegotiator.ServerFactory) this::serverNegotiator);
  }

  ChannelCredentials client() {
    return InternalNettyChannelCredentials.create(new InternalProtocolNegotiator.ClientFactory() {
      @Override
      public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator() {
        return new Negotiator(false);
      }

      @Override
      public int getDefaultPort() {
        return 80;
      }
    });
  }

  private InternalProtocolNegotiator.ProtocolNegotiator serverNegotiator(
      ObjectPool<? extends Executor> offload) {
    return new Negotiator(true);
  }

  private final class Negotiator implements InternalProtocolNegotiator.ProtocolNegotiator {
    private final boolean server;

    Negotiator(boolean server) {
      this.server = server;
    }

    @Override
    public AsciiString scheme() {
      return HTTP;
    }

    @Override
    public ChannelHandler newHandler(GrpcHttp2ConnectionHandler grpcHandler) {
      ChannelHandler next = InternalProtocolNegotiators.grpcNegotiationHandler(grpcHandler);
      return InternalProtocolNegotiators.waitUntilActiveHandler(
          new Install(next, grpcHandler, server), grpcHandler.getNegotiationLogger());
    }

    @Override
    public void close() {}
  }

  private final class Install extends InternalProtocolNegotiators.ProtocolNegotiationHandler {
    private final GrpcHttp2ConnectionHandler grpcHandler;
    private final boolean server;

    Install(ChannelHandler next, GrpcHttp2ConnectionHandler grpcHandler, boolean server) {
      super(next, "pinless-test", grpcHandler.getNegotiationLogger());
      this.grpcHandler = grpcHandler;
      this.server = server;
    }

    @Override
    protected void protocolNegotiationEventTriggered(ChannelHandlerContext ctx) {
      ReadBudget budget = new ReadBudget(budgetBytes);
      ConnectionHandler connection =
          new ConnectionHandler(budget, false, ReadPolicy.MAX_READ_BYTES);
      handlers.add(connection);
      ctx.pipeline().addFirst("pinless", connection);
      ctx.pipeline().addAfter("pinless", "pinless-test-pings", new PingCounter());
      ProtocolNegotiationEvent event = getProtocolNegotiationEvent();
      replaceProtocolNegotiationEvent(InternalProtocolNegotiationEvent.withAttributes(event,
          InternalProtocolNegotiationEvent.getAttributes(event).toBuilder()
              .set(GrpcAttributes.ATTR_AUTHORITY_VERIFIER, authority -> Status.OK)
              .build()));
      grpcHandler.setCumulator(ByteToMessageDecoder.COMPOSITE_CUMULATOR);
      connection.install(null, new FrameSlicer(
          server, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, true));
      fireProtocolNegotiationEvent(ctx);
    }
  }

  /**
   * Counts the PING frames in what the frame slicer hands on: whole frames, so every buffer
   * starts at a frame (after a server's 24-byte client preface).
   */
  private final class PingCounter extends ChannelInboundHandlerAdapter {
    private boolean first = true;

    /** @param msg owned: passed on */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      if (msg instanceof ByteBuf) {
        ByteBuf frames = (ByteBuf) msg;
        int pos = frames.readerIndex();
        if (first && frames.readableBytes() >= 24 && frames.getByte(pos) == 'P') {
          pos += 24;
        }
        first = false;
        while (frames.writerIndex() - pos >= 9) {
          if (frames.getUnsignedByte(pos + 3) == 0x6 && (frames.getByte(pos + 4) & 0x1) == 0) {
            pings.release();
          }
          pos += 9 + frames.getUnsignedMedium(pos);
        }
      }
      ctx.fireChannelRead(msg);
    }
  }
}
