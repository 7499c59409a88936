package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.pinless.connection.RecordFraming;
import java.security.GeneralSecurityException;
import java.util.function.BiConsumer;
import javax.crypto.AEADBadTagException;

/**
 * Opens ALTS records: ciphertext in, plaintext out. The receiving half of {@link AltsRecordStage},
 * and what {@link AltsRecordDecoder} runs. The framing is {@link RecordFraming}'s: whole records
 * are decrypted straight out of the buffer the socket read into, one {@code doFinal} each, into
 * pooled direct buffers of up to 64 KiB (or one frame) each; a record a read cuts short keeps
 * only its own bytes, and fresh reads are sized to one frame of the largest size.
 *
 * <p>Memory: idle (between records) it holds no buffer. Mid-record it holds one pooled buffer of
 * at most four times the bytes of the frame received (64 bytes at least) and at most {@code 4 +
 * length} bytes, so a header claiming a large frame pins little. The plaintext it hands on pins
 * nothing else.
 *
 * <p>Not final: {@link AltsRecordStage} extends it, so a connection end's record stage is one
 * object with its sealer, not two. Its public methods are the receiving half of {@link
 * io.pinless.connection.RecordStage}.
 *
 * <p>Errors: a length below 20, a frame above {@code maxFrameSize} (checked before anything is
 * allocated from it), a type other than 6, a tag that does not verify (which includes a record
 * sent in the wrong direction) and counter overflow are fatal: the plaintext of every record
 * before the bad one is handed on, then an {@link AltsRecordException} is thrown, and every later
 * input is dropped. {@link #endOfInput} with a record partly received throws one ({@code
 * TRUNCATED}).
 */
class AltsRecordOpener extends RecordFraming {
  /**
   * The smallest fresh read, the read policy's own size: a peer's small records share reads, and
   * a batch of reads (at most 16) carries as much as a plaintext connection's.
   */
  private static final int MIN_FRESH_READ_BYTES = io.pinless.read.ReadPolicy.MAX_READ_BYTES;

  private final RecordCipher cipher;
  private final int maxFrameSize;

  /** An opener of records sent by the peer; see {@link AltsRecordDecoder#AltsRecordDecoder}. */
  AltsRecordOpener(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
    super(AltsFrames.HEADER_BYTES);
    this.maxFrameSize = AltsFrames.checkMaxFrameSize(maxFrameSize);
    this.cipher = new RecordCipher(protocol, key, aes, isClient);
  }

  /**
   * Opens the records {@code in} completes and hands their plaintext to {@code plaintext}.
   *
   * @param in borrowed: its reader index is advanced past everything consumed; it may be the
   *     partial record itself, when the socket read straight into it
   * @param plaintext takes ownership of each buffer
   * @throws AltsRecordException on a fatal error, after the plaintext before it
   */
  public void open(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> plaintext) {
    openRecords(ctx, in, headroom, plaintext);
  }

  /** The 8-byte header, length and type little endian, read big endian: byte-reversed here. */
  @Override
  protected int recordBytes(long header) {
    long littleEndian = Long.reverseBytes(header);
    return AltsFrames.LENGTH_BYTES + AltsFrames.checkHeader(
        littleEndian & 0xffffffffL, littleEndian >>> 32, maxFrameSize);
  }

  @Override
  protected int plaintextBound(int frameBytes) {
    return frameBytes - AltsFrames.OVERHEAD_BYTES;
  }

  /** @return owned by the caller: a pooled direct buffer (the cipher works in place on it) */
  @Override
  protected ByteBuf allocateOutput(ChannelHandlerContext ctx, int headroom, int plaintextBytes) {
    return ctx.alloc().directBuffer(headroom + plaintextBytes)
        .writerIndex(headroom).readerIndex(headroom);
  }

  @Override
  protected RuntimeException truncated(String what) {
    return new AltsRecordException(
        AltsRecordException.Reason.TRUNCATED, "connection closed after " + what);
  }

  /**
   * One record of the size of the peer's largest so far: a bulk stream of records of one size is
   * then read a record at a time, each read starting and ending on a record's bounds, and a record
   * a read cuts has room for its rest where its head lies. Before any record, one of the largest
   * size allowed. A peer seals what each flush carries, so its records are often smaller than
   * that largest: grpc-alts's are one 64 KiB DATA frame each, and reads of 128 KiB would cut
   * every second record where its rest cannot follow. Never under {@link #MIN_FRESH_READ_BYTES}.
   */
  @Override
  protected int freshReadBytes(int largestRecordBytes) {
    return largestRecordBytes > 0
        ? Math.min(maxFrameSize, Math.max(largestRecordBytes, MIN_FRESH_READ_BYTES))
        : maxFrameSize;
  }

  /**
   * Authenticates and decrypts one whole frame into {@code out} and advances the counter.
   *
   * @param frame borrowed: indexes are not moved
   * @param out borrowed: its writer index is advanced by the plaintext length
   */
  @Override
  protected void openRecord(ByteBuf frame, int start, int frameBytes, ByteBuf out) {
    int plaintextBytes = frameBytes - AltsFrames.OVERHEAD_BYTES;
    byte[] nonce = cipher.current();
    try {
      cipher.open(
          nonce,
          AltsFrames.view(
              frame, start + AltsFrames.HEADER_BYTES, frameBytes - AltsFrames.HEADER_BYTES),
          AltsFrames.view(out, out.writerIndex(), plaintextBytes));
    } catch (AEADBadTagException e) {
      throw new AltsRecordException(
          AltsRecordException.Reason.BAD_TAG,
          "record of " + frameBytes + " bytes failed authentication (corrupted, forged, wrong key"
              + " or wrong direction)",
          e);
    } catch (GeneralSecurityException e) {
      throw new AltsRecordException(
          AltsRecordException.Reason.CRYPTO_FAILURE, "record decryption failed: " + e, e);
    }
    out.writerIndex(out.writerIndex() + plaintextBytes);
    cipher.increment();
  }


  /** Releases the partial record and destroys the key: the opener is not used again. */
  public void release() {
    releasePartial();
    cipher.destroy();
  }

  /** The name of the AES-GCM provider in use. */
  String providerName() {
    return cipher.providerName();
  }

  /** The counter of the next record, for tests that start near overflow. */
  AltsCounter counter() {
    return cipher;
  }

}
