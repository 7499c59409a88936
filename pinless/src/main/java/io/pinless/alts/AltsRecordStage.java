package io.pinless.alts;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.pinless.connection.RecordStage;
import java.util.function.BiConsumer;

/**
 * The ALTS record protocol as a {@link RecordStage}: records opened as {@link AltsRecordOpener}
 * opens them (the stage is one, so a connection end holds one object less) and sealed by an
 * {@link AltsRecordSealer}, with their errors, ownership and memory. Idle it holds no buffer.
 */
public final class AltsRecordStage extends AltsRecordOpener implements RecordStage {
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
    super(protocol, key, isClient, maxFrameSize, aes);
    sealer = new AltsRecordSealer(protocol, key, isClient, maxFrameSize, aes);
  }

  /**
   * As {@link AltsRecordOpener#open}, with a fatal error as gRPC reads one: a {@code
   * StatusRuntimeException}, UNAVAILABLE with the reason, whose cause is the {@link
   * AltsRecordException} (gRPC would report any other exception as UNKNOWN).
   */
  @Override
  public void open(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> plaintext) {
    try {
      super.open(ctx, in, headroom, plaintext);
    } catch (AltsRecordException e) {
      throw unavailable(e);
    }
  }

  /** As {@link AltsRecordOpener#endOfInput}, the error as {@link #open} gives it. */
  @Override
  public void endOfInput() {
    try {
      super.endOfInput();
    } catch (AltsRecordException e) {
      throw unavailable(e);
    }
  }

  private static StatusRuntimeException unavailable(AltsRecordException e) {
    return Status.UNAVAILABLE.withDescription("ALTS: " + e.getMessage()).withCause(e)
        .asRuntimeException();
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
  public void close(ChannelHandlerContext ctx) {
    sealer.close();
  }

  @Override
  public void release() {
    try {
      sealer.release();
    } finally {
      super.release();
    }
  }

  /** The receiving direction's record counter, for benchmarks that replay records. */
  AltsCounter receiveCounter() {
    return counter();
  }
}
