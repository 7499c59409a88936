package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.UnsupportedMessageTypeException;
import io.netty.util.ReferenceCountUtil;

/**
 * Encrypts plaintext {@link ByteBuf}s into ALTS frames as a pipeline entry: plaintext in, frames
 * out, no frame larger than {@code maxFrameSize} bytes in all. It runs an {@link
 * AltsRecordSealer}, which says how writes are coalesced and sealed, when promises complete and
 * what is held. pinless's own connections run the same sealer inside an {@link AltsRecordStage}.
 *
 * <p>Memory: between flushes it holds the written buffers; after a flush it holds nothing.
 */
public final class AltsRecordEncoder extends ChannelOutboundHandlerAdapter {
  private final AltsRecordSealer sealer;

  /**
   * Creates an encoder for records this end sends.
   *
   * @param protocol the negotiated record protocol
   * @param key 16 bytes for {@code ALTSRP_GCM_AES128}, at least 44 for the rekey protocol (the
   *     first 44 are used); copied, so the caller may wipe it
   * @param isClient true when this end is the client, so its counters leave byte 11 clear
   * @param maxFrameSize the largest frame sent, 4 + length, at most 1 MiB
   */
  public AltsRecordEncoder(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize) {
    this(protocol, key, isClient, maxFrameSize, AesGcm.preferred());
  }

  AltsRecordEncoder(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
    sealer = new AltsRecordSealer(protocol, key, isClient, maxFrameSize, aes);
  }

  /**
   * Queues {@code msg} until the next flush.
   *
   * @param msg owned: released once sealed, or on failure
   */
  @Override
  public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
    if (msg instanceof ByteBuf) {
      sealer.write((ByteBuf) msg, promise);
    } else {
      ReferenceCountUtil.release(msg);
      promise.setFailure(new UnsupportedMessageTypeException(msg, ByteBuf.class));
    }
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    sealer.flush(ctx);
  }

  @Override
  public void close(ChannelHandlerContext ctx, ChannelPromise promise) {
    sealer.close();
    ctx.close(promise);
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    sealer.release();
  }

  /** Slots of the queue of unframed writes: 0 when it holds none. */
  int queueSlots() {
    return sealer.queueSlots();
  }

  /** The counter of the next record, for tests that start near overflow. */
  AltsCounter counter() {
    return sealer.counter();
  }
}
