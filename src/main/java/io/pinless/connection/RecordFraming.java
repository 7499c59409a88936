package io.pinless.connection;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.pinless.PinlessMetrics.Metric;
import java.util.function.BiConsumer;

/**
 * The receiving half every record layer here shares (ALTS's and TLS's): records cut out of the
 * buffers the socket reads into, with no cumulation.
 *
 * <pre>
 *   read buffer:  | record 1 | record 2 | head of record 3 |
 *                      |          |            |
 *                      v open     v open       v kept where it lies when the buffer has
 *   handed on:    | plain 1  | plain 2  |        room for its rest; else copied (its own
 *                 one pooled buffer per read       bytes only) into a buffer of its own
 * </pre>
 *
 * <p>Whole records are opened straight out of the read buffer into one output buffer per read,
 * sized from the headers of the records that read completes (a record it completes goes on in an
 * output of its own first when sharing would make the output large, {@link
 * #MAX_SHARED_OUTPUT_BYTES}). A record a read cuts short stays
 * where it lies when the read buffer has room for the rest and pins at most {@link #HEAD_RATIO}
 * times what has come and a quarter more than the record (a read sized to one record, as ALTS's
 * are): the rest is read in behind its head, and nothing is copied. Otherwise it
 * is copied into a buffer of its own (before its header is complete, into a {@code long}), so the
 * read buffer is released at once. That buffer takes the whole record's size once a quarter of
 * the record has come ({@link #HEAD_RATIO}); before, only the head's, so a peer that stalls early
 * in a large record pins little more than it sent. When the rest is large ({@link
 * #MIN_DIRECT_READ_BYTES} or more), the next read goes straight into that buffer ({@link
 * #nextReadBuffer}), grown to the record's size first. A header is checked before anything is
 * allocated from it.
 *
 * <p>A subclass names the header's size and checks it, bounds and allocates the output, and opens
 * one whole record. Headers are up to 8 bytes, read big endian into a {@code long}.
 *
 * <p>Errors: a bad header or a record that does not open is fatal: the plaintext of the records
 * before it is handed on, the exception is rethrown, and later input is dropped. So is everything
 * after the layer's end of input ({@link #endInput}, such as TLS's close_notify).
 *
 * <p>Memory: idle it holds no buffer; mid-record, one buffer of at most that record's size, or
 * the read buffer the record came in: at most {@link #HEAD_RATIO} times the bytes received, and
 * 5/4 of the record.
 * Confined to the channel's event loop.
 */
public abstract class RecordFraming {
  /**
   * 4 KiB: a partial record missing at least this much is read into directly; a smaller rest is
   * read with whatever follows it and copied.
   */
  public static final int MIN_DIRECT_READ_BYTES = 4096;
  /**
   * A cut record's buffer takes the whole record's size once at least 1/4 of it has come; before,
   * the head's size, grown (one copy of the head) when more comes.
   */
  public static final int HEAD_RATIO = 4;
  /**
   * 64 KiB, the read policy's largest read: a record a read completes shares the read's output
   * with the whole records behind it up to this much plaintext; past it, it goes on alone.
   */
  public static final int MAX_SHARED_OUTPUT_BYTES = 64 * 1024;

  private enum State {
    /** Between records: nothing held. */
    IDLE,
    /** Fewer header bytes of the next record than a header; they are in {@link #header}. */
    HEADER,
    /** The header is known; {@link #partial} holds the record's bytes so far. */
    BODY,
    /** The layer's input ended (TLS's close_notify): later input is dropped. */
    ENDED,
    /** A fatal error happened: later input is dropped. */
    FAILED
  }

  private final int headerSize;
  /** The header bytes of the next record while in HEADER, big endian in the low bytes. */
  private long header;
  /** How many bytes of {@link #header} are filled (a byte keeps the object small). */
  private byte headerBytes;
  /**
   * A record partly received, header included, from index 0; only in BODY. Sized to the whole
   * record, or to its head (see {@link #HEAD_RATIO}).
   */
  private ByteBuf partial;
  /** The whole size of the record in {@link #partial}. */
  private int partialRecordBytes;
  /** When {@link #partial} is a slice of the read buffer it came in, that buffer's size; else 0. */
  private int keptReadBytes;
  /** The largest record whose header was read: the size of the peer's bulk records. */
  private int largestRecordBytes;
  private State state = State.IDLE;

  /** @param headerSize the bytes of a record header, 1 to 8 */
  protected RecordFraming(int headerSize) {
    if (headerSize < 1 || headerSize > 8) {
      throw new IllegalArgumentException("a header of 1 to 8 bytes: " + headerSize);
    }
    this.headerSize = headerSize;
  }

  /**
   * Checks a header before anything is allocated from it.
   *
   * @param header its bytes, big endian in the low bytes
   * @return the whole record's size, header included
   * @throws RuntimeException the layer's own, naming what is wrong
   */
  protected abstract int recordBytes(long header);

  /** The most plaintext a whole record of {@code recordBytes} can carry. */
  protected abstract int plaintextBound(int recordBytes);

  /**
   * @return owned by the caller: a pooled buffer with room for {@code plaintextBytes} after its
   *     writer index, and {@code headroom} free bytes before its reader index where it can
   */
  protected abstract ByteBuf allocateOutput(
      ChannelHandlerContext ctx, int headroom, int plaintextBytes);

  /**
   * Opens one whole record.
   *
   * @param record borrowed: indexes are not moved
   * @param out borrowed: its writer index is advanced by the plaintext length
   * @throws RuntimeException the layer's own when the record does not open
   */
  protected abstract void openRecord(ByteBuf record, int start, int recordBytes, ByteBuf out);

  /** The exception for input that ended in the middle of a record. */
  protected abstract RuntimeException truncated(String what);

  /**
   * The size of a fresh read between records (a cut record's rest is added to it).
   *
   * @param largestRecordBytes the largest record's size so far, header included; 0 before any
   */
  protected abstract int freshReadBytes(int largestRecordBytes);

  /**
   * Opens every record {@code in} completes and hands their plaintext to {@code out}; after the
   * end of input or a fatal error, drops {@code in}'s bytes.
   *
   * @param in borrowed: its reader index is advanced past everything consumed; it may be the
   *     partial record itself, when the socket read straight into it
   * @param out takes ownership of each plaintext buffer
   * @throws RuntimeException the layer's own on a fatal error, after the plaintext before it
   */
  protected final void openRecords(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> out) {
    if (stopped()) {
      in.skipBytes(in.readableBytes());
      return;
    }
    ByteBuf plaintext;
    try {
      plaintext = decode(ctx, in, headroom, out);
    } catch (RuntimeException e) {
      state = State.FAILED;
      releasePartial();
      throw e;
    }
    if (plaintext != null) {
      out.accept(ctx, plaintext);
    }
  }

  /** True once input ended or failed: later input is dropped. */
  protected final boolean stopped() {
    return state == State.ENDED || state == State.FAILED;
  }

  /** True once {@link #endInput} was called. */
  protected final boolean inputEnded() {
    return state == State.ENDED;
  }

  /** Ends the input, from an {@link #openRecord} that opened the layer's last record. */
  protected final void endInput() {
    state = State.ENDED;
  }

  /**
   * Opens what {@code msg} completes; on a fatal error hands on the plaintext so far and rethrows.
   *
   * @param msg borrowed
   * @return plaintext the caller hands on (owned by it), or null
   */
  private ByteBuf decode(ChannelHandlerContext ctx, ByteBuf msg, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> handOn) {
    // A read that went straight into the partial record brought nothing else.
    boolean direct = msg == partial;
    ByteBuf in = direct ? Unpooled.EMPTY_BUFFER : msg;
    if (state == State.HEADER) {
      fillHeader(ctx, in);
    }
    if (state == State.BODY) {
      if (!direct && in.isReadable()) {
        growPartial();
        int n = Math.min(missing(), in.readableBytes());
        partial.writeBytes(in, n);
        Metric.RECORD_BYTES_COPIED.add(n);
      }
      if (missing() > 0) {
        return null;
      }
    }
    // Size the output from the headers of the whole records in this read. A bad header stops
    // the scan: the records before it are opened and handed on before the error.
    int plaintextBytes = 0;
    int index = in.readerIndex();
    int end = in.writerIndex();
    RuntimeException headerError = null;
    while (end - index >= headerSize) {
      int recordBytes;
      try {
        recordBytes = recordBytes(peekHeader(in, index));
      } catch (RuntimeException e) {
        headerError = e;
        break;
      }
      if (end - index < recordBytes) {
        break;
      }
      seen(recordBytes);
      plaintextBytes += plaintextBound(recordBytes);
      index += recordBytes;
    }
    int wholeEnd = index;
    if (state == State.BODY) {
      int partialPlaintext = plaintextBound(partial.readableBytes());
      if (plaintextBytes > 0 && partialPlaintext + plaintextBytes > MAX_SHARED_OUTPUT_BYTES) {
        openPartial(ctx, headroom, handOn);
      } else {
        plaintextBytes += partialPlaintext;
      }
    }
    ByteBuf out = plaintextBytes == 0
        ? Unpooled.EMPTY_BUFFER : allocateOutput(ctx, headroom, plaintextBytes);
    try {
      if (state == State.BODY) {
        state = State.IDLE;
        openRecord(partial, partial.readerIndex(), partial.readableBytes(), out);
        partial.release();
        partial = null;
        keptReadBytes = 0;
      }
      while (in.readerIndex() < wholeEnd && state == State.IDLE) {
        int start = in.readerIndex();
        int recordBytes = recordBytes(peekHeader(in, start));
        openRecord(in, start, recordBytes, out);
        in.readerIndex(start + recordBytes);
      }
      if (headerError != null && state == State.IDLE) {
        throw headerError;
      }
    } catch (RuntimeException e) {
      handOnIfReadable(ctx, out, handOn);
      throw e;
    }
    if (state == State.ENDED) {
      in.skipBytes(in.readableBytes());
    } else if (in.isReadable() && !keepCutRecord(in)) {
      fillHeader(ctx, in);
    }
    if (!out.isReadable()) {
      out.release();
      return null;
    }
    return out;
  }

  /**
   * Opens the partial record, now whole, into a buffer of its own and hands it on: when it and
   * the whole records behind it in the read would share more than {@link
   * #MAX_SHARED_OUTPUT_BYTES}. The frame slicer slices a DATA frame only from a buffer at most 4
   * times its size, so one buffer for two 128 KiB records would have it copy the 64 KiB frames
   * it slices from either alone. Below that, one buffer: each split cuts a frame, and a stream of
   * tiny frames would go on in more, smaller pieces.
   */
  private void openPartial(ChannelHandlerContext ctx, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> handOn) {
    ByteBuf out = allocateOutput(ctx, headroom, plaintextBound(partial.readableBytes()));
    state = State.IDLE;
    try {
      openRecord(partial, partial.readerIndex(), partial.readableBytes(), out);
    } catch (RuntimeException e) {
      out.release();
      throw e;
    }
    partial.release();
    partial = null;
    keptReadBytes = 0;
    handOnIfReadable(ctx, out, handOn);
  }

  /**
   * Keeps a record cut at the end of {@code in} where it lies, when the read buffer has room for
   * the rest of it and pins at most {@link #HEAD_RATIO} times what has come and a quarter more
   * than the record: the record's buffer is then a slice of the read buffer, the next read goes
   * on where this one ended, and its head is never copied.
   *
   * @param in borrowed: a read buffer holding the cut record's head and nothing after it; its
   *     reader index is advanced past the head when it is kept
   * @return false when the head is to be copied instead
   */
  private boolean keepCutRecord(ByteBuf in) {
    int start = in.readerIndex();
    int head = in.readableBytes();
    if (head < headerSize || (long) head * HEAD_RATIO < in.capacity() || in.isReadOnly()) {
      return false;
    }
    int recordBytes = recordBytes(peekHeader(in, start));
    if (recordBytes <= MIN_DIRECT_READ_BYTES || start + recordBytes > in.capacity()
        || in.capacity() > recordBytes + recordBytes / HEAD_RATIO) {
      return false;
    }
    seen(recordBytes);
    partial = in.retainedSlice(start, recordBytes).writerIndex(head);
    partialRecordBytes = recordBytes;
    keptReadBytes = in.capacity();
    state = State.BODY;
    in.skipBytes(head);
    return true;
  }

  private long peekHeader(ByteBuf in, int index) {
    if (headerSize == 8) {
      return in.getLong(index);
    }
    long bytes = 0;
    for (int i = 0; i < headerSize; i++) {
      bytes = bytes << 8 | in.getUnsignedByte(index + i);
    }
    return bytes;
  }

  /**
   * Takes header bytes of the next record from {@code in}; once the header is complete, checks it
   * and moves to BODY with a buffer of exactly the record's size.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   */
  private void fillHeader(ChannelHandlerContext ctx, ByteBuf in) {
    while (headerBytes < headerSize && in.isReadable()) {
      header = header << 8 | in.readUnsignedByte();
      headerBytes++;
    }
    if (headerBytes < headerSize) {
      state = State.HEADER;
      return;
    }
    long bytes = header;
    header = 0;
    headerBytes = 0;
    int recordBytes = recordBytes(bytes);
    seen(recordBytes);
    int head = headerSize + Math.min(recordBytes - headerSize, in.readableBytes());
    boolean whole = recordBytes <= MIN_DIRECT_READ_BYTES || (long) head * HEAD_RATIO >= recordBytes;
    partial = ctx.alloc().directBuffer(whole ? recordBytes : head);
    partialRecordBytes = recordBytes;
    for (int shift = 8 * (headerSize - 1); shift >= 0; shift -= 8) {
      partial.writeByte((int) (bytes >>> shift));
    }
    state = State.BODY;
    int n = Math.min(missing(), in.readableBytes());
    partial.writeBytes(in, n);
    Metric.RECORD_BYTES_COPIED.add(headerSize + n);
  }

  /** @param out owned: handed on when readable, else released */
  private static void handOnIfReadable(
      ChannelHandlerContext ctx, ByteBuf out, BiConsumer<ChannelHandlerContext, ByteBuf> handOn) {
    if (out.isReadable()) {
      handOn.accept(ctx, out);
    } else {
      out.release();
    }
  }

  /**
   * The peer closed.
   *
   * @throws RuntimeException the layer's {@link #truncated} if a record was partly received
   */
  public void endOfInput() {
    if (state != State.HEADER && state != State.BODY) {
      return;
    }
    String what = state == State.HEADER
        ? headerBytes + " of " + headerSize + " bytes of a record header"
        : partial.readableBytes() + " of " + partialRecordBytes + " bytes of a record";
    state = State.FAILED;
    releasePartial();
    throw truncated(what);
  }

  /**
   * While a record is cut short by a read, the next read goes straight into its buffer, so the
   * rest of the record is never copied.
   *
   * @return owned by the read loop (retained for it): the partial record, to read into at its
   *     writer index; null for a fresh read buffer
   */
  public ByteBuf nextReadBuffer() {
    if (state != State.BODY || missing() < MIN_DIRECT_READ_BYTES) {
      return null;
    }
    growPartial();
    return partial.retain();
  }

  /**
   * Sizes fresh reads from the record stream, so that reads of a bulk stream of full records hold
   * whole records: between records (or before a cut header is complete), {@link
   * #freshReadBytes}; with a small rest of a cut record pending, that rest and as much behind it.
   */
  public int nextReadBytes() {
    switch (state) {
      case IDLE:
      case HEADER:
        return freshReadBytes(largestRecordBytes);
      case BODY:
        return missing() + freshReadBytes(largestRecordBytes);
      default:
        return 0;
    }
  }

  /** Notes the size of a record whose header was just read. */
  private void seen(int recordBytes) {
    largestRecordBytes = Math.max(largestRecordBytes, recordBytes);
  }

  /** Bytes of the partial record still to come. */
  private int missing() {
    return partialRecordBytes - partial.writerIndex();
  }

  /** Gives the partial record a buffer of the whole record's size, copying its head if it must. */
  private void growPartial() {
    if (partial.capacity() < partialRecordBytes) {
      partial.capacity(partialRecordBytes);
      Metric.RECORD_BYTES_COPIED.add(partial.readableBytes());
    }
  }

  /** Releases the partial record, if any. */
  protected void releasePartial() {
    header = 0;
    headerBytes = 0;
    if (partial != null) {
      partial.release();
      partial = null;
    }
    partialRecordBytes = 0;
    keptReadBytes = 0;
  }

  /** How many bytes are held between reads: 0 when idle. */
  public int heldBytes() {
    if (partial == null) {
      return 0;
    }
    return keptReadBytes > 0 ? keptReadBytes : partial.capacity();
  }
}
