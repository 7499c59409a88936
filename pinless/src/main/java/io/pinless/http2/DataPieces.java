package io.pinless.http2;

import static io.pinless.http2.FrameHeader.FLAG_END_STREAM;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.ChannelHandlerContext;

/**
 * A DATA frame that reads cut, going on in pieces as its bytes arrive. Each piece is a whole DATA
 * frame of the same stream, END_STREAM on the last only, its header written into the 9 bytes in
 * front of its payload: HTTP/2 lets a sender split DATA anywhere, and flow control counts the same
 * bytes.
 *
 * <pre>
 *   read 1: | ... | DATA len=16384 | 6000 B |        read 2: | headroom 9 | 10384 B | ... |
 *   handed on:  | DATA len=6000 (no END_STREAM) | 6000 B |   | DATA len=10384 | 10384 B |
 * </pre>
 *
 * <p>Invariant: no piece under {@link FrameSlicer#GATHER_BYTES} goes on alone while more of the
 * frame is to come. Small pieces are gathered into one copy, which goes on before a larger piece,
 * when full, and with the frame's last byte. A piece that leaves less than {@link
 * FrameSlicer#JOIN_BYTES} to come keeps back its tail, so the frame's last piece is {@link
 * FrameSlicer#JOIN_BYTES} long even when it arrives in a batch of its own. A frame taken over from
 * a join of its stream starts with the join as its gathered bytes, and a last gather under
 * {@link FrameSlicer#JOIN_BYTES} stays open as its stream's join.
 *
 * <p>Memory: between reads it holds at most one gathered copy of up to {@link
 * DataJoins#JOIN_CAPACITY} bytes, its room at most twice the bytes it has (at least 256), so a
 * frame's length alone allocates nothing ahead of its bytes. Pieces go on as retained slices of
 * the read buffer (which they pin until gRPC releases them) or, where a slice may not pin its
 * buffer, as copies.
 */
final class DataPieces {
  /** The least room of a first gathered copy: a trickle does not regrow it for every byte. */
  private static final int MIN_GATHER_BYTES = 256;
  private final FrameOutput output;
  private final DataJoins joins;
  /** Payload bytes still to come. */
  private int left;
  /** The whole frame's size, header included: what decides whether a piece may be sliced. */
  private int frameBytes;
  /** The frame's flags (END_STREAM goes on the last piece only) and stream. */
  private int flags;
  private int stream;
  /** Gathered small pieces after 9 bytes left for their header; null when none. */
  private ByteBuf gathered;

  DataPieces(FrameOutput output, DataJoins joins) {
    this.output = output;
    this.joins = joins;
  }

  /**
   * Starts a cut DATA frame of {@code length} payload bytes. Its stream's open join, if any,
   * becomes its gathered bytes.
   */
  void start(int length, int flags, int streamWord) {
    this.left = length;
    this.flags = flags;
    this.stream = streamWord & 0x7fffffff;
    this.frameBytes = FrameHeader.BYTES + length;
    int join = joins.indexOf(stream);
    if (join >= 0) {
      gathered = joins.take(join);
    }
  }

  /** Payload bytes still to come: 0 once the frame has gone on. */
  int left() {
    return left;
  }

  /** Bytes held between reads. */
  int heldBytes() {
    return gathered == null ? 0 : gathered.readableBytes();
  }

  /** Releases what is gathered and forgets the frame. */
  void release() {
    left = 0;
    if (gathered != null) {
      gathered.release();
      gathered = null;
    }
  }

  /**
   * Hands on the next {@code n} payload bytes as a DATA frame of their own, or gathers them. The
   * header goes into the 9 bytes before the payload and the piece goes on as one slice. With no
   * room before it, the piece goes on as a composite of a header and the slice. A piece that may
   * not pin its buffer is copied with its header.
   *
   * @param in borrowed: bytes before its reader index may be overwritten; its reader index is
   *     advanced by {@code n}
   * @param pinBase the read buffer size a slice is weighed against ({@link FrameSlicer#mayPin})
   */
  void handOn(ChannelHandlerContext ctx, ByteBuf in, int n, int pinBase) {
    if (n == 0) {
      return;
    }
    if (n < FrameSlicer.GATHER_BYTES && (gathered != null || n < left)
        || n == left && n < FrameSlicer.JOIN_BYTES && keepsJoin()) {
      gather(ctx, in, n);
      return;
    }
    if (gathered != null && gatheredPayload() < FrameSlicer.JOIN_BYTES) {
      // The gathered pieces take enough of this large one to go on at least JOIN_BYTES long;
      // the piece's header then goes over bytes they copied.
      int take = FrameSlicer.JOIN_BYTES - gatheredPayload();
      if (gathered.writableBytes() < take) {
        moveGathered(ctx, FrameSlicer.JOIN_BYTES);
      }
      gathered.writeBytes(in, take);
      left -= take;
      n -= take;
    }
    handOnGathered(ctx);
    // A rest under JOIN_BYTES would go on as a small piece of its own when its read ends the
    // batch: this piece keeps back enough of its tail that the frame's last piece is JOIN_BYTES.
    int keep = n < left && left - n < FrameSlicer.JOIN_BYTES
        ? FrameSlicer.JOIN_BYTES - (left - n) : 0;
    n -= keep;
    int pieceFlags = n == left ? flags : flags & ~FLAG_END_STREAM;
    int start = in.readerIndex() - FrameHeader.BYTES;
    if (!FrameSlicer.mayPin(frameBytes, pinBase)) {
      ByteBuf copy = output.newCopy(ctx, FrameHeader.BYTES + n);
      FrameHeader.writeData(copy, n, pieceFlags, stream);
      copy.writeBytes(in, in.readerIndex(), n);
      FrameOutput.countData(false, FrameHeader.BYTES + n);
      output.handOn(ctx, copy);
    } else if (start >= 0) {
      FrameHeader.setData(in, start, n, pieceFlags, stream);
      FrameOutput.countData(true, FrameHeader.BYTES + n);
      output.addToRegion(ctx, in, start, start + FrameHeader.BYTES + n);
    } else {
      // No room before the payload (a buffer from an io_uring ring): the header goes in front.
      CompositeByteBuf frame = ctx.alloc().compositeDirectBuffer(2);
      frame.addComponent(true, FrameHeader.writeData(
          output.newCopy(ctx, FrameHeader.BYTES), n, pieceFlags, stream));
      frame.addComponent(true, output.sliceOf(in, in.readerIndex(), n));
      FrameOutput.countData(true, FrameHeader.BYTES + n);
      output.handOn(ctx, frame);
    }
    in.skipBytes(n);
    left -= n;
    if (keep > 0) {
      gather(ctx, in, keep);
    }
  }

  private int gatheredPayload() {
    return gathered.readableBytes() - FrameHeader.BYTES;
  }

  /**
   * Copies the next {@code n} payload bytes into the gathered copy, handing it on when it is full
   * or holds the frame's last byte; a last gather that its stream may join stays open as a join.
   *
   * @param in borrowed: its reader index is advanced by {@code n}
   */
  private void gather(ChannelHandlerContext ctx, ByteBuf in, int n) {
    int remaining = n;
    while (remaining > 0) {
      if (gathered == null) {
        // Room for the frame's rest, or, when a frame of its stream joins it, for the join; no
        // more than twice what has come, so a header's claim allocates nothing ahead.
        int room = remaining == left && keepsJoin()
            ? DataJoins.JOIN_CAPACITY - FrameHeader.BYTES
            : Math.min(left, Math.min(FrameSlicer.GATHER_BYTES, startRoom(remaining)));
        gathered = output.newCopy(ctx, FrameHeader.BYTES + room);
        gathered.writerIndex(FrameHeader.BYTES);
      } else if (!gathered.isWritable() && !fullSize()) {
        grow(ctx, remaining);
      }
      int take = Math.min(remaining, gathered.writableBytes());
      gathered.writeBytes(in, take);
      remaining -= take;
      left -= take;
      if (!gathered.isWritable() && fullSize() || left == 0 && !keepsJoin()) {
        handOnGathered(ctx);
      }
    }
    if (left == 0 && gathered != null) {
      joins.open(stream, gathered);
      gathered = null;
    }
  }

  /** The room a first gathered copy gets for {@code bytes} come: twice them, at least 256. */
  private static int startRoom(int bytes) {
    return Math.max(MIN_GATHER_BYTES, 2 * bytes);
  }

  /**
   * Moves what is gathered into a copy with room for twice as much, up to {@link
   * FrameSlicer#GATHER_BYTES} and the frame's rest, for {@code bytes} more to come.
   */
  private void grow(ChannelHandlerContext ctx, int bytes) {
    int payload = gatheredPayload();
    moveGathered(ctx, Math.min(payload + left,
        Math.min(FrameSlicer.GATHER_BYTES, Math.max(2 * payload, payload + startRoom(bytes)))));
  }

  /** Whether the gathered copy has room for a whole gather: full, it goes on. */
  private boolean fullSize() {
    return gathered.capacity() - FrameHeader.BYTES >= FrameSlicer.GATHER_BYTES;
  }

  /**
   * Moves what is gathered into a new tracked copy with room for {@code payload} bytes in all (a
   * copy the budget tracks does not grow in place: the budget counts its size once).
   */
  private void moveGathered(ChannelHandlerContext ctx, int payload) {
    ByteBuf larger = output.newCopy(ctx, FrameHeader.BYTES + payload).writeBytes(gathered);
    gathered.release();
    gathered = larger;
  }

  /** Whether the frame, once whole, leaves what is gathered open as a join of its stream. */
  private boolean keepsJoin() {
    return (flags & FLAG_END_STREAM) == 0 && joins.hasRoom() && FrameSlicer.mayJoin(stream)
        && (gathered == null || gatheredPayload() < FrameSlicer.JOIN_BYTES);
  }

  /** Hands on the gathered pieces, if any, right-sized, as a DATA frame of their own. */
  private void handOnGathered(ChannelHandlerContext ctx) {
    if (gathered == null) {
      return;
    }
    ByteBuf out = output.rightSized(ctx, gathered);
    gathered = null;
    int pieceFlags = left == 0 ? flags : flags & ~FLAG_END_STREAM;
    FrameHeader.setData(out, 0, out.readableBytes() - FrameHeader.BYTES, pieceFlags, stream);
    FrameOutput.countData(false, out.readableBytes());
    output.handOn(ctx, out);
  }
}
