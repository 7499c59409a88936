package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.pinless.http2.FrameSlicer;
import java.util.function.BiConsumer;

/**
 * Decrypts ALTS records as a pipeline entry: ciphertext {@link ByteBuf}s in, plaintext {@link
 * ByteBuf}s out, in pooled direct buffers of up to 64 KiB (or one frame), each starting {@link
 * #HEADROOM_BYTES} in. It runs an {@link AltsRecordOpener}, which says how records are opened,
 * what is held and which errors are fatal. pinless's own connections run the same opener inside an {@link
 * AltsRecordStage}.
 *
 * <p>Errors: the plaintext of every record before a bad one is fired first; then an {@link
 * AltsRecordException} is fired, the channel is closed, every buffer is released, and every later
 * read is dropped. A close with a record partly received fires an {@link AltsRecordException}
 * ({@code TRUNCATED}) before {@code channelInactive}.
 *
 * <p>Memory: idle (between records) it holds no buffer; mid-record, one buffer of at most four
 * times the bytes of the record received (64 bytes at least) and at most the record's size.
 */
public final class AltsRecordDecoder extends ChannelInboundHandlerAdapter {
  /** Free bytes before each plaintext buffer's reader index: an HTTP/2 frame header. */
  public static final int HEADROOM_BYTES = FrameSlicer.HEADROOM_BYTES;

  /** Fires plaintext to the next handler. */
  private static final BiConsumer<ChannelHandlerContext, ByteBuf> FIRE =
      ChannelHandlerContext::fireChannelRead;

  private final AltsRecordOpener opener;

  /**
   * Creates a decoder for records sent by the peer.
   *
   * @param protocol the negotiated record protocol
   * @param key 16 bytes for {@code ALTSRP_GCM_AES128}, at least 44 for the rekey protocol (the
   *     first 44 are used); copied, so the caller may wipe it
   * @param isClient true when this end is the client, so records come from the server and their
   *     counters carry 0x80 in byte 11
   * @param maxFrameSize the largest frame accepted, 4 + length, at most 1 MiB
   */
  public AltsRecordDecoder(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize) {
    this(protocol, key, isClient, maxFrameSize, AesGcm.preferred());
  }

  AltsRecordDecoder(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
    opener = new AltsRecordOpener(protocol, key, isClient, maxFrameSize, aes);
  }

  /**
   * Decrypts the records in {@code msg}; any other message passes through.
   *
   * @param msg owned: released here, on failure too
   */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (!(msg instanceof ByteBuf)) {
      ctx.fireChannelRead(msg);
      return;
    }
    ByteBuf in = (ByteBuf) msg;
    try {
      opener.open(ctx, in, HEADROOM_BYTES, FIRE);
    } catch (AltsRecordException e) {
      ctx.fireExceptionCaught(e);
      ctx.close();
    } finally {
      in.release();
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    try {
      opener.endOfInput();
    } catch (AltsRecordException e) {
      ctx.fireExceptionCaught(e);
    }
    ctx.fireChannelInactive();
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    opener.release();
  }

  /** How many bytes this decoder holds between reads: 0 when idle. */
  int heldBytes() {
    return opener.heldBytes();
  }

  /** The name of the AES-GCM provider in use. */
  String providerName() {
    return opener.providerName();
  }

  /** The counter of the next record, for tests that start near overflow. */
  AltsCounter counter() {
    return opener.counter();
  }
}
