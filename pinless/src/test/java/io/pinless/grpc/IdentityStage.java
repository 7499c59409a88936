package io.pinless.grpc;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.pinless.connection.RecordStage;
import java.util.function.BiConsumer;

/**
 * A record stage whose records are the plaintext itself: each read is copied, as a cipher would
 * decrypt it, into a pooled direct buffer with the headroom asked for; writes go out as they are.
 * The one class a record protocol needs to run on the pinless pipeline.
 */
final class IdentityStage implements RecordStage {
  /**
   * @param in borrowed: read to its end
   * @param out takes each copy
   */
  @Override
  public void open(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> out) {
    int n = in.readableBytes();
    if (n == 0) {
      return;
    }
    ByteBuf plaintext = ctx.alloc().directBuffer(headroom + n);
    plaintext.writerIndex(headroom).readerIndex(headroom);
    plaintext.writeBytes(in, n);
    out.accept(ctx, plaintext);
  }

  @Override
  public void endOfInput() {}

  /** @return null: reads are the policy's own */
  @Override
  public ByteBuf nextReadBuffer() {
    return null;
  }

  @Override
  public int nextReadBytes() {
    return 0;
  }

  /** @param plaintext owned: written on */
  @Override
  public void write(ChannelHandlerContext ctx, ByteBuf plaintext, ChannelPromise promise) {
    ctx.write(plaintext, promise);
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    ctx.flush();
  }

  @Override
  public void close(ChannelHandlerContext ctx) {}

  @Override
  public void release() {}
}
