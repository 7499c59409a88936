package io.pinless.alts;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.pinless.http2.Http2FrameSlicer;

/**
 * An {@link AltsRecordDecoder} and an {@link AltsRecordEncoder} as one pipeline entry: ciphertext
 * in, plaintext out, as the decoder; plaintext writes in, frames out, as the encoder; with their
 * errors, ownership and memory. One entry instead of two saves a handler context (64 bytes) per
 * connection end for the connection's life, which counts when thousands sit idle. (pinless's ALTS
 * credentials go one step further: they run the decoder, with the connection's {@link
 * Http2FrameSlicer} inside it, and the encoder inside the connection's {@link
 * io.pinless.read.ReadOnReadyHandler} entry, without this object.)
 */
public final class AltsRecordCodec extends ChannelDuplexHandler {
  private final AltsRecordDecoder decoder;
  private final AltsRecordEncoder encoder;

  /**
   * Creates a codec for both directions of one connection end, with the arguments of {@link
   * AltsRecordDecoder#AltsRecordDecoder} and {@link AltsRecordEncoder#AltsRecordEncoder}.
   *
   * @param protocol the negotiated record protocol
   * @param key 16 bytes for {@code ALTSRP_GCM_AES128}, at least 44 for the rekey protocol (the
   *     first 44 are used); copied, so the caller may wipe it
   * @param isClient true when this end is the client
   * @param maxFrameSize the largest frame sent and accepted, 4 + length, at most 1 MiB
   */
  public AltsRecordCodec(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize) {
    this(protocol, key, isClient, maxFrameSize, AesGcm.preferred());
  }

  AltsRecordCodec(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
    decoder = new AltsRecordDecoder(protocol, key, isClient, maxFrameSize, aes);
    encoder = new AltsRecordEncoder(protocol, key, isClient, maxFrameSize, aes);
  }

  /**
   * Runs {@code slicer} inside this entry, behind the decoder, as {@link
   * AltsRecordDecoder#sliceFrames} does in the decoder's entry.
   */
  public void sliceFrames(Http2FrameSlicer slicer) {
    decoder.sliceFrames(slicer);
  }

  /** The receiving direction's record counter, for benchmarks that replay records. */
  AltsCounter receiveCounter() {
    return decoder.counter();
  }

  /**
   * Decrypts the records in {@code msg}, as {@link AltsRecordDecoder#channelRead}.
   *
   * @param msg owned: released here, on failure too
   */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    decoder.channelRead(ctx, msg);
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) throws Exception {
    decoder.channelInactive(ctx);
  }

  /**
   * Queues {@code msg} until the next flush, as {@link AltsRecordEncoder#write}.
   *
   * @param msg owned: released once sealed, or on failure
   */
  @Override
  public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
    encoder.write(ctx, msg, promise);
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    encoder.flush(ctx);
  }

  @Override
  public void close(ChannelHandlerContext ctx, ChannelPromise promise) {
    encoder.close(ctx, promise);
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    decoder.handlerAdded(ctx);
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    try {
      encoder.handlerRemoved(ctx);
    } finally {
      decoder.handlerRemoved(ctx);
    }
  }
}
