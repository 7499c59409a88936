package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.pinless.PinlessMetrics.Metric;
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
 * <p>Whole frames of one read go on in runs. A run that carries a DATA payload too small to pin
 * its read buffer is copied into a right-sized pooled buffer. Any other run is a retained slice of
 * the read buffer, and neighbouring runs go on as one slice (each buffer costs grpc-netty a pass
 * of its decoder). A DATA frame is sliced only from a buffer at most {@link #PIN_RATIO} times its
 * size.
 *
 * <p>A frame that a read cuts: with headroom ({@link #HEADROOM_BYTES} free bytes before each
 * buffer's reader index), an unpadded DATA frame goes on in pieces as its bytes arrive. Each piece
 * is a whole DATA frame of the same stream, END_STREAM on the last only, its header written in
 * front of its payload: HTTP/2 lets a sender split DATA anywhere, and flow control counts the same
 * bytes. Any other frame goes on once whole, as a composite of its parts (slices under the same
 * rule, copies otherwise).
 *
 * <p>Small DATA frames join (given headroom): gRPC's deframer copies runs of pieces under 1 KiB
 * into heap arrays, and a message with one such piece reaches the application's marshaller
 * without NIO buffers, so it cannot be read in place. Whole DATA frames under {@link #JOIN_BYTES}
 * are copied into a join of their stream (at most {@link #MAX_JOINS} streams at once), which goes
 * on as one DATA frame when full, at END_STREAM, before any frame that is not DATA, and when the
 * read batch ends: so within a batch no stream's DATA goes on in pieces under 1 KiB but its last.
 * A larger frame of a stream with a join open gives the join its head (up to {@link #JOIN_BYTES})
 * and goes on as the rest; a cut frame's pieces join what its stream has joined. A read that
 * leaves a cut frame less than {@link #JOIN_BYTES} to come keeps back the tail of its piece, so the
 * frame's last piece is {@link #JOIN_BYTES} long even when it arrives in a batch of its own: two
 * small pieces in a row would be copied by gRPC, and a message may start in the tail of any
 * piece. Flow control counts the same bytes.
 *
 * <p>A read that filled less than 1/{@link #FILL_RATIO} of its buffer (the rest of a burst, a
 * trickle, the last bytes before a peer stalls) has its DATA copied whatever the frames' sizes:
 * sliced, it would pin more than twice what it carries for as long as gRPC holds a piece.
 *
 * <p>It reads only frame headers and never allocates from a length: copies grow in pieces of at
 * most {@link #COPY_PIECE_BYTES}. A frame longer than the connection's maximum frame size, and
 * everything after it, goes on as it arrives, so grpc-netty sees the header and gives its own
 * answer. Every other protocol error is grpc-netty's to find.
 *
 * <p>Memory: idle it holds nothing. Mid-frame it holds at most a cut header and the parts of one
 * frame not handed on in pieces; within a read batch, also its open joins. What it hands on are retained slices of read buffers and pooled
 * copies; the {@link ReadBudget} tracks every read buffer it slices and every copy it makes until
 * downstream has released them. It writes only bytes of its own read buffers that nobody else
 * references: a cut DATA frame's header, and the headroom before the reader index.
 */
public final class FrameSlicer {
  /** A DATA frame is sliced only from read buffers at most this many times its own size. */
  public static final int PIN_RATIO = 4;
  /** A read's DATA is sliced only from a buffer the read filled to at least 1/2. */
  public static final int FILL_RATIO = 2;
  /** HTTP/2's default SETTINGS_MAX_FRAME_SIZE, which grpc-netty keeps. */
  public static final int DEFAULT_MAX_FRAME_SIZE = 16384;
  /** 9 bytes, a frame header: the room a cut DATA frame's next piece needs before its payload. */
  public static final int HEADROOM_BYTES = 9;
  /** Copies of partial frames grow in pieces of at most this many bytes (16 KiB). */
  static final int COPY_PIECE_BYTES = 16384;
  /**
   * 4 KiB: pieces of a cut DATA frame smaller than this are gathered into one copy of up to this
   * size before they go on, as the frame's own piece. gRPC keeps an object per piece, and copies
   * runs of small ones into heap arrays: a peer that sends a frame a few bytes at a time would
   * otherwise cost more than the bytes themselves.
   */
  public static final int GATHER_BYTES = 4096;
  /**
   * 1 KiB: with headroom, no DATA piece smaller than this goes on while more DATA of its stream
   * follows in the same buffer; it is joined with the next into one copied frame. gRPC's
   * deframer copies runs of pieces under 1 KiB into heap arrays (grpc-java's {@code
   * CompositeReadableBuffer}), which would cost a message its NIO buffers and so its zero-copy
   * path to the application.
   */
  public static final int JOIN_BYTES = 1024;
  /** A join's buffer: 4 KiB, a pool size class, header included. */
  static final int JOIN_CAPACITY = 4096;
  /** At most this many streams have a join open at once; others' small frames go on alone. */
  static final int MAX_JOINS = 8;

  static final int FRAME_HEADER_BYTES = 9;
  static final int CLIENT_PREFACE_BYTES = 24;
  static final int TYPE_DATA = 0x0;
  static final int FLAG_END_STREAM = 0x1;
  static final int FLAG_PADDED = 0x8;

  /** Where the slicer is in the frame stream. */
  private enum State {
    /** At a frame boundary: nothing held. */
    FRAME,
    /** Fewer than 9 bytes of a frame header received; they are in {@link #header}. */
    HEADER,
    /** A cut DATA frame going on in pieces: {@link #left} payload bytes to come. */
    PIECES,
    /** A frame (or the preface) assembled in {@link #whole}: {@link #left} bytes to come. */
    WHOLE,
    /** After an over-long frame: everything goes on as it arrives. */
    PASS_THROUGH
  }

  private final ReadBudget budget;
  private final int maxFrameSize;
  /** Whether read buffers carry {@link #HEADROOM_BYTES} of headroom. */
  private final boolean readHeadroom;
  private State state;

  /** The cut frame header in {@link State#HEADER} (made only then: an idle slicer has none). */
  private byte[] header;
  /** How many bytes of {@link #header} are filled. */
  private int headerBytes;
  /** Bytes still to come of the frame in progress: payload in PIECES, all of it in WHOLE. */
  private int left;
  /** The whole size of the frame in progress, header included. */
  private int frameBytes;
  /** PIECES: the frame's flags and stream. WHOLE: whether it is a DATA frame. */
  private int dataFlags;
  private int dataStreamId;
  private boolean wholeIsData;
  /** WHOLE: the parts received so far. */
  private CompositeByteBuf whole;
  /** WHOLE: copied bytes not yet added to {@link #whole} (it grows by whole pieces). */
  private ByteBuf copyPiece;
  /**
   * PIECES: small pieces of the frame gathered after 9 bytes left for their header; null when
   * none. It goes on before any larger piece, when full, and with the frame's last byte.
   */
  private ByteBuf gathered;
  /**
   * Open joins, {@code [0, joinCount)}: small whole DATA frames of one stream each, copied after 9
   * bytes left for a header. A join goes on when full, with END_STREAM, before a non-DATA frame
   * and at the end of a read batch ({@link #readComplete}); so within a batch a stream's small
   * frames reach gRPC as pieces of at least {@link #JOIN_BYTES} even when streams take turns.
   * Made on a batch's first join, given back when the batch ends.
   */
  private ByteBuf[] joins;
  private int[] joinStreams;
  private int joinCount;

  // Within one call of slice() only.
  /** The read buffer once the budget tracks it; else null. */
  private ByteBuf trackedRead;
  /** The bytes [regionFrom, regionTo) of {@link #regionRead} that go on as one slice. */
  private ByteBuf regionRead;
  private int regionFrom;
  private int regionTo;

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
    this.budget = budget;
    this.readHeadroom = readHeadroom;
    this.maxFrameSize = maxFrameSize;
    if (server) {
      state = State.WHOLE;
      left = CLIENT_PREFACE_BYTES;
      frameBytes = CLIENT_PREFACE_BYTES;
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
    try {
      if (state == State.PASS_THROUGH) {
        handOn(ctx, sliceOf(in, in.readerIndex(), in.readableBytes()));
      } else {
        sliceFrames(ctx, in);
        handOnRegion(ctx);
      }
    } finally {
      regionRead = null;
      trackedRead = null;
      in.release();
    }
  }

  /**
   * Hands on every open join: the read batch has ended, and no DATA byte waits for another batch
   * unless a read cut its frame.
   */
  public void readComplete(ChannelHandlerContext ctx) {
    handOnJoins(ctx);
    // Between batches the slicer keeps no table: a connection that goes quiet holds nothing.
    joins = null;
    joinStreams = null;
  }

  /** Releases what a frame in progress holds; the slicer then holds nothing. */
  public void release() {
    for (int i = 0; i < joinCount; i++) {
      joins[i].release();
      joins[i] = null;
    }
    joinCount = 0;
    header = null;
    headerBytes = 0;
    left = 0;
    if (copyPiece != null) {
      copyPiece.release();
      copyPiece = null;
    }
    if (whole != null) {
      whole.release();
      whole = null;
    }
    if (gathered != null) {
      gathered.release();
      gathered = null;
    }
    state = State.FRAME;
  }

  /** Bytes held between reads: 0 when idle. */
  int heldBytes() {
    return headerBytes + (whole == null ? 0 : whole.readableBytes())
        + (copyPiece == null ? 0 : copyPiece.readableBytes())
        + (gathered == null ? 0 : gathered.readableBytes()) + joinedBytes();
  }

  private int joinedBytes() {
    int bytes = 0;
    for (int i = 0; i < joinCount; i++) {
      bytes += joins[i].readableBytes();
    }
    return bytes;
  }

  /** @param in borrowed: its reader index is advanced past everything handed on or kept */
  private void sliceFrames(ChannelHandlerContext ctx, ByteBuf in) {
    // A read that filled less than 1/FILL_RATIO of its buffer pins no DATA: its bytes are copied.
    int pinBase = (long) in.readableBytes() * FILL_RATIO < in.capacity()
        ? Integer.MAX_VALUE : in.capacity();
    switch (state) {
      case HEADER:
        if (!completeHeader(ctx, in, pinBase)) {
          return;
        }
        if (state != State.FRAME) {
          return;
        }
        break;
      case PIECES:
        handOnDataPiece(ctx, in, Math.min(left, in.readableBytes()), pinBase);
        if (state != State.FRAME) {
          return;
        }
        break;
      case WHOLE:
        appendToWhole(ctx, in, Math.min(left, in.readableBytes()), pinBase);
        if (state != State.FRAME) {
          return;
        }
        break;
      default:
        break;
    }
    sliceWholeFrames(ctx, in, pinBase);
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
    while (end - pos >= FRAME_HEADER_BYTES) {
      int length = in.getUnsignedMedium(pos);
      if (length > maxFrameSize) {
        handOnRun(ctx, in, runStart, pos, run);
        handOnJoins(ctx);
        state = State.PASS_THROUGH;
        handOn(ctx, sliceOf(in, pos, end - pos));
        in.readerIndex(end);
        return;
      }
      if (end - pos - FRAME_HEADER_BYTES < length) {
        break;
      }
      if (in.getUnsignedByte(pos + 3) != TYPE_DATA) {
        if (joinCount > 0) {
          // Joined DATA goes on before any other frame: trailers and resets of its stream follow it.
          handOnRun(ctx, in, runStart, pos, run);
          runStart = pos;
          run = Run.EITHER;
          handOnJoins(ctx);
        }
        pos += FRAME_HEADER_BYTES + length;
        continue;
      }
      int flags = in.getUnsignedByte(pos + 4);
      int stream = in.getInt(pos + 5) & 0x7fffffff;
      int join = joinOf(stream);
      if (joins(length, flags, join)) {
        handOnRun(ctx, in, runStart, pos, run);
        joinFrame(ctx, join, stream, in, pos, length, flags);
        pos += FRAME_HEADER_BYTES + length;
        runStart = pos;
        run = Run.EITHER;
        continue;
      }
      if (join >= 0) {
        // A larger frame of a stream with a join open: the join takes its head, so neither goes
        // on under JOIN_BYTES, and the rest is a frame of its own.
        handOnRun(ctx, in, runStart, pos, run);
        pos = topUp(ctx, join, in, pos, length, flags);
        runStart = pos;
        run = Run.EITHER;
        continue;
      }
      Run kind = mayPin(FRAME_HEADER_BYTES + length, pinBase) ? Run.SLICE : Run.COPY;
      countData(kind == Run.SLICE, FRAME_HEADER_BYTES + length);
      if (run != Run.EITHER && run != kind) {
        handOnRun(ctx, in, runStart, pos, run);
        runStart = pos;
      }
      run = kind;
      pos += FRAME_HEADER_BYTES + length;
    }
    handOnRun(ctx, in, runStart, pos, run);
    in.readerIndex(pos);
    if (!in.isReadable()) {
      return;
    }
    if (in.readableBytes() < FRAME_HEADER_BYTES) {
      // Open joins wait for the header: the frame may be DATA that joins them.
      state = State.HEADER;
      headerBytes = in.readableBytes();
      header = new byte[FRAME_HEADER_BYTES];
      in.readBytes(header, 0, headerBytes);
      return;
    }
    int length = in.getUnsignedMedium(pos);
    int type = in.getUnsignedByte(pos + 3);
    int flags = in.getUnsignedByte(pos + 4);
    if (splits(type, flags)) {
      startPieces(length, flags, in.getInt(pos + 5));
      int join = joinOf(dataStreamId);
      if (join >= 0) {
        // The frame's pieces join what its stream has joined so far.
        gathered = takeJoin(join);
      }
      in.skipBytes(FRAME_HEADER_BYTES);
      // The first piece reuses the frame's own header, rewritten for the piece.
      handOnDataPiece(ctx, in, in.readableBytes(), pinBase);
      return;
    }
    handOnJoins(ctx);
    startWhole(length, type == TYPE_DATA);
    appendToWhole(ctx, in, in.readableBytes(), pinBase);
  }

  /** The index of {@code stream}'s open join, or -1. */
  private int joinOf(int stream) {
    for (int i = 0; i < joinCount; i++) {
      if (joinStreams[i] == stream) {
        return i;
      }
    }
    return -1;
  }

  /**
   * Whether a whole DATA frame joins: small and unpadded, given headroom (the slicer rewrites
   * frames only then), into its stream's open join or a new one (not for a frame that ends its
   * stream: it has nothing to join).
   */
  private boolean joins(int length, int flags, int join) {
    return readHeadroom && length < JOIN_BYTES && (flags & FLAG_PADDED) == 0
        && (join >= 0 || (flags & FLAG_END_STREAM) == 0 && joinCount < MAX_JOINS);
  }

  /**
   * Copies the payload of the whole DATA frame at {@code pos} into its stream's join, opening one
   * if needed; hands the join on when full or at END_STREAM.
   *
   * @param in borrowed
   */
  private void joinFrame(ChannelHandlerContext ctx, int join, int stream, ByteBuf in, int pos,
      int length, int flags) {
    if (join >= 0 && joins[join].writableBytes() < length) {
      if (joins[join].readableBytes() - FRAME_HEADER_BYTES < JOIN_BYTES) {
        // A join made from a cut frame's last piece is sized to it: it moves to a join's buffer.
        ByteBuf small = joins[join];
        joins[join] = newCopy(ctx, JOIN_CAPACITY).writeBytes(small);
        small.release();
      } else {
        handOnJoin(ctx, join, 0);
        join = -1;
      }
    }
    if (join < 0) {
      join = openJoin(stream, newCopy(ctx, JOIN_CAPACITY).writerIndex(FRAME_HEADER_BYTES));
    }
    ByteBuf joined = joins[join];
    joined.writeBytes(in, pos + FRAME_HEADER_BYTES, length);
    if ((flags & FLAG_END_STREAM) != 0 || !joined.isWritable()) {
      handOnJoin(ctx, join, flags & FLAG_END_STREAM);
    }
  }

  /**
   * Moves the head of the whole DATA frame at {@code pos} into its stream's open join: enough to
   * make the join {@link #JOIN_BYTES}, or all of it if less than that would be left; the join then
   * goes on. A rest goes on as a frame of its own, its header written over bytes the join copied.
   *
   * @param in borrowed: bytes between {@code pos} and the returned index may be overwritten
   * @return where the next frame starts: the rest's header, or the frame's end
   */
  private int topUp(ChannelHandlerContext ctx, int join, ByteBuf in, int pos, int length,
      int flags) {
    ByteBuf joined = joins[join];
    int take = Math.max(0, JOIN_BYTES - (joined.readableBytes() - FRAME_HEADER_BYTES));
    if ((flags & FLAG_PADDED) != 0 || !readHeadroom) {
      take = 0;
    } else if (length - take < JOIN_BYTES) {
      take = length;
    }
    int stream = joinStreams[join];
    if (take > joined.writableBytes()) {
      handOnJoin(ctx, join, 0);
      return pos;
    }
    joined.writeBytes(in, pos + FRAME_HEADER_BYTES, take);
    if (take == length) {
      handOnJoin(ctx, join, flags & FLAG_END_STREAM);
      return pos + FRAME_HEADER_BYTES + length;
    }
    handOnJoin(ctx, join, 0);
    if (take == 0) {
      return pos;
    }
    int rest = pos + take;
    setDataHeader(in, rest, length - take, flags, stream);
    return rest;
  }

  /**
   * Adds an open join.
   *
   * @param joined owned: the join's buffer, 9 bytes left for its header
   * @return its index
   */
  private int openJoin(int stream, ByteBuf joined) {
    if (joins == null) {
      joins = new ByteBuf[MAX_JOINS];
      joinStreams = new int[MAX_JOINS];
    }
    joins[joinCount] = joined;
    joinStreams[joinCount] = stream;
    return joinCount++;
  }

  /** @return owned: the join's buffer, no longer open */
  private ByteBuf takeJoin(int join) {
    ByteBuf joined = joins[join];
    joinCount--;
    joins[join] = joins[joinCount];
    joinStreams[join] = joinStreams[joinCount];
    joins[joinCount] = null;
    return joined;
  }

  /**
   * Hands on a join as one DATA frame of its stream with {@code flags}, {@link #rightSized}.
   */
  private void handOnJoin(ChannelHandlerContext ctx, int join, int flags) {
    int stream = joinStreams[join];
    ByteBuf joined = rightSized(ctx, takeJoin(join));
    setDataHeader(joined, 0, joined.readableBytes() - FRAME_HEADER_BYTES, flags, stream);
    countData(false, joined.readableBytes());
    handOn(ctx, joined);
  }

  /**
   * A copy that goes on in a buffer at most 1/8 larger than its bytes: gRPC may hold it until its
   * message is whole, and a join's or a gather's buffer is sized for more than it may get.
   *
   * @param copy owned: returned as is, or released once its bytes are copied
   * @return owned by the caller
   */
  private ByteBuf rightSized(ChannelHandlerContext ctx, ByteBuf copy) {
    if (copy.readableBytes() >= copy.capacity() - copy.capacity() / 8) {
      return copy;
    }
    ByteBuf right = newCopy(ctx, copy.readableBytes()).writeBytes(copy);
    copy.release();
    return right;
  }

  /** Hands on every open join. */
  private void handOnJoins(ChannelHandlerContext ctx) {
    while (joinCount > 0) {
      handOnJoin(ctx, joinCount - 1, 0);
    }
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

  /** Whether a frame cut by a read goes on in pieces: unpadded DATA, given headroom. */
  private boolean splits(int type, int flags) {
    return readHeadroom && type == TYPE_DATA && (flags & FLAG_PADDED) == 0;
  }

  private void startPieces(int length, int flags, int streamWord) {
    state = length == 0 ? State.FRAME : State.PIECES;
    left = length;
    dataFlags = flags;
    dataStreamId = streamWord & 0x7fffffff;
    frameBytes = FRAME_HEADER_BYTES + length;
  }

  private void startWhole(int length, boolean isData) {
    state = State.WHOLE;
    left = FRAME_HEADER_BYTES + length;
    frameBytes = left;
    wholeIsData = isData;
  }

  /**
   * Hands on the next {@code n} payload bytes of the DATA frame in progress as a whole DATA frame
   * of their own: the same stream, END_STREAM only on the last piece. The header goes into the 9
   * bytes before the payload and the piece goes on as one slice. With no room before it, the
   * piece goes on as a composite of a header and the slice. A piece that may not pin its buffer
   * is copied with its header.
   *
   * <pre>
   *   read 1: | ... | DATA len=16384 | 6000 B |        read 2: | headroom 9 | 10384 B | ... |
   *   handed on:  | DATA len=6000 (no END_STREAM) | 6000 B |   | DATA len=10384 | 10384 B |
   * </pre>
   *
   * @param in borrowed: bytes before its reader index may be overwritten; its reader index is
   *     advanced by {@code n}
   */
  private void handOnDataPiece(ChannelHandlerContext ctx, ByteBuf in, int n, int pinBase) {
    if (n == 0) {
      return;
    }
    if (n < GATHER_BYTES && (gathered != null || n < left)
        || n == left && n < JOIN_BYTES && keepsJoin()) {
      gather(ctx, in, n);
      return;
    }
    if (gathered != null && gathered.readableBytes() - FRAME_HEADER_BYTES < JOIN_BYTES) {
      // The gathered pieces take enough of this large one to go on at least JOIN_BYTES long;
      // the piece's header then goes over bytes they copied.
      int take = JOIN_BYTES - (gathered.readableBytes() - FRAME_HEADER_BYTES);
      gathered.ensureWritable(take);
      gathered.writeBytes(in, take);
      left -= take;
      n -= take;
    }
    handOnGathered(ctx);
    // A rest under JOIN_BYTES would go on as a small piece of its own when its read ends the
    // batch: this piece keeps back enough of its tail that the frame's last piece is JOIN_BYTES.
    int keep = n < left && left - n < JOIN_BYTES ? JOIN_BYTES - (left - n) : 0;
    n -= keep;
    int flags = n == left ? dataFlags : dataFlags & ~FLAG_END_STREAM;
    int start = in.readerIndex() - FRAME_HEADER_BYTES;
    if (!mayPin(frameBytes, pinBase)) {
      ByteBuf copy = newCopy(ctx, FRAME_HEADER_BYTES + n);
      writeDataHeader(copy, n, flags);
      copy.writeBytes(in, in.readerIndex(), n);
      countData(false, FRAME_HEADER_BYTES + n);
      handOn(ctx, copy);
    } else if (start >= 0) {
      setDataHeader(in, start, n, flags, dataStreamId);
      countData(true, FRAME_HEADER_BYTES + n);
      addToRegion(ctx, in, start, start + FRAME_HEADER_BYTES + n);
    } else {
      // No room before the payload (a buffer from an io_uring ring): the header goes in front.
      CompositeByteBuf frame = ctx.alloc().compositeDirectBuffer(2);
      frame.addComponent(true, writeDataHeader(newCopy(ctx, FRAME_HEADER_BYTES), n, flags));
      frame.addComponent(true, sliceOf(in, in.readerIndex(), n));
      countData(true, FRAME_HEADER_BYTES + n);
      handOn(ctx, frame);
    }
    in.skipBytes(n);
    left -= n;
    if (keep > 0) {
      gather(ctx, in, keep);
    }
    if (left == 0) {
      state = State.FRAME;
    }
  }

  /**
   * Copies the next {@code n} payload bytes of the DATA frame in progress into {@link #gathered},
   * handing it on when it is full or holds the frame's last byte.
   *
   * @param in borrowed: its reader index is advanced by {@code n}
   */
  private void gather(ChannelHandlerContext ctx, ByteBuf in, int n) {
    int remaining = n;
    while (remaining > 0) {
      if (gathered == null) {
        // Room for the frame's rest, or, when a frame of its stream joins it, for the join.
        int room = remaining == left && keepsJoin()
            ? JOIN_CAPACITY - FRAME_HEADER_BYTES : Math.min(left, GATHER_BYTES);
        gathered = newCopy(ctx, FRAME_HEADER_BYTES + room);
        gathered.writerIndex(FRAME_HEADER_BYTES);
      }
      int take = Math.min(remaining, gathered.writableBytes());
      gathered.writeBytes(in, take);
      remaining -= take;
      left -= take;
      if (!gathered.isWritable() || left == 0 && !keepsJoin()) {
        handOnGathered(ctx);
      }
    }
    if (left == 0) {
      state = State.FRAME;
      if (gathered != null) {
        openJoin(dataStreamId, gathered);
        gathered = null;
      }
    }
  }

  /** Whether the DATA frame in progress, once whole, leaves what is gathered open as a join. */
  private boolean keepsJoin() {
    return (dataFlags & FLAG_END_STREAM) == 0 && joinCount < MAX_JOINS
        && (gathered == null || gathered.readableBytes() - FRAME_HEADER_BYTES < JOIN_BYTES);
  }

  /** Hands on the gathered pieces, if any, as a DATA frame of their own. */
  private void handOnGathered(ChannelHandlerContext ctx) {
    if (gathered == null) {
      return;
    }
    ByteBuf out = rightSized(ctx, gathered);
    gathered = null;
    int flags = left == 0 ? dataFlags : dataFlags & ~FLAG_END_STREAM;
    setDataHeader(out, 0, out.readableBytes() - FRAME_HEADER_BYTES, flags, dataStreamId);
    countData(false, out.readableBytes());
    handOn(ctx, out);
  }

  /**
   * Writes a DATA frame header at {@code index} of {@code buf}.
   *
   * @param buf borrowed: its indexes are not moved
   */
  private static void setDataHeader(ByteBuf buf, int index, int length, int flags, int stream) {
    buf.setMedium(index, length);
    buf.setByte(index + 3, TYPE_DATA);
    buf.setByte(index + 4, flags);
    buf.setInt(index + 5, stream);
  }

  /** @param to borrowed: a DATA frame header for {@code n} payload bytes is written to it */
  private ByteBuf writeDataHeader(ByteBuf to, int n, int flags) {
    return to.writeMedium(n).writeByte(TYPE_DATA).writeByte(flags).writeInt(dataStreamId);
  }

  /**
   * Fills the header a previous read cut short; once whole, starts its frame.
   *
   * @param in borrowed: its reader index is advanced past the bytes taken
   * @return false while the header is incomplete
   */
  private boolean completeHeader(ChannelHandlerContext ctx, ByteBuf in, int pinBase) {
    int take = Math.min(FRAME_HEADER_BYTES - headerBytes, in.readableBytes());
    in.readBytes(header, headerBytes, take);
    headerBytes += take;
    if (headerBytes < FRAME_HEADER_BYTES) {
      return false;
    }
    byte[] header = this.header;
    this.header = null;
    headerBytes = 0;
    int length = (header[0] & 0xff) << 16 | (header[1] & 0xff) << 8 | (header[2] & 0xff);
    int type = header[3] & 0xff;
    int flags = header[4] & 0xff;
    if (length > maxFrameSize) {
      handOnJoins(ctx);
      state = State.PASS_THROUGH;
      handOn(ctx, newCopy(ctx, FRAME_HEADER_BYTES).writeBytes(header));
      if (in.isReadable()) {
        handOn(ctx, sliceOf(in, in.readerIndex(), in.readableBytes()));
        in.skipBytes(in.readableBytes());
      }
      return true;
    }
    if (length > 0 && splits(type, flags)) {
      // Each piece of the payload gets a header of its own: this one is not needed.
      startPieces(length, flags, intBE(header, 5));
      int join = joinOf(dataStreamId);
      if (join >= 0) {
        gathered = takeJoin(join);
      }
      handOnDataPiece(ctx, in, Math.min(left, in.readableBytes()), pinBase);
      return true;
    }
    handOnJoins(ctx);
    startWhole(length, type == TYPE_DATA);
    if (wholeIsData) {
      countData(false, FRAME_HEADER_BYTES);
    }
    copyIntoWhole(ctx, io.netty.buffer.Unpooled.wrappedBuffer(header), FRAME_HEADER_BYTES);
    appendToWhole(ctx, in, Math.min(left, in.readableBytes()), pinBase);
    return true;
  }

  /**
   * Adds the next {@code n} bytes of {@code in} to the frame being assembled: a retained slice if
   * it is a DATA frame large enough against this read buffer (the frame, not the piece), else a
   * copy. Hands the frame on once it is whole.
   *
   * @param in borrowed: its reader index is advanced by {@code n}
   */
  private void appendToWhole(ChannelHandlerContext ctx, ByteBuf in, int n, int pinBase) {
    if (n > 0) {
      if (wholeIsData && mayPin(frameBytes, pinBase)) {
        addCopyPiece(ctx);
        parts(ctx).addComponent(true, sliceOf(in, in.readerIndex(), n));
        in.skipBytes(n);
        countData(true, n);
        left -= n;
      } else {
        if (wholeIsData) {
          countData(false, n);
        }
        copyIntoWhole(ctx, in, n);
      }
    }
    if (left == 0) {
      addCopyPiece(ctx);
      ByteBuf frame = whole;
      whole = null;
      state = State.FRAME;
      handOn(ctx, frame);
    }
  }

  /** @param in borrowed: its reader index is advanced by {@code n} */
  private void copyIntoWhole(ChannelHandlerContext ctx, ByteBuf in, int n) {
    int remaining = n;
    while (remaining > 0) {
      if (copyPiece == null) {
        copyPiece = newCopy(ctx, Math.min(left, COPY_PIECE_BYTES));
      }
      int take = Math.min(remaining, copyPiece.writableBytes());
      copyPiece.writeBytes(in, take);
      remaining -= take;
      left -= take;
      if (!copyPiece.isWritable()) {
        addCopyPiece(ctx);
      }
    }
  }

  private CompositeByteBuf parts(ChannelHandlerContext ctx) {
    if (whole == null) {
      whole = ctx.alloc().compositeDirectBuffer(Integer.MAX_VALUE);
    }
    return whole;
  }

  private void addCopyPiece(ChannelHandlerContext ctx) {
    if (copyPiece != null) {
      parts(ctx).addComponent(true, copyPiece);
      copyPiece = null;
    }
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
      handOn(ctx, newCopy(ctx, to - from).writeBytes(in, from, to - from));
    } else {
      addToRegion(ctx, in, from, to);
    }
  }

  /**
   * Adds the bytes {@code [from, to)} of the read buffer to the region that goes on as one slice,
   * handing on the region so far first if they do not follow it.
   *
   * @param in borrowed
   */
  private void addToRegion(ChannelHandlerContext ctx, ByteBuf in, int from, int to) {
    if (regionRead == in && regionTo == from) {
      regionTo = to;
      return;
    }
    handOnRegion(ctx);
    regionRead = in;
    regionFrom = from;
    regionTo = to;
  }

  /**
   * Hands on the region gathered so far, if any, as one retained slice. A slice rather than the
   * read buffer itself: gRPC's deframer takes a retained slice of what it gets per message, and of
   * a pooled slice that is a recycled object, of a plain buffer a new one.
   */
  private void handOnRegion(ChannelHandlerContext ctx) {
    if (regionRead != null) {
      ByteBuf read = regionRead;
      regionRead = null;
      forward(ctx, sliceOf(read, regionFrom, regionTo - regionFrom));
    }
  }

  /**
   * Hands on the region gathered so far, then {@code out}.
   *
   * @param out owned: handed to the next handler
   */
  private void handOn(ChannelHandlerContext ctx, ByteBuf out) {
    handOnRegion(ctx);
    forward(ctx, out);
  }

  /**
   * Hands {@code out} on, and counts it if the next handler left part of it unread. A reference is
   * held across the call so the check never looks at a buffer already recycled.
   *
   * @param out owned: handed to the next handler
   */
  private static void forward(ChannelHandlerContext ctx, ByteBuf out) {
    out.retain();
    try {
      ctx.fireChannelRead(out);
      if (out.isReadable()) {
        Metric.UNCONSUMED_HAND_ONS.add(1);
      }
    } finally {
      out.release();
    }
  }

  /**
   * A retained slice of the read buffer {@code in}, which the budget tracks from its first slice.
   *
   * @param in borrowed
   * @return owned by the caller
   */
  private ByteBuf sliceOf(ByteBuf in, int index, int length) {
    if (trackedRead != in) {
      budget.track(in);
      trackedRead = in;
    }
    return in.retainedSlice(index, length);
  }

  /** @return owned: a new pooled buffer of {@code capacity} bytes, which the budget tracks */
  private ByteBuf newCopy(ChannelHandlerContext ctx, int capacity) {
    ByteBuf copy = ctx.alloc().directBuffer(capacity);
    budget.track(copy);
    return copy;
  }

  private static int intBE(byte[] bytes, int offset) {
    return (bytes[offset] & 0xff) << 24 | (bytes[offset + 1] & 0xff) << 16
        | (bytes[offset + 2] & 0xff) << 8 | (bytes[offset + 3] & 0xff);
  }

  /** Whether a DATA frame of {@code frameBytes} may be sliced from a buffer of {@code pinBase}. */
  private static boolean mayPin(int frameBytes, int pinBase) {
    return (long) frameBytes * PIN_RATIO >= pinBase;
  }

  private static void countData(boolean sliced, int bytes) {
    (sliced ? Metric.DATA_BYTES_SLICED : Metric.DATA_BYTES_COPIED).add(bytes);
  }
}
