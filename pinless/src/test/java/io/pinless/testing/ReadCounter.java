package io.pinless.testing;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;

/** Counts the read requests that pass it; at the head of a pipeline, those that reach the channel. */
public final class ReadCounter extends ChannelOutboundHandlerAdapter {
  /** How many read requests passed. */
  public int reads;

  @Override
  public void read(ChannelHandlerContext ctx) {
    reads++;
    ctx.read();
  }
}
