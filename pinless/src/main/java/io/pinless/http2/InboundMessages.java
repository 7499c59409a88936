package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.util.collection.IntObjectHashMap;
import io.pinless.read.ReadBudget;

/**
 * Where each stream of a connection is in the gRPC message it is receiving, read off the
 * inbound HTTP/2 bytes as they arrive (before the frame slicer cuts them), and how many DATA
 * bytes the peer has sent in all. The read budget uses it to tell what the messages still
 * arriving pin (gRPC holds a message until it is whole) from what the application holds.
 *
 * <pre>
 *   DATA payload:   | pad length u8, if PADDED | data | padding |
 *   gRPC message:   | compressed u8 | length u32 BE | message (length) |   across DATA frames
 * </pre>
 *
 * <p>A stream has an entry only while its current message is incomplete: from the first byte of
 * its prefix to the last of its message. DATA counts only on a stream the peer opened (its
 * HEADERS) and has not closed: its END_STREAM, a RST_STREAM in either direction ({@link
 * #forget}), or this server's trailers ({@link #finished}) close it and drop its message. gRPC
 * discards DATA that comes after (a frame in flight when this end reset the stream, what a client
 * sends after the server ended the call), and so does this reader: read as a message, it would
 * claim a length nobody sent. A message longer than the limit given at construction is outside
 * the limits: its bytes count toward nothing ({@link #pendingFrameBytes}, {@link
 * #remainingBytes}), and gRPC refuses it or the budget holds it back.
 *
 * <p>A message whose length is known may be marked covered ({@link #coverAll}): a loan from the
 * process's budget covers it, and a message started after that is not covered until the next.
 *
 * <p>It reads only headers, pad lengths and gRPC prefixes; it never looks at message bytes and
 * never rejects input (a protocol error is grpc-netty's to find).
 *
 * <p>Memory: idle it holds no table and no header buffer; one small entry per open stream, and
 * one per stream with an incomplete message. It holds no {@link ByteBuf}.
 */
public final class InboundMessages implements ReadBudget.Messages {
  /** A gRPC message's prefix: a compressed flag and a 4-byte length. */
  static final int GRPC_PREFIX_BYTES = 5;

  /** Where the reader is in the inbound bytes. */
  private enum State {
    /** Nothing read yet: a client preface may come first. */
    START,
    /** Inside the client preface: {@link #left} bytes of it to come. */
    PREFACE,
    /** At or inside a frame header: {@link #headerBytes} of it read. */
    HEADER,
    /** A PADDED DATA frame's pad length byte is next. */
    PAD_LENGTH,
    /** Inside a DATA frame's data: {@link #left} bytes to come, then {@link #padLeft}. */
    DATA,
    /** Inside bytes nobody reads (another frame's payload, padding): {@link #left} to come. */
    SKIP
  }

  /** One stream's incomplete message. */
  private static final class Message {
    /** Prefix bytes read so far, 0 to 5. */
    int prefixBytes;
    /** The length the prefix gives, once whole. */
    long length;
    /** Message bytes still to come, once the prefix is whole. */
    long left;
    /** Bytes of the DATA frames (headers included) that carried this message so far. */
    long frameBytes;
    /** False once the prefix gives a length over the limit. */
    boolean withinLimit = true;
    /** A loan from the process's budget covers the rest of this message. */
    boolean covered;

    long remaining() {
      return left + GRPC_PREFIX_BYTES - prefixBytes;
    }
  }

  private final long maxMessageBytes;
  private State state = State.START;
  /** The frame header being read; made only while one is cut. */
  private byte[] header;
  private int headerBytes;
  /** Bytes to come in the current state. */
  private long left;
  /** Padding after the current DATA frame's data. */
  private int padLeft;
  private int frameStream;
  private int frameFlags;
  /** The current DATA frame's size, header included, while none of its data has been read. */
  private long untouchedFrameBytes;
  /** Incomplete messages by stream; null when none. */
  private IntObjectHashMap<Message> messages;
  /** Streams the peer may still send DATA on; null when none. */
  private IntObjectHashMap<Boolean> open;
  /** DATA bytes received, padding included: what flow control counts. */
  private long dataBytes;
  /** Sum of {@link Message#frameBytes} over messages within the limit. */
  private long pendingFrameBytes;

  /** A reader for which messages over {@code maxMessageBytes} are outside the limits. */
  public InboundMessages(long maxMessageBytes) {
    this.maxMessageBytes = maxMessageBytes;
  }

  /**
   * Reads the next inbound bytes of the connection.
   *
   * @param in borrowed: its readable bytes are read; its indexes are not moved
   */
  public void read(ByteBuf in) {
    int pos = in.readerIndex();
    int end = in.writerIndex();
    while (pos < end) {
      pos = step(in, pos, end);
    }
  }

  /** This end reset {@code stream}: its message, and the rest of its frame being read, go. */
  public void forget(int stream) {
    close(stream);
  }

  /**
   * This end (a server) sent {@code stream}'s trailers: gRPC discards what else the client sends
   * on it, so its message goes, and so does the rest of its frame being read.
   */
  public void finished(int stream) {
    close(stream);
  }

  private void close(int stream) {
    drop(stream);
    if (open != null) {
      open.remove(stream);
      if (open.isEmpty()) {
        open = null;
      }
    }
    if (frameStream == stream && (state == State.DATA || state == State.PAD_LENGTH)) {
      left += padLeft;
      padLeft = 0;
      state = State.SKIP;
    }
  }

  /** DATA bytes (padding included) the peer has sent on the connection. */
  @Override
  public long dataBytes() {
    return dataBytes;
  }

  /**
   * What the DATA frames of incomplete messages within the limit measure, headers included: the
   * bytes gRPC holds until those messages are whole.
   */
  @Override
  public long pendingFrameBytes() {
    return pendingFrameBytes;
  }

  /** The bytes still to come of the incomplete messages within the limit. */
  @Override
  public long remainingBytes() {
    return remainingBytes(false);
  }

  /** The bytes still to come of the incomplete messages within the limit that are covered. */
  @Override
  public long coveredBytes() {
    return remainingBytes(true);
  }

  /**
   * Marks every incomplete message within the limit whose length is known as covered; a prefix
   * cut short claims nothing yet, so it is not.
   */
  @Override
  public void coverAll() {
    if (messages != null) {
      for (Message m : messages.values()) {
        m.covered = m.prefixBytes == GRPC_PREFIX_BYTES;
      }
    }
  }

  /** Marks every incomplete message as not covered. */
  @Override
  public void uncoverAll() {
    if (messages != null) {
      for (Message m : messages.values()) {
        m.covered = false;
      }
    }
  }

  private long remainingBytes(boolean coveredOnly) {
    if (messages == null) {
      return 0;
    }
    long bytes = 0;
    for (Message m : messages.values()) {
      if (m.withinLimit && (m.covered || !coveredOnly)) {
        bytes += m.remaining();
      }
    }
    return bytes;
  }

  /**
   * The bytes of {@code stream}'s incomplete message received so far, its prefix included; 0 when
   * the stream has none. Every such byte waits for the rest of its message before gRPC can
   * deliver it.
   */
  public long receivedOfMessage(int stream) {
    Message m = messages == null ? null : messages.get(stream);
    if (m == null) {
      return 0;
    }
    if (m.prefixBytes < GRPC_PREFIX_BYTES) {
      return m.prefixBytes;
    }
    return GRPC_PREFIX_BYTES + m.length - m.left;
  }

  /** How many streams have an incomplete message. */
  public int incompleteMessages() {
    return messages == null ? 0 : messages.size();
  }

  /** How many streams the peer may still send DATA on. */
  int openStreams() {
    return open == null ? 0 : open.size();
  }

  /** Reads from {@code pos}; returns the position after what it read. */
  private int step(ByteBuf in, int pos, int end) {
    switch (state) {
      case START:
        if (in.getByte(pos) == 'P') {
          state = State.PREFACE;
          left = FrameHeader.CLIENT_PREFACE_BYTES;
        } else {
          state = State.HEADER;
        }
        return pos;
      case PREFACE:
      case SKIP: {
        int n = (int) Math.min(left, end - pos);
        left -= n;
        if (left == 0) {
          state = State.HEADER;
        }
        return pos + n;
      }
      case HEADER:
        return readHeader(in, pos, end);
      case PAD_LENGTH: {
        int pad = in.getUnsignedByte(pos);
        if (pad >= left) {
          // Padding longer than the payload: grpc-netty refuses the frame; skip it.
          left -= 1;
          state = left == 0 ? State.HEADER : State.SKIP;
          endFrame();
          return pos + 1;
        }
        padLeft = pad;
        left -= 1 + pad;
        startData();
        return pos + 1;
      }
      case DATA:
        return readData(in, pos, end);
      default:
        throw new IllegalStateException(state.name());
    }
  }

  private int readHeader(ByteBuf in, int pos, int end) {
    int at;
    if (headerBytes == 0 && end - pos >= FrameHeader.BYTES) {
      at = pos;
      pos += FrameHeader.BYTES;
      startFrame(in.getUnsignedMedium(at), in.getUnsignedByte(at + 3),
          in.getUnsignedByte(at + 4), in.getInt(at + 5) & 0x7fffffff);
      return pos;
    }
    if (header == null) {
      header = new byte[FrameHeader.BYTES];
    }
    int n = Math.min(FrameHeader.BYTES - headerBytes, end - pos);
    in.getBytes(pos, header, headerBytes, n);
    headerBytes += n;
    if (headerBytes == FrameHeader.BYTES) {
      byte[] h = header;
      header = null;
      headerBytes = 0;
      startFrame((h[0] & 0xff) << 16 | (h[1] & 0xff) << 8 | (h[2] & 0xff), h[3] & 0xff,
          h[4] & 0xff, ((h[5] & 0x7f) << 24 | (h[6] & 0xff) << 16 | (h[7] & 0xff) << 8
              | (h[8] & 0xff)));
    }
    return pos + n;
  }

  private void startFrame(int length, int type, int flags, int stream) {
    left = length;
    boolean endStream = (flags & FrameHeader.FLAG_END_STREAM) != 0;
    if (type == FrameHeader.TYPE_RST_STREAM || type == FrameHeader.TYPE_HEADERS && endStream) {
      close(stream);
    } else if (type == FrameHeader.TYPE_HEADERS && stream != 0) {
      if (open == null) {
        open = new IntObjectHashMap<>(4);
      }
      open.put(stream, Boolean.TRUE);
    }
    if (type == FrameHeader.TYPE_DATA) {
      dataBytes += length;
    }
    if (type != FrameHeader.TYPE_DATA || open == null || !open.containsKey(stream)) {
      // Not DATA, or DATA gRPC discards (on a stream not open) and that counts toward nothing.
      state = length == 0 ? State.HEADER : State.SKIP;
      return;
    }
    frameStream = stream;
    frameFlags = flags;
    padLeft = 0;
    untouchedFrameBytes = FrameHeader.BYTES + length;
    Message m = messages == null ? null : messages.get(stream);
    // An empty frame carries nothing and costs the peer no window: it must not lift the budget.
    if (m != null && length > 0) {
      addFrameBytes(m, FrameHeader.BYTES + length);
      untouchedFrameBytes = 0;
    }
    if ((flags & FrameHeader.FLAG_PADDED) != 0 && length > 0) {
      state = State.PAD_LENGTH;
    } else {
      startData();
    }
  }

  /** The current DATA frame's data is next ({@link #left} bytes, then {@link #padLeft}). */
  private void startData() {
    if (left > 0) {
      state = State.DATA;
    } else if (padLeft > 0) {
      left = padLeft;
      padLeft = 0;
      state = State.SKIP;
      endFrame();
    } else {
      state = State.HEADER;
      endFrame();
    }
  }

  private int readData(ByteBuf in, int pos, int end) {
    Message m = messages == null ? null : messages.get(frameStream);
    if (m == null) {
      m = new Message();
      // The frame carries this message: all of it, or the rest after the message before.
      m.frameBytes = untouchedFrameBytes > 0 ? untouchedFrameBytes : left + padLeft;
      if (messages == null) {
        messages = new IntObjectHashMap<>(4);
      }
      messages.put(frameStream, m);
      pendingFrameBytes += m.frameBytes;
    }
    untouchedFrameBytes = 0;
    int n;
    if (m.prefixBytes < GRPC_PREFIX_BYTES) {
      n = 1;
      if (m.prefixBytes > 0) {
        m.length = m.length << 8 | in.getUnsignedByte(pos);
      }
      if (++m.prefixBytes == GRPC_PREFIX_BYTES) {
        m.left = m.length;
        if (m.length > maxMessageBytes) {
          m.withinLimit = false;
          pendingFrameBytes -= m.frameBytes;
        }
      }
    } else {
      n = (int) Math.min(m.left, Math.min(left, end - pos));
      m.left -= n;
    }
    left -= n;
    if (m.prefixBytes == GRPC_PREFIX_BYTES && m.left == 0) {
      drop(frameStream);
    }
    if (left == 0) {
      if (padLeft > 0) {
        left = padLeft;
        padLeft = 0;
        state = State.SKIP;
        endFrame();
      } else {
        state = State.HEADER;
        endFrame();
      }
    }
    return pos + n;
  }

  /** The current DATA frame's data has ended: END_STREAM closes its stream. */
  private void endFrame() {
    if ((frameFlags & FrameHeader.FLAG_END_STREAM) != 0) {
      close(frameStream);
    }
  }

  private void addFrameBytes(Message m, long bytes) {
    m.frameBytes += bytes;
    if (m.withinLimit) {
      pendingFrameBytes += bytes;
    }
  }

  private void drop(int stream) {
    if (messages == null) {
      return;
    }
    Message m = messages.remove(stream);
    if (m != null && m.withinLimit) {
      pendingFrameBytes -= m.frameBytes;
    }
    if (messages.isEmpty()) {
      messages = null;
    }
  }
}
