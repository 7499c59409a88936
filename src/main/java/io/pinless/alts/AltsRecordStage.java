package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.pinless.connection.RecordStage;
import java.util.function.Consumer;

/**
 * The ALTS record protocol as a {@link RecordStage}: records opened by an {@link
 * AltsRecordOpener} and sealed by an {@link AltsRecordSealer}, with their errors, ownership and
 * memory. Idle it holds no buffer.
 */
public final class AltsRecordStage implements RecordStage {
  private final AltsRecordOpener opener;
  private final AltsRecordSealer sealer;

  /**
   * A stage for both directions of one connection end.
   *
   * @param protocol the negotiated record protocol
   * @param key 16 bytes for {@code ALTSRP_GCM_AES128}, at least 44 for the rekey protocol (the
   *     first 44 are used); copied, so the caller may wipe it
   * @param isClient true when this end is the client
   * @param maxFrameSize the largest frame sent and accepted, 4 + length, at most 1 MiB
   */
  public AltsRecordStage(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize) {
    this(protocol, key, isClient, maxFrameSize, AesGcm.preferred());
  }

  AltsRecordStage(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
    opener = new AltsRecordOpener(protocol, key, isClient, maxFrameSize, aes);
    sealer = new AltsRecordSealer(protocol, key, isClient, maxFrameSize, aes);
  }

  /**
   * {@inheritDoc}
   *
   * @param in borrowed: its reader index is advanced past everything consumed
   * @throws AltsRecordException on a fatal error, after the plaintext before it
   */
  @Override
  public void open(ChannelHandlerContext ctx, ByteBuf in, int headroom, Consumer<ByteBuf> out) {
    opener.open(ctx, in, headroom, out);
  }

  @Override
  public void endOfInput() {
    opener.endOfInput();
  }

  /**
   * Sizes fresh reads from the record stream.
   *
   * @return owned by the read loop: the partial record to read into, or null
   */
  @Override
  public ByteBuf nextReadBuffer() {
    return opener.nextReadBuffer();
  }

  @Override
  public int nextReadBytes() {
    return opener.nextReadBytes();
  }

  /** @param plaintext owned: released once sealed, or on failure */
  @Override
  public void write(ChannelHandlerContext ctx, ByteBuf plaintext, ChannelPromise promise) {
    sealer.write(plaintext, promise);
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    sealer.flush(ctx);
  }

  @Override
  public void close() {
    sealer.close();
  }

  @Override
  public void release() {
    try {
      sealer.release();
    } finally {
      opener.release();
    }
  }

  /** How many bytes the stage holds between reads: 0 when idle. */
  int heldBytes() {
    return opener.heldBytes();
  }

  /** The receiving direction's record counter, for benchmarks that replay records. */
  AltsCounter receiveCounter() {
    return opener.counter();
  }
}
