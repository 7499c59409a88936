package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.pinless.PinlessMetrics.Metric;
import java.security.GeneralSecurityException;
import java.util.function.BiConsumer;
import javax.crypto.AEADBadTagException;

/**
 * Opens ALTS records: ciphertext in, plaintext out. The receiving half of {@link AltsRecordStage},
 * and what {@link AltsRecordDecoder} runs.
 *
 * <pre>
 *   read buffer:  | record 1 | record 2 | record 3 | head of record 4 |
 *                      |          |          |            |
 *                      v          v          v            v copied (its own bytes only) into a
 *   handed on:    | plain 1  | plain 2  | plain 3  |        buffer sized from its header
 *                 one pooled direct buffer per read
 * </pre>
 *
 * <p>Whole records are decrypted straight out of the buffer the socket read into, one {@code
 * doFinal} each, into one pooled direct buffer per read; there is no cumulation. A record that a
 * read cuts short is copied into a buffer of exactly its own size (before its 8-byte header is
 * complete, into a {@code long}), so the read buffer is released at once. When the read policy
 * asks ({@link #nextReadBuffer}), the rest of such a record is read straight into that buffer, so
 * only the part that came with the cut read is copied; fresh reads are sized to hold whole records
 * ({@link #nextReadBytes}).
 *
 * <p>Memory: idle (between records) it holds no buffer. Mid-record it holds one pooled buffer of
 * {@code 4 + length} bytes (at most {@code maxFrameSize}). The plaintext it hands on pins nothing
 * else.
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
class AltsRecordOpener {
  /**
   * 4 KiB: a partial record missing at least this much is read into directly; a smaller rest is
   * read with whatever follows it and copied.
   */
  static final int MIN_DIRECT_READ_BYTES = 4096;

  /** Where the opener is in the record stream. */
  private enum State {
    /** Between records: nothing held. */
    IDLE,
    /** Fewer than 8 header bytes of the next record received; they are in {@link #header}. */
    HEADER,
    /** The header is known; {@link #partial} holds the record's bytes so far. */
    BODY,
    /** A fatal error happened; every read is dropped. */
    FAILED
  }

  private final RecordCipher cipher;
  private final int maxFrameSize;
  /**
   * The first header bytes of the next record while in {@link State#HEADER}, little endian (byte
   * i in bits 8i to 8i+7): a field, not an array, so a connection carries no array for it.
   */
  private long header;
  /** How many bytes of {@link #header} are filled, 0 to 7 (a byte keeps the object small). */
  private byte headerBytes;
  /** A record partly received, header included, sized to the whole frame; only in BODY. */
  private ByteBuf partial;
  private State state = State.IDLE;

  /** An opener of records sent by the peer; see {@link AltsRecordDecoder#AltsRecordDecoder}. */
  AltsRecordOpener(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
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
    if (state == State.FAILED) {
      return;
    }
    ByteBuf out;
    try {
      out = decode(ctx, in, headroom, plaintext);
    } catch (AltsRecordException e) {
      state = State.FAILED;
      releasePartial();
      throw e;
    }
    if (out != null) {
      plaintext.accept(ctx, out);
    }
  }

  /**
   * Decodes what {@code msg} completes; on a fatal error hands on the plaintext decoded so far and
   * rethrows.
   *
   * @param msg borrowed: its reader index is advanced past everything consumed; it may be the
   *     partial record itself, when the socket read straight into it
   * @return plaintext the caller must hand on (and so release), or null when there is none
   */
  private ByteBuf decode(
      ChannelHandlerContext ctx, ByteBuf msg, int headroom, BiConsumer<ChannelHandlerContext, ByteBuf> plaintext) {
    // A read that went straight into the partial record (see nextReadBuffer) brought nothing else.
    boolean direct = msg == partial;
    ByteBuf in = direct ? Unpooled.EMPTY_BUFFER : msg;
    if (state == State.HEADER) {
      fillHeader(ctx, in);
    }
    if (state == State.BODY) {
      if (!direct) {
        int need = partial.writableBytes();
        int n = Math.min(need, in.readableBytes());
        partial.writeBytes(in, n);
        Metric.RECORD_BYTES_COPIED.add(n);
      }
      if (partial.isWritable()) {
        return null;
      }
    }
    // Size the output from the headers of the records this read completes. A bad header stops
    // the scan: the records before it are still decoded and fired before the error.
    int plaintextBytes = state == State.BODY ? partial.readableBytes() - AltsFrames.OVERHEAD_BYTES : 0;
    int index = in.readerIndex();
    int end = in.writerIndex();
    AltsRecordException headerError = null;
    while (end - index >= AltsFrames.HEADER_BYTES) {
      int length;
      try {
        length = AltsFrames.checkHeader(
            in.getUnsignedIntLE(index), in.getUnsignedIntLE(index + 4), maxFrameSize);
      } catch (AltsRecordException e) {
        headerError = e;
        break;
      }
      if (end - index < AltsFrames.LENGTH_BYTES + length) {
        break;
      }
      plaintextBytes += length - 4 - AesGcm.TAG_BYTES;
      index += AltsFrames.LENGTH_BYTES + length;
    }
    int wholeEnd = index;
    ByteBuf out = plaintextBytes == 0
        ? Unpooled.EMPTY_BUFFER
        : ctx.alloc().directBuffer(headroom + plaintextBytes)
            .writerIndex(headroom).readerIndex(headroom);
    try {
      if (state == State.BODY) {
        openRecord(partial, partial.readerIndex(), partial.readableBytes(), out);
        partial.release();
        partial = null;
        state = State.IDLE;
      }
      while (in.readerIndex() < wholeEnd) {
        int start = in.readerIndex();
        int frameBytes = AltsFrames.LENGTH_BYTES + in.getIntLE(start);
        openRecord(in, start, frameBytes, out);
        in.readerIndex(start + frameBytes);
      }
    } catch (AltsRecordException e) {
      handOnIfReadable(ctx, out, plaintext);
      throw e;
    }
    if (headerError != null) {
      handOnIfReadable(ctx, out, plaintext);
      throw headerError;
    }
    if (in.isReadable()) {
      fillHeader(ctx, in);
    }
    if (!out.isReadable()) {
      out.release();
      return null;
    }
    return out;
  }

  /**
   * Takes header bytes of the next record from {@code in}; once the header is complete, checks it
   * and moves to {@link State#BODY} with a buffer of exactly the frame's size.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   */
  private void fillHeader(ChannelHandlerContext ctx, ByteBuf in) {
    int take = Math.min(AltsFrames.HEADER_BYTES - headerBytes, in.readableBytes());
    for (int i = 0; i < take; i++) {
      header |= (long) in.readUnsignedByte() << (8 * headerBytes++);
    }
    if (headerBytes < AltsFrames.HEADER_BYTES) {
      state = State.HEADER;
      return;
    }
    long bytes = header;
    header = 0;
    headerBytes = 0;
    int length = AltsFrames.checkHeader(bytes & 0xffffffffL, bytes >>> 32, maxFrameSize);
    partial = ctx.alloc().directBuffer(AltsFrames.LENGTH_BYTES + length);
    partial.writeLongLE(bytes);
    state = State.BODY;
    int take2 = Math.min(partial.writableBytes(), in.readableBytes());
    partial.writeBytes(in, take2);
    Metric.RECORD_BYTES_COPIED.add(AltsFrames.HEADER_BYTES + take2);
  }

  /**
   * Authenticates and decrypts one whole frame into {@code out} and advances the counter.
   *
   * @param frame borrowed: indexes are not moved
   * @param out borrowed: its writer index is advanced by the plaintext length
   */
  private void openRecord(ByteBuf frame, int start, int frameBytes, ByteBuf out) {
    int plaintextBytes = frameBytes - AltsFrames.OVERHEAD_BYTES;
    byte[] nonce = cipher.current();
    try {
      cipher.open(
          nonce,
          AltsFrames.view(frame, start + AltsFrames.HEADER_BYTES, frameBytes - AltsFrames.HEADER_BYTES),
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


  /** @param out owned: handed on when readable, else released */
  private static void handOnIfReadable(
      ChannelHandlerContext ctx, ByteBuf out, BiConsumer<ChannelHandlerContext, ByteBuf> plaintext) {
    if (out.isReadable()) {
      plaintext.accept(ctx, out);
    } else {
      out.release();
    }
  }

  /**
   * The peer closed.
   *
   * @throws AltsRecordException ({@code TRUNCATED}) if a record was partly received
   */
  public void endOfInput() {
    if (state != State.HEADER && state != State.BODY) {
      return;
    }
    int received = state == State.HEADER ? headerBytes : partial.readableBytes();
    String expected =
        state == State.HEADER ? "a record header" : partial.capacity() + " bytes of a record";
    state = State.FAILED;
    releasePartial();
    throw new AltsRecordException(
        AltsRecordException.Reason.TRUNCATED,
        "connection closed after " + received + " of " + expected);
  }

  /**
   * While a record is cut short by a read, the next read goes straight into its buffer, so the
   * rest of the record is never copied (as grpc-go's ALTS conn does).
   *
   * @return owned by the read loop (retained for it): the partial record, to read into at its
   *     writer index; null for a fresh read buffer
   */
  public ByteBuf nextReadBuffer() {
    if (state != State.BODY || partial.writableBytes() < MIN_DIRECT_READ_BYTES) {
      return null;
    }
    return partial.retain();
  }

  /**
   * Sizes fresh reads from the record stream, so that reads of a bulk stream of full frames hold
   * whole records and nothing is copied: between records, one frame of the largest size; with a
   * small rest of a cut record pending (too small to read into directly), that rest and one such
   * frame behind it; before a cut header is complete, one such frame (the read handler caps
   * reads at 64 KiB).
   */
  public int nextReadBytes() {
    switch (state) {
      case IDLE:
      case HEADER:
        return maxFrameSize;
      case BODY:
        return partial.writableBytes() + maxFrameSize;
      default:
        return 0;
    }
  }

  private void releasePartial() {
    header = 0;
    headerBytes = 0;
    if (partial != null) {
      partial.release();
      partial = null;
    }
  }

  /** Releases the partial record and destroys the key: the opener is not used again. */
  public void release() {
    releasePartial();
    cipher.destroy();
  }

  /** How many bytes this opener holds between reads: 0 when idle. */
  int heldBytes() {
    return partial == null ? 0 : partial.capacity();
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
