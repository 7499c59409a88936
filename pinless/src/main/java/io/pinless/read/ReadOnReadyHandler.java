package io.pinless.read;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;

/**
 * A {@link ReadPolicy} as a pipeline entry of its own, for pipelines built by hand: put it first,
 * and it becomes the one place that decides when the socket is read. It swallows the {@code
 * read()} requests of every handler behind it (grpc-netty's {@code Http2ConnectionHandler} asks
 * after every batch when {@code AUTO_READ} is off) and passes every message on unchanged.
 * pinless's own connections drive the policy from {@code io.pinless.connection.ConnectionHandler}
 * instead, together with the stages above it.
 *
 * <p>Memory: this handler holds no buffer.
 */
public final class ReadOnReadyHandler extends ChannelDuplexHandler {
  private final ReadPolicy policy;

  /**
   * Creates a handler that holds reads while {@code budget} is exceeded and, if {@code
   * holdWhileUnwritable}, while the channel is not writable, with reads of at most {@link
   * ReadPolicy#MAX_READ_BYTES}.
   */
  public ReadOnReadyHandler(ReadBudget budget, boolean holdWhileUnwritable) {
    this(budget, holdWhileUnwritable, ReadPolicy.MAX_READ_BYTES);
  }

  /** Creates a handler as above whose reads are at most {@code maxReadBytes} (1 KiB to 64 KiB). */
  public ReadOnReadyHandler(ReadBudget budget, boolean holdWhileUnwritable, int maxReadBytes) {
    this.policy = new ReadPolicy(budget, holdWhileUnwritable, maxReadBytes);
  }

  /** The policy this handler drives. */
  public ReadPolicy policy() {
    return policy;
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    policy.attach(ctx);
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    policy.handBack();
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    ctx.fireChannelActive();
    policy.channelActive();
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    try {
      ctx.fireChannelInactive();
    } finally {
      policy.detach();
    }
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    ctx.fireChannelReadComplete();
    policy.batchEnded();
  }

  @Override
  public void channelWritabilityChanged(ChannelHandlerContext ctx) {
    ctx.fireChannelWritabilityChanged();
    policy.writabilityChanged();
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    ctx.flush();
    policy.flushed();
  }

  /** Swallows read requests from the handlers behind this one: the policy decides. */
  @Override
  public void read(ChannelHandlerContext ctx) {}
}
