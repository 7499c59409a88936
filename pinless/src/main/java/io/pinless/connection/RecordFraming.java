package io.pinless.connection;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The receiving half every record layer here shares (ALTS's and TLS's): records cut out of the
 * buffers the socket reads into, with no cumulation.
 *
 * <pre>
 *   read buffer:  | record 1 | record 2 | head of record 3 |
 *                      |          |            |
 *                      v open     v open       v a {@link PartialRecord}: kept where it lies when
 *   handed on:    | plain 1  | plain 2  |        the read buffer has room for its rest, else
 *                 a pooled buffer per 64 KiB     copied into a small buffer of its own
 * </pre>
 *
 * <p>Whole records are opened straight out of the read buffer into pooled output buffers, sized
 * from the headers of the records that read completes: the records of a read share one output up
 * to {@link #MAX_SHARED_OUTPUT_BYTES} of plaintext, and a larger record has one of its own.
 *
 * <p>A record a read cuts short is a {@link PartialRecord}, which holds at most {@value
 * PartialRecord#HEAD_RATIO} times what has come of it. It stays where it lies when the read buffer
 * has room for the rest, or can grow in place to hold it (a read a stage sizes can grow by a
 * quarter, {@link io.pinless.read.ReadPolicy.ReadTarget#nextReadBytes}). It must then pin at
 * most that ratio and be at most a quarter larger than the record (a read sized to one record, as
 * ALTS's are). The rest is read in behind its head and nothing is copied. A large rest is read
 * straight into the record's buffer, or in behind a copy of a small head ({@link
 * #nextReadBuffer}). A header is checked before anything is allocated from it.
 *
 * <p>A transport that sizes reads itself (io_uring with a provided-buffer ring) ends them where
 * data has arrived, and a record such a read cuts is copied. The framing warns once in the process
 * when a ring's buffers are too small, or the records too large, for that to stay rare ({@link
 * #RING_BUFFER_BYTES}, {@link #RING_RECORD_BYTES}).
 *
 * <p>A subclass names the header's size and checks it, bounds and allocates the output, and opens
 * one whole record. Headers are up to 8 bytes, read big endian into a {@code long}.
 *
 * <p>Errors: a bad header or a record that does not open is fatal. The plaintext of the records
 * before it is handed on, the exception is rethrown, and later input is dropped. So is everything
 * after the layer's end of input ({@link #endInput}, such as TLS's close_notify).
 *
 * <p>Memory: idle it holds no buffer. Mid-record it holds what its {@link PartialRecord} holds: at
 * most {@value PartialRecord#HEAD_RATIO} times the bytes of the record received, or {@value
 * PartialRecord#MIN_HEAD_BYTES} bytes. Confined to the channel's event loop.
 */
public abstract class RecordFraming {
  /**
   * 64 KiB, the read policy's largest read: the records of a read share an output up to this much
   * plaintext; a larger record goes on alone.
   */
  public static final int MAX_SHARED_OUTPUT_BYTES = 64 * 1024;
  /**
   * 2 MiB: the least a provided-buffer ring's buffers hold for TLS records to be opened in place
   * from its reads. The kernel sizes those reads, and a record a read cuts is copied: with buffers
   * of 512 KiB, about 5% of TLS's bytes are (docs/benchmarks.md).
   */
  public static final int RING_BUFFER_BYTES = 2 << 20;
  /**
   * 32 KiB: the largest records opened in place from a ring's reads. Reads end where data has
   * arrived, often inside a record, and each cut costs the record a copy: TLS's 16 KiB records
   * stay under 5% of the bytes, ALTS's 128 KiB ones do not (an ALTS end reading from a ring asks
   * for 16 KiB records).
   */
  public static final int RING_RECORD_BYTES = 32 * 1024;

  private static final Logger logger = Logger.getLogger(RecordFraming.class.getName());
  /** The largest buffer a transport picked for a read, in the process: a ring's buffer size. */
  static final AtomicInteger largestTransportBuffer = new AtomicInteger();
  /** The process has warned that a ring's buffers are small for the records read from it. */
  static final AtomicBoolean warnedOfRing = new AtomicBoolean();

  /** Whether input is still taken. */
  private enum Input {
    /** Records are opened. */
    OPEN,
    /** The layer's input ended (TLS's close_notify): later input is dropped. */
    ENDED,
    /** A fatal error happened: later input is dropped. */
    FAILED
  }

  private final int headerSize;
  /** The record a read cut short, if any. */
  private final PartialRecord partial;
  /** The largest record whose header was read: the size of the peer's bulk records. */
  private int largestRecordBytes;
  private Input input = Input.OPEN;

  /** @param headerSize the bytes of a record header, 1 to 8 */
  protected RecordFraming(int headerSize) {
    if (headerSize < 1 || headerSize > 8) {
      throw new IllegalArgumentException("a header of 1 to 8 bytes: " + headerSize);
    }
    this.headerSize = headerSize;
    this.partial = new PartialRecord(headerSize);
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
      input = Input.FAILED;
      releasePartial();
      throw e;
    }
    if (plaintext != null) {
      out.accept(ctx, plaintext);
    }
  }

  /** True once input ended or failed: later input is dropped. */
  protected final boolean stopped() {
    return input != Input.OPEN;
  }

  /** True once {@link #endInput} was called. */
  protected final boolean inputEnded() {
    return input == Input.ENDED;
  }

  /** Ends the input, from an {@link #openRecord} that opened the layer's last record. */
  protected final void endInput() {
    input = Input.ENDED;
  }

  /**
   * Opens what {@code msg} completes; on a fatal error hands on the plaintext so far and rethrows.
   *
   * @param msg borrowed
   * @return plaintext the caller hands on (owned by it), or null
   */
  private ByteBuf decode(ChannelHandlerContext ctx, ByteBuf msg, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> handOn) {
    if (partial.isHeadInFront(msg)) {
      // The read went in behind a copy of the head: msg now starts with the record.
      partial.release();
    }
    // A read that went straight into the partial record brought nothing else.
    ByteBuf in = partial.isBuffer(msg) ? Unpooled.EMPTY_BUFFER : msg;
    if (partial.isStarted() && !fillPartial(ctx, in)) {
      return null;
    }
    ByteBuf record = partial.hasBody() ? partial.take() : null;
    try {
      return openWhole(ctx, record, in, headroom, handOn);
    } finally {
      if (record != null) {
        record.release();
      }
    }
  }

  /**
   * Opens {@code record} (the cut record, now whole) and the whole records of {@code in}, then
   * keeps what follows them as the next cut record.
   *
   * @param record borrowed: null, or a whole record from index 0
   * @param in borrowed: its reader index is advanced past everything consumed
   * @return plaintext the caller hands on (owned by it), or null
   */
  private ByteBuf openWhole(ChannelHandlerContext ctx, ByteBuf record, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> handOn) {
    // Find the whole records of this read. A bad header stops the scan: the records before it
    // are opened and handed on before the error.
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
      index += recordBytes;
    }
    int wholeEnd = index;
    ByteBuf out = null;
    while (!stopped() && (record != null || in.readerIndex() < wholeEnd)) {
      if (out != null) {
        handOnIfReadable(ctx, out, handOn);
      }
      out = openShared(ctx, record, in, wholeEnd, headroom, handOn);
      record = null;
    }
    if (headerError != null && !stopped()) {
      if (out != null) {
        handOnIfReadable(ctx, out, handOn);
      }
      throw headerError;
    }
    if (inputEnded()) {
      in.skipBytes(in.readableBytes());
    } else if (in.isReadable() && !keepCutRecord(in)) {
      fillPartial(ctx, in);
    }
    if (out == null || !out.isReadable()) {
      if (out != null) {
        out.release();
      }
      return null;
    }
    return out;
  }

  /**
   * Opens the next records up to {@code wholeEnd} that share one output: {@code record} first,
   * if not null, then records of {@code in} while their plaintext stays within {@link
   * #MAX_SHARED_OUTPUT_BYTES} (one larger record alone). The frame slicer slices a DATA frame only
   * from a buffer at most 4 times its size, so one buffer for the records of a large read (a
   * provided-buffer ring's) would have it copy the frames instead. Below that, one buffer: each
   * split cuts a frame, and a stream of tiny frames would go on in more, smaller pieces.
   *
   * @param record borrowed: null, or a whole record from index 0
   * @param in borrowed: its reader index is advanced past the records opened
   * @return owned by the caller: the plaintext, possibly empty
   * @throws RuntimeException the layer's own when a record does not open, after handing on the
   *     plaintext before it
   */
  private ByteBuf openShared(ChannelHandlerContext ctx, ByteBuf record, ByteBuf in, int wholeEnd,
      int headroom, BiConsumer<ChannelHandlerContext, ByteBuf> handOn) {
    boolean any = record != null;
    int plaintextBytes = any ? plaintextBound(record.readableBytes()) : 0;
    int sharedEnd = in.readerIndex();
    while (sharedEnd < wholeEnd) {
      int recordBytes = recordBytes(peekHeader(in, sharedEnd));
      int bound = plaintextBound(recordBytes);
      if (any && plaintextBytes + bound > MAX_SHARED_OUTPUT_BYTES) {
        break;
      }
      any = true;
      plaintextBytes += bound;
      sharedEnd += recordBytes;
    }
    ByteBuf out = plaintextBytes == 0
        ? Unpooled.EMPTY_BUFFER : allocateOutput(ctx, headroom, plaintextBytes);
    try {
      if (record != null) {
        openRecord(record, record.readerIndex(), record.readableBytes(), out);
      }
      while (in.readerIndex() < sharedEnd && !stopped()) {
        int start = in.readerIndex();
        int recordBytes = recordBytes(peekHeader(in, start));
        openRecord(in, start, recordBytes, out);
        in.readerIndex(start + recordBytes);
      }
    } catch (RuntimeException e) {
      handOnIfReadable(ctx, out, handOn);
      throw e;
    }
    return out;
  }

  /**
   * Keeps a record cut at the end of {@code in} where it lies, when the read buffer has room for
   * the rest of it (growing in place if it must), pins at most {@value PartialRecord#HEAD_RATIO}
   * times what has come and is at most a quarter larger than the record. The next read then goes
   * on where this one ended, and the head is never copied. A buffer grows in place only into
   * memory it already holds ({@link ByteBuf#maxFastWritableBytes}), such as the rest of a pooled
   * buffer's size class.
   *
   * @param in borrowed: a read buffer holding the cut record's head and nothing after it; its
   *     reader index is advanced past the head when it is kept
   * @return false when the head is to be copied instead
   */
  private boolean keepCutRecord(ByteBuf in) {
    int start = in.readerIndex();
    int head = in.readableBytes();
    if (head < headerSize || (long) head * PartialRecord.HEAD_RATIO < in.capacity()
        || in.isReadOnly()) {
      return false;
    }
    int recordBytes = recordBytes(peekHeader(in, start));
    // The capacity the buffer needs for the whole record, within what it can grow to in place.
    int capacity = Math.max(in.capacity(), start + recordBytes);
    if (recordBytes <= PartialRecord.MIN_DIRECT_READ_BYTES
        || capacity > in.writerIndex() + in.maxFastWritableBytes()
        || (long) head * PartialRecord.HEAD_RATIO < capacity
        || capacity > recordBytes + recordBytes / PartialRecord.HEAD_RATIO) {
      return false;
    }
    in.capacity(capacity);
    seen(recordBytes);
    partial.keep(in, recordBytes);
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
   * Feeds the cut record from {@code in}: header bytes, then, once the header is whole and
   * checked, its body.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   * @return true once the record is whole
   */
  private boolean fillPartial(ChannelHandlerContext ctx, ByteBuf in) {
    if (!partial.hasBody()) {
      if (!partial.takeHeader(in)) {
        return false;
      }
      int recordBytes = recordBytes(partial.header());
      seen(recordBytes);
      partial.start(ctx.alloc(), recordBytes, in);
    } else if (in.isReadable()) {
      partial.append(in);
    }
    return partial.missing() == 0;
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
    if (stopped() || !partial.isStarted()) {
      return;
    }
    String what = partial.describe();
    input = Input.FAILED;
    releasePartial();
    throw truncated(what);
  }

  /**
   * While a large rest of a cut record is to come, the next read goes straight into its buffer,
   * or in behind a copy of a small head, so that rest is not copied.
   *
   * @return owned by the read loop: a buffer to read into at its writer index; null for a fresh
   *     read buffer
   */
  public ByteBuf nextReadBuffer() {
    return stopped() ? null : partial.readBuffer();
  }

  /**
   * Sizes fresh reads from the record stream, so that reads of a bulk stream of full records hold
   * whole records: between records (or before a cut header is complete), {@link
   * #freshReadBytes}; with the rest of a cut record pending, that rest and as much behind it.
   */
  public int nextReadBytes() {
    if (stopped()) {
      return 0;
    }
    int fresh = freshReadBytes(largestRecordBytes);
    return partial.hasBody() ? partial.missing() + fresh : fresh;
  }

  /**
   * The transport picked the next read's buffer, of {@code bytes}: an io_uring provided-buffer
   * ring. Warns once in the process when the ring's buffers (the largest such buffer seen) hold
   * less than {@link #RING_BUFFER_BYTES}, or the records are larger than {@link
   * #RING_RECORD_BYTES}.
   */
  public void readSizedByTransport(int bytes) {
    int ring = largestTransportBuffer.get();
    if (bytes > ring) {
      ring = largestTransportBuffer.accumulateAndGet(bytes, Math::max);
    }
    boolean inPlace = ring >= RING_BUFFER_BYTES && largestRecordBytes <= RING_RECORD_BYTES;
    if (largestRecordBytes == 0 || inPlace || warnedOfRing.get()
        || !warnedOfRing.compareAndSet(false, true)) {
      return;
    }
    logger.log(Level.WARNING, "pinless: records of {0} bytes are read from an io_uring "
        + "provided-buffer ring of {1}-byte buffers. The kernel sizes those reads, and a record "
        + "a read cuts is copied, not opened in place: a ring opens records in place only with "
        + "buffers of at least {2} bytes and records of at most {3} bytes (TLS''s, and ALTS''s "
        + "when an end reads from a ring). Give the ring larger buffers, or read these channels "
        + "without one (no IO_URING_BUFFER_GROUP_ID).", new Object[] {
            Integer.toString(largestRecordBytes), Integer.toString(ring),
            Integer.toString(RING_BUFFER_BYTES), Integer.toString(RING_RECORD_BYTES)});
  }

  /** Notes the size of a record whose header was just read. */
  private void seen(int recordBytes) {
    largestRecordBytes = Math.max(largestRecordBytes, recordBytes);
  }

  /** Releases the partial record, if any. */
  protected void releasePartial() {
    partial.release();
  }

  /** How many bytes are held between reads: 0 when idle. */
  public int heldBytes() {
    return partial.heldBytes();
  }
}
