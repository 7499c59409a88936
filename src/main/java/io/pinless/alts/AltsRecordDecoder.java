package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.pinless.http2.Http2FrameSlicer;
import io.pinless.read.ReadOnReadyHandler;
import java.security.GeneralSecurityException;
import java.util.concurrent.atomic.LongAdder;
import javax.crypto.AEADBadTagException;

/**
 * Decrypts ALTS records: ciphertext {@link ByteBuf}s in, plaintext {@link ByteBuf}s out.
 *
 * <pre>
 *   read buffer:  | record 1 | record 2 | record 3 | head of record 4 |
 *                      |          |          |            |
 *                      v          v          v            v copied (its own bytes only) into a
 *   fired:        | plain 1  | plain 2  | plain 3  |        buffer sized from its header
 *                 one pooled direct buffer per read
 * </pre>
 *
 * <p>Whole records are decrypted straight out of the buffer the socket read into, one
 * {@code doFinal} each, into one pooled direct buffer per read; there is no cumulation. A record
 * that a read cuts short is copied into a buffer of exactly its own size (or, before its 8-byte
 * header is complete, into an 8-byte array), so the read buffer is released at once; behind a
 * {@link ReadOnReadyHandler}, the rest of such a record is then read straight into that buffer
 * ({@link #nextReadBuffer}), so only the part that came with the cut read is ever copied; and
 * fresh reads are sized to hold whole records ({@link #nextReadBytes}), so in a stream of full
 * frames few reads cut one.
 *
 * <p>Each plaintext buffer starts {@link #HEADROOM_BYTES} bytes in, free for the next handler
 * to write into (the room {@link io.pinless.http2.Http2FrameSlicer} needs to hand on a DATA frame
 * cut by a record boundary as two plain slices).
 *
 * <p>Memory: idle (between records) this handler holds no buffer at all. Mid-record it holds one
 * pooled buffer of {@code 4 + length} bytes (at most {@code maxFrameSize}). The plaintext it fires
 * is owned by the next handler and pins nothing else.
 *
 * <p>Errors: a length below 20, a frame above {@code maxFrameSize} (checked before anything is
 * allocated from it), a type other than 6, a tag that does not verify (which includes a record
 * sent in the wrong direction) and counter overflow are fatal. The plaintext of every record
 * before the bad one is fired first; then an {@link AltsRecordException} is fired, the channel is
 * closed, every buffer is released, and every later read is dropped. A close with a record partly
 * received fires an {@link AltsRecordException} ({@code TRUNCATED}) before {@code
 * channelInactive}.
 */
public final class AltsRecordDecoder extends ChannelInboundHandlerAdapter
    implements ReadOnReadyHandler.ReadTarget {
  /** Free bytes before each plaintext buffer's reader index: an HTTP/2 frame header. */
  public static final int HEADROOM_BYTES = ReadOnReadyHandler.HEADROOM_BYTES;
  /**
   * 4 KiB: a partial record missing at least this much is read into directly; a smaller rest is
   * read with whatever follows it and copied.
   */
  static final int MIN_DIRECT_READ_BYTES = 4096;
  private static final LongAdder TOTAL_COPIED = new LongAdder();

  /** Where the decoder is in the record stream. */
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
  /** How many bytes of {@link #header} are filled, 0 to 7 (a byte keeps the object at 48 bytes). */
  private byte headerBytes;
  /** A record partly received, header included, sized to the whole frame; only in BODY. */
  private ByteBuf partial;
  private State state = State.IDLE;
  /** The connection's read handler, when there is one ahead of this decoder. */
  private ReadOnReadyHandler reads;
  /** Where plaintext goes when frames are sliced in this entry ({@link #sliceFrames}), or null. */
  private Http2FrameSlicer slicer;

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
    this.maxFrameSize = AltsFrames.checkMaxFrameSize(maxFrameSize);
    this.cipher = new RecordCipher(protocol, key, aes, isClient);
  }

  /**
   * Decrypts the records in {@code msg}; any other message passes through.
   *
   * @param msg owned: released here, on failure too
   */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (!(msg instanceof ByteBuf)) {
      handOn(ctx, msg);
      return;
    }
    ByteBuf in = (ByteBuf) msg;
    ByteBuf out = null;
    try {
      if (state == State.FAILED) {
        return;
      }
      out = decode(ctx, in);
    } catch (AltsRecordException e) {
      fail(ctx, e);
    } finally {
      in.release();
    }
    if (out != null) {
      handOn(ctx, out);
    }
  }

  /**
   * Fires {@code msg} to the next handler, or gives it to the slicer running in this entry.
   *
   * @param msg owned: handed on
   */
  private void handOn(ChannelHandlerContext ctx, Object msg) {
    if (slicer == null) {
      ctx.fireChannelRead(msg);
    } else {
      slicer.channelRead(ctx, msg);
    }
  }

  /**
   * Runs {@code slicer} inside this decoder's entry: the plaintext (and any other message the
   * decoder passes on) goes to the slicer's {@code channelRead}, the end of the stream to its
   * {@code channelInactive} and the decoder's removal to its {@code handlerRemoved}, each called
   * with the decoder's context, so what the slicer hands on reaches the handler after the
   * decoder's entry. The slicer must not also be in a pipeline, and must be built with read
   * headroom ({@link #HEADROOM_BYTES} is the room it needs). Saves the slicer's own pipeline entry,
   * a handler context (64 bytes) per connection end. Call on the channel's event loop before any
   * record arrives.
   */
  public void sliceFrames(Http2FrameSlicer slicer) {
    this.slicer = slicer;
  }

  /**
   * Decodes what {@code msg} completes; on a fatal error fires the plaintext decoded so far and
   * rethrows.
   *
   * @param msg borrowed: its reader index is advanced past everything consumed; it may be the
   *     partial record itself, when the socket read straight into it
   * @return plaintext the caller must fire (and so release), or null when there is none
   */
  private ByteBuf decode(ChannelHandlerContext ctx, ByteBuf msg) {
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
        TOTAL_COPIED.add(n);
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
        : ctx.alloc().directBuffer(HEADROOM_BYTES + plaintextBytes)
            .writerIndex(HEADROOM_BYTES).readerIndex(HEADROOM_BYTES);
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
      fireIfReadable(ctx, out);
      throw e;
    }
    if (headerError != null) {
      fireIfReadable(ctx, out);
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
    TOTAL_COPIED.add(AltsFrames.HEADER_BYTES + take2);
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
  private void fireIfReadable(ChannelHandlerContext ctx, ByteBuf out) {
    if (out.isReadable()) {
      handOn(ctx, out);
    } else {
      out.release();
    }
  }

  private void fail(ChannelHandlerContext ctx, AltsRecordException cause) {
    state = State.FAILED;
    releasePartial();
    ctx.fireExceptionCaught(cause);
    ctx.close();
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) throws Exception {
    if (state == State.HEADER || state == State.BODY) {
      int received = state == State.HEADER ? headerBytes : partial.readableBytes();
      String expected =
          state == State.HEADER ? "a record header" : partial.capacity() + " bytes of a record";
      state = State.FAILED;
      releasePartial();
      ctx.fireExceptionCaught(
          new AltsRecordException(
              AltsRecordException.Reason.TRUNCATED,
              "connection closed after " + received + " of " + expected));
    }
    if (slicer == null) {
      ctx.fireChannelInactive();
    } else {
      slicer.channelInactive(ctx);
    }
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    reads = ctx.pipeline().get(ReadOnReadyHandler.class);
    if (reads != null) {
      reads.readTarget(this);
    }
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    if (reads != null) {
      reads.readTarget(null);
    }
    try {
      releasePartial();
      cipher.destroy();
    } finally {
      if (slicer != null) {
        slicer.handlerRemoved(ctx);
      }
    }
  }

  /**
   * While a record is cut short by a read, the next read goes straight into its buffer, so the
   * rest of the record is never copied (as grpc-go's ALTS conn does).
   *
   * @return owned by the read loop (retained for it): the partial record, to read into at its
   *     writer index; null for a fresh read buffer
   */
  @Override
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
  @Override
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

  /**
   * Process-wide: ciphertext bytes copied out of read buffers into records that reads cut (the
   * header bytes of such a record included). Bytes read straight into a record are not counted.
   */
  public static long totalCopiedCiphertextBytes() {
    return TOTAL_COPIED.sum();
  }

  /** How many bytes this decoder holds between reads: 0 when idle. */
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
