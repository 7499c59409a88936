package io.pinless.connection;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.pinless.PinlessMetrics.Metric;

/**
 * The one record a read cut short, from its first header byte to its last byte.
 *
 * <pre>
 *   EMPTY --header bytes--> HEADER --header whole--> HEAD --a quarter came--> WHOLE
 *     |                                  |                                      ^
 *     |                                  +------a quarter came at once----------+
 *     +--a head whose read buffer has room for the rest--> KEPT
 *
 *   HEAD, WHOLE or KEPT --last byte came, record taken--> EMPTY
 * </pre>
 *
 * <p>Invariant: the bytes held are at most {@link #HEAD_RATIO} times the bytes received, or
 * {@link #MIN_HEAD_BYTES}, whichever is more. A header claiming a large record therefore pins no
 * more than its sender sent. A HEAD buffer grows geometrically as bytes come, copying what it
 * holds, and takes the whole record's size once a quarter of the record has come (WHOLE). A head
 * too small to leave room for a read goes in front of the next read's buffer instead ({@link
 * #readBuffer}), so a bulk record's rest is not copied.
 *
 * <p>Ownership: {@link #buffer} is this object's reference. In KEPT it is a retained slice of the
 * read buffer the head came in, which it pins whole; that buffer held at most {@link #HEAD_RATIO}
 * times the head when kept.
 *
 * <p>Memory: EMPTY and HEADER hold no buffer (a header sits in a {@code long}). HEAD, WHOLE and
 * KEPT hold one buffer, within the invariant. Confined to the channel's event loop.
 */
final class PartialRecord {
  /** Bytes held per byte received, at most: the bound a slow or stalling peer gets. */
  static final int HEAD_RATIO = 4;
  /** 64 bytes: the smallest head buffer, so a trickle of single bytes does not regrow it often. */
  static final int MIN_HEAD_BYTES = 64;
  /**
   * 4 KiB: the least room a read straight into the record must have; a smaller rest is read with
   * whatever follows it and copied.
   */
  static final int MIN_DIRECT_READ_BYTES = 4096;

  enum State {
    /** Between records: nothing held. */
    EMPTY,
    /** Fewer bytes of the next header than a header; they are in {@link #header}. */
    HEADER,
    /** The header is known; a buffer of our own smaller than the record holds its head. */
    HEAD,
    /** The header is known; a buffer of our own of the record's size holds its bytes so far. */
    WHOLE,
    /** The header is known; the head lies where it came, in a slice of its read buffer. */
    KEPT
  }

  private final int headerSize;
  private State state = State.EMPTY;
  /** The header bytes so far in HEADER, big endian in the low bytes. */
  private long header;
  /** How many bytes of {@link #header} are filled. */
  private byte headerBytes;
  /** The record's bytes so far from index 0, header included; null in EMPTY and HEADER. */
  private ByteBuf buffer;
  /** The whole record's size, header included; 0 in EMPTY and HEADER. */
  private int recordBytes;
  /** In KEPT, the capacity of the read buffer the slice pins; else 0. */
  private int keptReadBytes;
  /**
   * The fresh buffer the last {@link #readBuffer} copied the head into, compared by identity
   * only: the read loop owns it.
   */
  private ByteBuf headInFront;

  /** @param headerSize the bytes of a record header, 1 to 8 */
  PartialRecord(int headerSize) {
    this.headerSize = headerSize;
  }

  /** True from the header's first byte until the record is taken. */
  boolean isStarted() {
    return state != State.EMPTY;
  }

  /** True once the header is known and a buffer holds the record's bytes so far. */
  boolean hasBody() {
    return state == State.HEAD || state == State.WHOLE || state == State.KEPT;
  }

  /**
   * Takes header bytes from {@code in} until the header is whole.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   * @return true once the header is whole ({@link #header})
   */
  boolean takeHeader(ByteBuf in) {
    while (headerBytes < headerSize && in.isReadable()) {
      header = header << 8 | in.readUnsignedByte();
      headerBytes++;
    }
    state = State.HEADER;
    return headerBytes == headerSize;
  }

  /** The header {@link #takeHeader} completed, big endian in the low bytes. */
  long header() {
    return header;
  }

  /**
   * Starts the body of a record whose header {@link #takeHeader} just completed and the layer
   * checked: a buffer within the invariant takes the header and what {@code in} has of the rest.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   */
  void start(ByteBufAllocator alloc, int recordBytes, ByteBuf in) {
    int received = headerSize + Math.min(recordBytes - headerSize, in.readableBytes());
    this.recordBytes = recordBytes;
    buffer = alloc.directBuffer(allowed(received));
    for (int shift = 8 * (headerSize - 1); shift >= 0; shift -= 8) {
      buffer.writeByte((int) (header >>> shift));
    }
    header = 0;
    headerBytes = 0;
    int n = received - headerSize;
    buffer.writeBytes(in, n);
    Metric.RECORD_BYTES_COPIED.add(received);
    state = buffer.capacity() >= recordBytes ? State.WHOLE : State.HEAD;
  }

  /**
   * Keeps a record's head where it lies: the next reads go on in the same read buffer behind it.
   *
   * @param in borrowed: a read buffer ending with the head; its reader index is advanced past it
   */
  void keep(ByteBuf in, int recordBytes) {
    int head = in.readableBytes();
    buffer = in.retainedSlice(in.readerIndex(), recordBytes).writerIndex(head);
    this.recordBytes = recordBytes;
    keptReadBytes = in.capacity();
    state = State.KEPT;
    in.skipBytes(head);
  }

  /**
   * Copies what {@code in} has of the rest of the record, growing the buffer within the invariant.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   */
  void append(ByteBuf in) {
    int n = Math.min(missing(), in.readableBytes());
    if (buffer.capacity() < buffer.writerIndex() + n) {
      grow(allowed(buffer.writerIndex() + n));
    }
    buffer.writeBytes(in, n);
    Metric.RECORD_BYTES_COPIED.add(n);
  }

  /**
   * The buffer the next read fills, when the rest of the record is at least {@link
   * #MIN_DIRECT_READ_BYTES}: the record's own buffer, grown within the invariant, when that leaves
   * room for such a read. A smaller head is copied to the front of a fresh buffer of the record's
   * size instead, so the rest is read in behind it and not copied. That buffer is the read
   * loop's: the head stays here until a read fills it ({@link #isHeadInFront}).
   *
   * @return owned by the caller (the read loop): the record's buffer retained, or a fresh one
   *     with the head in front; null when the next read is an ordinary fresh one
   */
  ByteBuf readBuffer() {
    headInFront = null;
    if (!hasBody() || missing() < MIN_DIRECT_READ_BYTES) {
      return null;
    }
    if (state == State.HEAD) {
      int received = buffer.writerIndex();
      int capacity = allowed(received);
      if (capacity - received < MIN_DIRECT_READ_BYTES) {
        headInFront = buffer.alloc().directBuffer(recordBytes).writeBytes(buffer, 0, received);
        Metric.RECORD_BYTES_COPIED.add(received);
        return headInFront;
      }
      grow(capacity);
    }
    return buffer.retain();
  }

  /**
   * True when {@code msg} is the buffer {@link #readBuffer} last put the head in front of, and a
   * read filled it: the record starts it, so the head held here is no longer needed.
   */
  boolean isHeadInFront(Object msg) {
    return msg != null && msg == headInFront;
  }

  /** True when {@code msg} is this record's buffer, which a read went straight into. */
  boolean isBuffer(Object msg) {
    return msg != null && msg == buffer;
  }

  /** Bytes of the record still to come; only with a body. */
  int missing() {
    return recordBytes - buffer.writerIndex();
  }

  /**
   * Hands over the whole record and returns to EMPTY.
   *
   * @return caller must release: the record from index 0
   */
  ByteBuf take() {
    ByteBuf whole = buffer;
    buffer = null;
    reset();
    return whole;
  }

  /** Bytes held between reads: the buffer, or in KEPT the read buffer it pins; 0 without one. */
  int heldBytes() {
    if (!hasBody()) {
      return 0;
    }
    return state == State.KEPT ? keptReadBytes : buffer.capacity();
  }

  /** What has come of the record, for a truncation's message. */
  String describe() {
    return !hasBody()
        ? headerBytes + " of " + headerSize + " bytes of a record header"
        : buffer.writerIndex() + " of " + recordBytes + " bytes of a record";
  }

  /** Releases what is held and returns to EMPTY. */
  void release() {
    if (buffer != null) {
      buffer.release();
      buffer = null;
    }
    reset();
  }

  private void reset() {
    state = State.EMPTY;
    headInFront = null;
    header = 0;
    headerBytes = 0;
    recordBytes = 0;
    keptReadBytes = 0;
  }

  /** The largest buffer the invariant allows with {@code received} bytes, at most the record. */
  private int allowed(int received) {
    long bound = Math.max(MIN_HEAD_BYTES, (long) HEAD_RATIO * received);
    return (int) Math.min(recordBytes, bound);
  }

  /** Grows an own buffer to {@code capacity} bytes (copying what it holds), if it is smaller. */
  private void grow(int capacity) {
    if (buffer.capacity() >= capacity) {
      return;
    }
    Metric.RECORD_BYTES_COPIED.add(buffer.writerIndex());
    buffer.capacity(capacity);
    if (capacity >= recordBytes) {
      state = State.WHOLE;
    }
  }
}
