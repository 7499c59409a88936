package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.pinless.read.ReadBudget;

/**
 * A {@link FrameSlicer} as a pipeline entry of its own, for pipelines built by hand: put it right
 * in front of grpc-netty's {@code Http2ConnectionHandler}, which then gets only whole HTTP/2
 * frames. Buffers are sliced as they come, messages of other types pass through. pinless's own
 * connections drive the slicer from {@code io.pinless.connection.ConnectionHandler} instead.
 *
 * <p>Memory: as {@link FrameSlicer}; everything it holds is released when the channel closes or
 * the handler is removed.
 */
public final class Http2FrameSlicer extends ChannelInboundHandlerAdapter {
  private final FrameSlicer slicer;
  /** Reads the inbound messages' progress when joins may wait across batches; else null. */
  private InboundMessages messages;
  /** The stream window the waiting joins are measured against. */
  private long streamWindow;

  /**
   * Creates a slicer of buffers with no headroom.
   *
   * @param server true on a server, which first receives the 24-byte client preface
   * @param maxFrameSize the SETTINGS_MAX_FRAME_SIZE this end advertises
   * @param budget where the buffers handed on are counted until released
   */
  public Http2FrameSlicer(boolean server, int maxFrameSize, ReadBudget budget) {
    this(server, maxFrameSize, budget, false);
  }

  /**
   * Creates a slicer; with {@code readHeadroom}, DATA frames cut by reads go on in pieces (see
   * {@link FrameSlicer#FrameSlicer}).
   */
  public Http2FrameSlicer(
      boolean server, int maxFrameSize, ReadBudget budget, boolean readHeadroom) {
    this.slicer = new FrameSlicer(server, maxFrameSize, budget, readHeadroom);
  }

  /**
   * A slicer whose joins wait across read batches as on a pinless connection, given a stream
   * window of {@code streamWindow} bytes: it does not see this end's SETTINGS, so this is for
   * tests that know the window.
   */
  Http2FrameSlicer(boolean server, int maxFrameSize, ReadBudget budget, long streamWindow) {
    this(server, maxFrameSize, budget, true);
    this.messages = new InboundMessages(Long.MAX_VALUE);
    this.streamWindow = streamWindow;
  }

  /**
   * Hands on the whole frames {@code msg} completes; other messages pass through.
   *
   * @param msg owned: released here; what is handed on are retained slices of it and copies
   */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (msg instanceof ByteBuf) {
      if (messages != null) {
        messages.read((ByteBuf) msg);
      }
      slicer.slice(ctx, (ByteBuf) msg);
    } else {
      ctx.fireChannelRead(msg);
    }
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    if (messages == null) {
      slicer.readComplete(ctx);
    } else {
      slicer.readComplete(ctx, messages, streamWindow);
    }
    ctx.fireChannelReadComplete();
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    slicer.release();
    ctx.fireChannelInactive();
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    slicer.release();
  }

  /** From now on no join waits across batches: the next batch's end hands every one on. */
  void stopWaiting() {
    messages = null;
  }

  /** Bytes held between reads: 0 when idle. */
  int heldBytes() {
    return slicer.heldBytes();
  }

  /** The messages under way its joins wait by; null unless made with a stream window. */
  InboundMessages messages() {
    return messages;
  }
}
