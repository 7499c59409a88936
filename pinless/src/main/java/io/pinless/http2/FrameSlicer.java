package io.pinless.http2;

import static io.pinless.http2.FrameHeader.FLAG_END_STREAM;
import static io.pinless.http2.FrameHeader.FLAG_PADDED;
import static io.pinless.http2.FrameHeader.TYPE_DATA;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.pinless.read.ReadBudget;

/**
 * Cuts a connection's inbound bytes into whole HTTP/2 frames (and, on a server, the whole 24-byte
 * client preface first) and hands them to the next handler, so grpc-netty's {@code
 * Http2ConnectionHandler} finds its cumulation empty after every read and never copies. A plain
 * class: a handler feeds it ({@code io.pinless.connection.ConnectionHandler}, or {@link
 * Http2FrameSlicer} in a pipeline of its own).
 *
 * <pre>
 *   HTTP/2 frame:  | length u24 BE | type u8 | flags u8 | R + stream id u31 | payload (length) |
 *
 *   read 1:  | SETTINGS | HEADERS | DATA 16 KiB | DATA s=3 len=16384, first 6000 B   |
 *   read 2:  | 9 B headroom | last 10384 B of it | WINDOW_UPDATE | DATA 12 B | HEADERS |
 *
 *   handed on:  slice(read 1: SETTINGS .. DATA 16 KiB, then DATA s=3 len=6000 whose header
 *                     is rewritten in place, END_STREAM cleared)
 *               slice(read 2: DATA s=3 len=10384, header written into the headroom)
 *               copy(read 2: WINDOW_UPDATE, DATA 12 B, HEADERS)      small frames coalesced
 * </pre>
 *
 * <p>It drives four parts, each with its own invariant:
 *
 * <ul>
 *   <li>whole frames of one read go on in runs: a run that carries a DATA payload too small to
 *       pin its read buffer ({@link #mayPin}) is copied into a right-sized pooled buffer, any
 *       other run is a retained slice of the read buffer ({@link FrameOutput});
 *   <li>small whole DATA frames join per stream within a read batch, and across batches while
 *       their message is incomplete ({@link DataJoins}), given headroom ({@link
 *       #HEADROOM_BYTES} free bytes before each buffer's reader index);
 *   <li>an unpadded DATA frame a read cuts goes on in pieces as its bytes arrive, given headroom
 *       ({@link DataPieces});
 *   <li>any other frame a read cuts goes on once whole ({@link WholeFrame}).
 * </ul>
 *
 * <p>A read that filled less than 1/{@link #FILL_RATIO} of its buffer (the rest of a burst, a
 * trickle, the last bytes before a peer stalls) has its DATA copied whatever the frames' sizes.
 * Sliced, it would pin more than twice what it carries for as long as gRPC holds a piece. While
 * the process's budget is pressed, so does a read that filled less than {@link
 * #PRESSED_FILL_FIFTHS} fifths of it: memory is then dearer than the copy.
 *
 * <p>It reads only frame headers and never allocates from a length. A frame longer than the
 * connection's maximum frame size, and everything after it, goes on as it arrives, so grpc-netty
 * sees the header and gives its own answer. Every other protocol error is grpc-netty's to find.
 *
 * <p>Memory: idle it holds nothing. Mid-frame it holds at most a cut header, or what {@link
 * DataPieces} or {@link WholeFrame} hold of one frame; within a read batch, also the open joins,
 * and between batches the joins that wait (bytes of incomplete messages, right-sized).
 * What it hands on are retained slices of read buffers and pooled copies; the {@link ReadBudget}
 * tracks every read buffer it slices and every copy it makes until downstream has released them.
 * It writes only bytes of its own read buffers that nobody else references: a cut DATA frame's
 * header, and the headroom before the reader index.
 */
public final class FrameSlicer {
  /** A DATA frame is sliced only from read buffers at most this many times its own size. */
  public static final int PIN_RATIO = 4;
  /** A read's DATA is sliced only from a buffer the read filled to at least 1/2. */
  public static final int FILL_RATIO = 2;
  /**
   * While the process's budget is pressed, a read's DATA is sliced only from a buffer the read
   * filled to at least this many fifths: the budget lends for messages as if what they pin were
   * a quarter more than their bytes ({@link ReadBudget#maxCreditBytes}).
   */
  public static final int PRESSED_FILL_FIFTHS = 4;
  /** HTTP/2's default SETTINGS_MAX_FRAME_SIZE, which grpc-netty keeps. */
  public static final int DEFAULT_MAX_FRAME_SIZE = 16384;
  /** 9 bytes, a frame header: the room a cut DATA frame's next piece needs before its payload. */
  public static final int HEADROOM_BYTES = FrameHeader.BYTES;
  /**
   * 4 KiB: pieces of a cut DATA frame smaller than this are gathered into one copy of up to this
   * size before they go on, as the frame's own piece. gRPC keeps an object per piece, and copies
   * runs of small ones into heap arrays: a peer that sends a frame a few bytes at a time would
   * otherwise cost more than the bytes themselves.
   */
  public static final int GATHER_BYTES = 4096;
  /**
   * 1 KiB: with headroom, no DATA piece smaller than this goes on while more DATA of its stream
   * follows in the same batch; it is joined with the next into one copied frame. gRPC's deframer
   * copies runs of pieces under 1 KiB into heap arrays (grpc-java's {@code
   * CompositeReadableBuffer}), which would cost a message its NIO buffers and so its zero-copy
   * path to the application.
   */
  public static final int JOIN_BYTES = 1024;
  /**
   * A join waits for the next read batch only while it is at most 1/8 of the stream's window: the
   * peer's window then covers the rest of the message even with this end's unsent WINDOW_UPDATE
   * (sent at half the window consumed) outstanding.
   */
  static final int WAIT_WINDOW_SHARE = 8;


  /** Where the slicer is in the frame stream. */
  private enum State {
    /** At a frame boundary: nothing held. */
    FRAME,
    /** Fewer than 9 bytes of a frame header received; they are in {@link #header}. */
    HEADER,
    /** A cut DATA frame going on in pieces ({@link #pieces}). */
    PIECES,
    /** A cut frame (or the preface) going on once whole ({@link #whole}). */
    WHOLE,
    /** After an over-long frame: everything goes on as it arrives. */
    PASS_THROUGH
  }

  private final int maxFrameSize;
  /** Whether read buffers carry {@link #HEADROOM_BYTES} of headroom. */
  private final boolean readHeadroom;
  private final FrameOutput output;
  private final ReadBudget budget;
  private final DataJoins joins;
  private final DataPieces pieces;
  private final WholeFrame whole;
  private State state;
  /** A read is being sliced: a {@link #release} waits for its end. */
  private boolean slicing;
  /** {@link #release} was called while slicing. */
  private boolean releaseAfterSlice;
  /** The cut frame header in {@link State#HEADER} (made only then: an idle slicer has none). */
  private byte[] header;
  /** How many bytes of {@link #header} are filled. */
  private int headerBytes;

  /**
   * Creates a slicer.
   *
   * @param server true on a server, which first receives the 24-byte client preface
   * @param maxFrameSize the SETTINGS_MAX_FRAME_SIZE this end advertises
   * @param budget where the buffers handed on are counted until released
   * @param readHeadroom true when every buffer it is given has {@link #HEADROOM_BYTES} free bytes
   *     before its reader index, which the slicer may write a frame header into
   */
  public FrameSlicer(boolean server, int maxFrameSize, ReadBudget budget, boolean readHeadroom) {
    this.maxFrameSize = maxFrameSize;
    this.readHeadroom = readHeadroom;
    this.output = new FrameOutput(budget);
    this.budget = budget;
    this.joins = new DataJoins(output);
    this.pieces = new DataPieces(output, joins);
    this.whole = new WholeFrame(output);
    if (server) {
      state = State.WHOLE;
      whole.start(FrameHeader.CLIENT_PREFACE_BYTES, false);
    } else {
      state = State.FRAME;
    }
  }

  /**
   * Hands the next handler of {@code ctx} every whole frame and DATA piece {@code in} completes.
   *
   * @param in owned: released here; what goes on are retained slices of it and copies
   */
  public void slice(ChannelHandlerContext ctx, ByteBuf in) {
    slicing = true;
    try {
      if (state == State.PASS_THROUGH) {
        output.handOn(ctx, output.sliceOf(in, in.readerIndex(), in.readableBytes()));
      } else {
        sliceFrames(ctx, in);
        output.handOnRegion(ctx);
      }
    } finally {
      slicing = false;
      output.endRead();
      in.release();
      if (releaseAfterSlice) {
        release();
      }
    }
  }

  /**
   * Hands on every open join: the read batch has ended, and no DATA byte waits for another batch
   * unless a read cut its frame. Between batches the slicer keeps no table, so a connection that
   * goes quiet holds nothing.
   */
  public void readComplete(ChannelHandlerContext ctx) {
    joins.endBatch(ctx, DataJoins.Waiting.NONE);
  }

  /**
   * Ends a read batch: hands on every open join but those that hold only bytes of their stream's
   * incomplete message, as {@code messages} reads them, and at most 1/{@value #WAIT_WINDOW_SHARE}
   * of the smallest stream window {@code window} has seen this end advertise. Those wait for the
   * next batch: gRPC could not deliver them before the rest of their message, and the peer's
   * window leaves room for that rest. A connection with no incomplete message holds nothing
   * between batches.
   */
  public void readComplete(
      ChannelHandlerContext ctx, InboundMessages messages, ConnectionWindow window) {
    readComplete(ctx, messages, window.smallestStreamWindow());
  }

  /** As {@link #readComplete(ChannelHandlerContext, InboundMessages, ConnectionWindow)}. */
  void readComplete(ChannelHandlerContext ctx, InboundMessages messages, long streamWindow) {
    if (joins.count() == 0) {
      // Most batches end with no join open: nothing to weigh, nothing to allocate.
      joins.endBatch(ctx, DataJoins.Waiting.NONE);
      return;
    }
    long share = streamWindow / WAIT_WINDOW_SHARE;
    joins.endBatch(ctx, stream -> Math.min(share, messages.receivedOfMessage(stream)));
  }

  /** Whether a join is open: between read batches, one waiting for the rest of its message. */
  public boolean hasOpenJoins() {
    return joins.count() > 0;
  }

  /**
   * Hands on, between read batches, the joins that no longer wait: those of streams that ended
   * since the batch ended (this end reset them, or a server sent its trailers). A quiet peer
   * brings no batch end that would.
   *
   * @return whether anything went on: the next handler then needs a read-complete of its own
   */
  public boolean handOnEnded(
      ChannelHandlerContext ctx, InboundMessages messages, ConnectionWindow window) {
    int open = joins.count();
    if (open == 0) {
      return false;
    }
    readComplete(ctx, messages, window);
    return joins.count() < open;
  }

  /**
   * Releases what a frame in progress holds; the slicer then holds nothing. Called while it hands
   * a frame on (the next handler closed the channel), it releases once the read is sliced.
   */
  public void release() {
    if (slicing) {
      releaseAfterSlice = true;
      return;
    }
    releaseAfterSlice = false;
    joins.release();
    header = null;
    headerBytes = 0;
    pieces.release();
    whole.release();
    state = State.FRAME;
  }

  /** Bytes held between reads: 0 when idle. */
  int heldBytes() {
    return headerBytes + whole.heldBytes() + pieces.heldBytes() + joins.heldBytes();
  }

  /** Whether a DATA frame of {@code frameBytes} may be sliced from a buffer of {@code pinBase}. */
  static boolean mayPin(int frameBytes, int pinBase) {
    return (long) frameBytes * PIN_RATIO >= pinBase;
  }

  /** @param in borrowed: its reader index is advanced past everything handed on or kept */
  private void sliceFrames(ChannelHandlerContext ctx, ByteBuf in) {
    // A read that filled less than 1/FILL_RATIO of its buffer pins no DATA: its bytes are copied.
    // The buffer is what a slice of it keeps alive: all of a transport's buffer it derives from.
    int pinned = ReadBudget.pinnedBytes(in);
    long filled = in.readableBytes();
    boolean sparse = budget.processPressed()
        ? filled * 5 < (long) pinned * PRESSED_FILL_FIFTHS : filled * FILL_RATIO < pinned;
    int pinBase = sparse ? Integer.MAX_VALUE : pinned;
    switch (state) {
      case HEADER:
        completeHeader(ctx, in, pinBase);
        break;
      case PIECES:
        pieces.handOn(ctx, in, Math.min(pieces.left(), in.readableBytes()), pinBase);
        break;
      case WHOLE:
        whole.append(ctx, in, Math.min(whole.left(), in.readableBytes()), pinBase);
        break;
      default:
        break;
    }
    settle();
    if (state == State.FRAME) {
      sliceWholeFrames(ctx, in, pinBase);
    }
  }

  /** Back to {@link State#FRAME} once the frame in progress has gone on. */
  private void settle() {
    if (state == State.PIECES && pieces.left() == 0
        || state == State.WHOLE && whole.left() == 0) {
      state = State.FRAME;
    }
  }

  /**
   * Hands on the whole frames at the start of {@code in}, then starts the frame it cuts, if any.
   *
   * @param in borrowed: its reader index is advanced past everything handed on or kept
   */
  private void sliceWholeFrames(ChannelHandlerContext ctx, ByteBuf in, int pinBase) {
    int pos = in.readerIndex();
    int end = in.writerIndex();
    int runStart = pos;
    Run run = Run.EITHER;
    while (end - pos >= FrameHeader.BYTES) {
      int length = in.getUnsignedMedium(pos);
      if (length > maxFrameSize) {
        handOnRun(ctx, in, runStart, pos, run);
        passThrough(ctx);
        output.handOn(ctx, output.sliceOf(in, pos, end - pos));
        in.readerIndex(end);
        return;
      }
      if (end - pos - FrameHeader.BYTES < length) {
        break;
      }
      if (in.getUnsignedByte(pos + 3) != TYPE_DATA) {
        if (joins.count() > 0) {
          // Joined DATA goes on before any other frame: its stream's trailers and resets follow.
          handOnRun(ctx, in, runStart, pos, run);
          runStart = pos;
          run = Run.EITHER;
          joins.handOnAll(ctx);
        }
        pos += FrameHeader.BYTES + length;
        continue;
      }
      int flags = in.getUnsignedByte(pos + 4);
      int stream = in.getInt(pos + 5) & 0x7fffffff;
      int join = joins.indexOf(stream);
      if (joins(length, flags, stream, join)) {
        handOnRun(ctx, in, runStart, pos, run);
        joins.join(ctx, join, stream, in, pos, length, flags);
        pos += FrameHeader.BYTES + length;
        runStart = pos;
        run = Run.EITHER;
        continue;
      }
      if (join >= 0) {
        // A larger frame of a stream with a join open: the join takes its head, so neither goes
        // on under JOIN_BYTES, and the rest is a frame of its own.
        handOnRun(ctx, in, runStart, pos, run);
        pos = joins.topUp(ctx, join, in, pos, length, flags,
            readHeadroom && (flags & FLAG_PADDED) == 0);
        runStart = pos;
        run = Run.EITHER;
        continue;
      }
      Run kind = mayPin(FrameHeader.BYTES + length, pinBase) ? Run.SLICE : Run.COPY;
      FrameOutput.countData(kind == Run.SLICE, FrameHeader.BYTES + length);
      if (run != Run.EITHER && run != kind) {
        handOnRun(ctx, in, runStart, pos, run);
        runStart = pos;
      }
      run = kind;
      pos += FrameHeader.BYTES + length;
    }
    handOnRun(ctx, in, runStart, pos, run);
    in.readerIndex(pos);
    if (in.isReadable()) {
      startCutFrame(ctx, in, pinBase);
    }
  }

  /**
   * Starts the frame that {@code in} ends inside.
   *
   * @param in borrowed: at a frame boundary; everything readable is taken
   */
  private void startCutFrame(ChannelHandlerContext ctx, ByteBuf in, int pinBase) {
    int pos = in.readerIndex();
    if (in.readableBytes() < FrameHeader.BYTES) {
      // Open joins wait for the header: the frame may be DATA that joins them.
      state = State.HEADER;
      headerBytes = in.readableBytes();
      header = new byte[FrameHeader.BYTES];
      in.readBytes(header, 0, headerBytes);
      return;
    }
    int length = in.getUnsignedMedium(pos);
    int type = in.getUnsignedByte(pos + 3);
    int flags = in.getUnsignedByte(pos + 4);
    if (splits(type, flags)) {
      // The frame's pieces join what its stream has joined so far.
      state = State.PIECES;
      pieces.start(length, flags, in.getInt(pos + 5));
      in.skipBytes(FrameHeader.BYTES);
      // The first piece reuses the frame's own header, rewritten for the piece.
      pieces.handOn(ctx, in, in.readableBytes(), pinBase);
    } else {
      joins.handOnAll(ctx);
      state = State.WHOLE;
      whole.start(FrameHeader.BYTES + length, type == TYPE_DATA);
      whole.append(ctx, in, in.readableBytes(), pinBase);
    }
    settle();
  }

  /**
   * Fills the header a previous read cut short; once whole, starts its frame.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   */
  private void completeHeader(ChannelHandlerContext ctx, ByteBuf in, int pinBase) {
    int take = Math.min(FrameHeader.BYTES - headerBytes, in.readableBytes());
    in.readBytes(header, headerBytes, take);
    headerBytes += take;
    if (headerBytes < FrameHeader.BYTES) {
      return;
    }
    ByteBuf cut = Unpooled.wrappedBuffer(header);
    header = null;
    headerBytes = 0;
    int length = cut.getUnsignedMedium(0);
    int type = cut.getUnsignedByte(3);
    int flags = cut.getUnsignedByte(4);
    if (length > maxFrameSize) {
      passThrough(ctx);
      output.handOn(ctx, output.newCopy(ctx, FrameHeader.BYTES).writeBytes(cut));
      if (in.isReadable()) {
        output.handOn(ctx, output.sliceOf(in, in.readerIndex(), in.readableBytes()));
        in.skipBytes(in.readableBytes());
      }
      return;
    }
    if (length > 0 && splits(type, flags)) {
      // Each piece of the payload gets a header of its own: this one is not needed.
      state = State.PIECES;
      pieces.start(length, flags, cut.getInt(5));
      pieces.handOn(ctx, in, Math.min(pieces.left(), in.readableBytes()), pinBase);
      return;
    }
    joins.handOnAll(ctx);
    state = State.WHOLE;
    whole.start(FrameHeader.BYTES + length, type == TYPE_DATA);
    if (type == TYPE_DATA) {
      FrameOutput.countData(false, FrameHeader.BYTES);
    }
    whole.copy(ctx, cut, FrameHeader.BYTES);
    whole.append(ctx, in, Math.min(whole.left(), in.readableBytes()), pinBase);
  }

  /** After an over-long frame: open joins go on, and from now on everything as it arrives. */
  private void passThrough(ChannelHandlerContext ctx) {
    joins.handOnAll(ctx);
    state = State.PASS_THROUGH;
  }

  /**
   * Whether a whole DATA frame joins: small and unpadded, given headroom (the slicer rewrites
   * frames only then), into its stream's open join or a new one (not for a frame that ends its
   * stream: it has nothing to join, nor on a stream that {@link #mayJoin} refuses).
   */
  private boolean joins(int length, int flags, int stream, int join) {
    return readHeadroom && length < JOIN_BYTES && (flags & FLAG_PADDED) == 0
        && (join >= 0 || (flags & FLAG_END_STREAM) == 0 && joins.hasRoom() && mayJoin(stream));
  }

  /**
   * Whether DATA of {@code stream} may wait in a join while DATA of other streams goes on: only on
   * an odd stream, a client's, which gRPC's peers use. DATA on stream 0 or an even stream is a
   * connection error for grpc-netty, and nothing the peer sent after it may reach it first.
   */
  static boolean mayJoin(int stream) {
    return (stream & 1) == 1;
  }

  /** Whether a frame cut by a read goes on in pieces: unpadded DATA, given headroom. */
  private boolean splits(int type, int flags) {
    return readHeadroom && type == TYPE_DATA && (flags & FLAG_PADDED) == 0;
  }

  /** What a run of whole frames goes on as. */
  private enum Run {
    /** No DATA frame yet: either. */
    EITHER,
    /** A retained slice of the read buffer. */
    SLICE,
    /** A right-sized copy: a DATA payload in it would pin its read buffer. */
    COPY
  }

  /**
   * Hands on frames {@code [from, to)} of {@code in} as one slice or one right-sized copy.
   *
   * @param in borrowed: a slice handed on takes a reference of its own
   */
  private void handOnRun(ChannelHandlerContext ctx, ByteBuf in, int from, int to, Run run) {
    if (from == to) {
      return;
    }
    if (run == Run.COPY) {
      output.handOn(ctx, output.newCopy(ctx, to - from).writeBytes(in, from, to - from));
    } else {
      output.addToRegion(ctx, in, from, to);
    }
  }
}
