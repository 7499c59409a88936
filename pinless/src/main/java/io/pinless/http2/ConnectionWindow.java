package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;

/**
 * The connection-level flow-control window this end grants its peer, read off the HTTP/2 bytes
 * it writes, and a valve on it. While the valve holds, every connection-level WINDOW_UPDATE the
 * HTTP/2 codec writes is withheld and its increment kept, so the peer may send only what it was
 * granted before; {@link #release} turns kept increments into one WINDOW_UPDATE. Flow control is
 * HTTP/2's own back-pressure: the connection goes on reading, so PING, SETTINGS and GOAWAY are
 * still read and answered while the peer waits.
 *
 * <pre>
 *   WINDOW_UPDATE:  | length u24 = 4 | type u8 = 0x8 | flags u8 | R + stream id u31 = 0 |
 *                   | R + increment u31 |
 * </pre>
 *
 * <p>Only a write that is exactly one connection-level WINDOW_UPDATE, at a frame boundary, is
 * withheld (Netty's frame writer writes each as a buffer of its own); any other write passes and
 * is walked frame by frame, its window increments counted as granted. A RST_STREAM this end
 * writes makes {@link InboundMessages} forget the stream, and so do a server's trailers (HEADERS
 * with END_STREAM): gRPC discards what the client sends on the stream after them. The SETTINGS
 * it writes give the smallest initial stream window it has advertised. A write that is not a
 * {@link ByteBuf} ends the walk: from then on nothing is withheld or counted ({@link #tracking}
 * is false).
 *
 * <p>Besides a hold, a cap ({@link #maxCredit}) bounds the credit the peer holds, and the bytes it
 * sends after the cap was set count against it: an update that would pass it is withheld too,
 * and {@link #release} gives no more than it leaves.
 *
 * <p>A hold may owe credit: the bytes still to come of messages under way when it began, which the
 * peer's remaining window did not cover. {@link #release} gives kept increments up to that owed
 * credit while holding, and all of them once the hold ends.
 *
 * <p>Memory: no buffer is held. A withheld frame is released at once (only its increment is
 * kept); a frame header cut across writes is kept in a 13-byte array made only then.
 */
public final class ConnectionWindow {
  /** HTTP/2's initial connection window (RFC 9113, 6.9.2): SETTINGS do not change it. */
  public static final int INITIAL_WINDOW_BYTES = 65535;
  /** A WINDOW_UPDATE frame: a 9-byte header and a 4-byte increment. */
  static final int WINDOW_UPDATE_FRAME_BYTES = 13;
  /** A SETTINGS entry: a 2-byte identifier and a 4-byte value. */
  private static final int SETTING_BYTES = 6;
  private static final int SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
  private static final int FLAG_ACK = 0x1;

  /** Where the walk is in the outbound bytes. */
  private enum State {
    /** Nothing written yet: a client preface may come first. */
    START,
    /** Inside the client preface or a payload nobody reads: {@link #left} bytes to come. */
    SKIP,
    /** At or inside a frame header (with a WINDOW_UPDATE's increment): {@link #cutBytes} read. */
    HEADER,
    /** A write was not a buffer: the walk has stopped. */
    LOST
  }

  private final InboundMessages inbound;
  private State state = State.START;
  /** This end sent no client preface first: it is the server. */
  private boolean server;
  /** A frame start cut across writes; made only then. */
  private byte[] cut;
  private int cutBytes;
  private long left;
  /** The connection window granted to the peer so far. */
  private long granted = INITIAL_WINDOW_BYTES;
  /** Increments withheld and not yet released. */
  private long withheld;
  private boolean holding;
  /**
   * The most this end may have granted in all: the DATA bytes received when the cap was set and
   * the cap. Fixed in those terms, the credit a cap allows is not granted again as it arrives.
   * {@link Long#MAX_VALUE} for no cap.
   */
  private long maxGranted = Long.MAX_VALUE;
  /** While holding: credit still owed to messages under way when the hold began. */
  private long owed;
  /** The smallest SETTINGS_INITIAL_WINDOW_SIZE sent, HTTP/2's default included; 0 when unknown. */
  private long smallestStreamWindow = INITIAL_WINDOW_BYTES;
  /** A write ended an inbound stream (a reset, a server's trailers) since the last look. */
  private boolean streamsEnded;

  /** A window whose writes make {@code inbound} forget the streams this end resets. */
  public ConnectionWindow(InboundMessages inbound) {
    this.inbound = inbound;
  }

  /**
   * Whether the writes since the last call ended an inbound stream: a reset, or a server's
   * trailers. Its DATA waiting for the rest of a message then waits for nothing.
   */
  public boolean takeStreamsEnded() {
    boolean ended = streamsEnded;
    streamsEnded = false;
    return ended;
  }

  /**
   * Reads the next outbound write.
   *
   * @param out borrowed: its indexes are not moved
   * @return true if {@code out} is a connection-level WINDOW_UPDATE withheld: the caller releases
   *     it and completes its write
   */
  public boolean write(ByteBuf out) {
    if (state == State.LOST) {
      return false;
    }
    int pos = out.readerIndex();
    int end = out.writerIndex();
    if (state == State.START && pos < end) {
      pos = step(out, pos, end);
    }
    if (state == State.HEADER && cutBytes == 0 && end - pos == WINDOW_UPDATE_FRAME_BYTES
        && isConnectionWindowUpdate(out, pos)) {
      long increment = out.getInt(pos + FrameHeader.BYTES) & 0x7fffffffL;
      if (holding || granted + increment > maxGranted) {
        withheld += increment;
        return true;
      }
      granted += increment;
      return false;
    }
    while (pos < end) {
      pos = step(out, pos, end);
    }
    return false;
  }

  /** A write that is not a buffer: stops the walk for good. */
  public void lost() {
    state = State.LOST;
    cut = null;
  }

  /** True while every write has been walked, so {@link #granted} is exact. */
  public boolean tracking() {
    return state != State.LOST;
  }

  /** The connection window granted to the peer: the initial window and every increment sent. */
  public long granted() {
    return granted;
  }

  /**
   * The smallest initial stream window this end has advertised (HTTP/2's default until its
   * SETTINGS say otherwise): a stream may be granted no less. 0 once unknown: the walk stopped,
   * or a SETTINGS frame was cut across writes.
   */
  public long smallestStreamWindow() {
    return tracking() ? smallestStreamWindow : 0;
  }

  /** The credit the peer holds: granted less the DATA bytes it has sent; 0 when overdrawn. */
  public long credit() {
    return Math.max(0, granted - inbound.dataBytes());
  }

  /** True while the peer's credit is capped. */
  public boolean capped() {
    return maxGranted != Long.MAX_VALUE;
  }

  /**
   * Caps the peer's credit at {@code bytes} ({@link Long#MAX_VALUE}: no cap), counting the DATA
   * bytes it sends from now on against the cap until the next call.
   */
  public void maxCredit(long bytes) {
    long received = inbound.dataBytes();
    maxGranted = bytes >= Long.MAX_VALUE - received
        ? Long.MAX_VALUE : received + Math.max(0, bytes);
  }

  /** Increments withheld and not yet released. */
  public long withheldBytes() {
    return withheld;
  }

  /** True while connection-level window updates are withheld. */
  public boolean holding() {
    return holding;
  }

  /**
   * Withholds window updates from now on, but for {@code owedBytes} of credit that {@link #release}
   * still gives. Nothing while already holding or not tracking.
   */
  public void hold(long owedBytes) {
    if (holding || !tracking()) {
      return;
    }
    holding = true;
    owed = Math.max(0, owedBytes);
  }

  /** Ends the hold: {@link #release} gives every kept increment. */
  public void unhold() {
    holding = false;
    owed = 0;
  }

  /**
   * A WINDOW_UPDATE for the kept increments that may go now (while holding, up to the owed
   * credit; in any case no more than the cap leaves room for), counted as granted; null when
   * none may go or the walk is inside a frame. The caller writes it past this window (it is not
   * walked) before any other write.
   *
   * @return caller must release (it is written on)
   */
  public ByteBuf release(ByteBufAllocator alloc) {
    long give = Math.min(holding ? Math.min(withheld, owed) : withheld,
        Math.max(0, maxGranted - granted));
    give = Math.min(give, Integer.MAX_VALUE);
    if (give == 0 || state != State.HEADER || cutBytes != 0) {
      return null;
    }
    withheld -= give;
    if (holding) {
      owed -= give;
    }
    granted += give;
    return alloc.buffer(WINDOW_UPDATE_FRAME_BYTES)
        .writeMedium(4).writeByte(FrameHeader.TYPE_WINDOW_UPDATE).writeByte(0).writeInt(0)
        .writeInt((int) give);
  }

  /**
   * Reads the SETTINGS payload of {@code length} bytes at {@code at} for INITIAL_WINDOW_SIZE; a
   * payload not all in {@code buf} makes the stream window unknown.
   */
  private void settings(ByteBuf buf, int at, int length) {
    if (buf.writerIndex() - at < length) {
      smallestStreamWindow = 0;
      return;
    }
    for (int i = at; i + SETTING_BYTES <= at + length; i += SETTING_BYTES) {
      if (buf.getUnsignedShort(i) == SETTINGS_INITIAL_WINDOW_SIZE) {
        smallestStreamWindow = Math.min(smallestStreamWindow, buf.getUnsignedInt(i + 2));
      }
    }
  }

  private static boolean isConnectionWindowUpdate(ByteBuf out, int pos) {
    return out.getUnsignedMedium(pos) == 4
        && out.getUnsignedByte(pos + 3) == FrameHeader.TYPE_WINDOW_UPDATE
        && (out.getInt(pos + 5) & 0x7fffffff) == 0;
  }

  /** Walks from {@code pos}; returns the position after what it read. */
  private int step(ByteBuf out, int pos, int end) {
    switch (state) {
      case START:
        if (out.getByte(pos) == 'P') {
          state = State.SKIP;
          left = FrameHeader.CLIENT_PREFACE_BYTES;
        } else {
          server = true;
          state = State.HEADER;
        }
        return pos;
      case SKIP: {
        int n = (int) Math.min(left, end - pos);
        left -= n;
        if (left == 0) {
          state = State.HEADER;
        }
        return pos + n;
      }
      case HEADER:
        return readFrameStart(out, pos, end);
      default:
        throw new IllegalStateException(state.name());
    }
  }

  /**
   * Reads a frame header, and a connection-level WINDOW_UPDATE's increment with it, from {@code
   * out} or, cut across writes, through {@link #cut}.
   */
  private int readFrameStart(ByteBuf out, int pos, int end) {
    if (cutBytes == 0 && (end - pos >= WINDOW_UPDATE_FRAME_BYTES
        || end - pos >= FrameHeader.BYTES && !isConnectionWindowUpdate(out, pos))) {
      frame(out, pos);
      return pos + FrameHeader.BYTES;
    }
    if (cut == null) {
      cut = new byte[WINDOW_UPDATE_FRAME_BYTES];
    }
    ByteBuf view = Unpooled.wrappedBuffer(cut);
    int wanted = cutBytes >= FrameHeader.BYTES && isConnectionWindowUpdate(view, 0)
        ? WINDOW_UPDATE_FRAME_BYTES : FrameHeader.BYTES;
    int n = Math.min(wanted - cutBytes, end - pos);
    out.getBytes(pos, cut, cutBytes, n);
    cutBytes += n;
    if (cutBytes == FrameHeader.BYTES && isConnectionWindowUpdate(view, 0)) {
      return pos + n; // its increment comes next
    }
    if (cutBytes == wanted) {
      frame(view, 0);
      left -= cutBytes - FrameHeader.BYTES;
      if (left == 0) {
        state = State.HEADER;
      }
      cut = null;
      cutBytes = 0;
    }
    return pos + n;
  }

  /**
   * Starts the frame whose header is at {@code pos} of {@code buf}; a WINDOW_UPDATE's increment
   * follows it there.
   */
  private void frame(ByteBuf buf, int pos) {
    int length = buf.getUnsignedMedium(pos);
    int type = buf.getUnsignedByte(pos + 3);
    int stream = buf.getInt(pos + 5) & 0x7fffffff;
    if (type == FrameHeader.TYPE_SETTINGS && (buf.getUnsignedByte(pos + 4) & FLAG_ACK) == 0) {
      settings(buf, pos + FrameHeader.BYTES, length);
    }
    if (type == FrameHeader.TYPE_RST_STREAM) {
      inbound.forget(stream);
      streamsEnded = true;
    } else if (type == FrameHeader.TYPE_HEADERS && server
        && (buf.getUnsignedByte(pos + 4) & FrameHeader.FLAG_END_STREAM) != 0) {
      inbound.finished(stream);
      streamsEnded = true;
    } else if (type == FrameHeader.TYPE_WINDOW_UPDATE && stream == 0 && length == 4) {
      granted += buf.getInt(pos + FrameHeader.BYTES) & 0x7fffffffL;
    }
    left = length;
    state = length == 0 ? State.HEADER : State.SKIP;
  }
}
