package io.pinless.http2;

import static io.pinless.http2.FrameHeader.FLAG_END_STREAM;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;

/**
 * The open joins of a read batch: for each of at most {@link #MAX_JOINS} streams, a copy of its
 * small whole DATA frames' payloads, 9 bytes left in front for the header it goes on with.
 *
 * <pre>
 *   in:   | DATA s=1 10 B | DATA s=3 10 B | DATA s=1 10 B | ... | PING |
 *   join of stream 1:  | 9 B for a header | 10 B | 10 B | ...  (4 KiB buffer)
 *   out:  | DATA s=1 (joined) | DATA s=3 (joined) | PING |
 * </pre>
 *
 * <p>Invariant: a join goes on as one DATA frame of its stream when full, with END_STREAM, before
 * any frame that is not DATA, and when the read batch ends, unless it {@linkplain #endBatch may
 * wait}: all of it bytes of its stream's incomplete gRPC message (which gRPC cannot deliver before
 * the rest arrives), and small enough against the stream's flow-control window that the peer can
 * always send that rest. So no stream's DATA reaches gRPC in pieces under {@link
 * FrameSlicer#JOIN_BYTES} but a message's last, even when streams take turns; a message that
 * trickles in goes on in full joins; and no byte gRPC could deliver waits for another batch.
 * gRPC's deframer copies runs of pieces under 1 KiB into heap arrays (grpc-java 1.84 and later;
 * earlier ones keep an object per piece), which costs a message its NIO buffers and so its
 * zero-copy path.
 *
 * <p>Memory: between batches, only joins that wait, each right-sized, with the table; none for a
 * connection with no incomplete message. Within a batch, at most {@link #MAX_JOINS} buffers of
 * {@link #JOIN_CAPACITY} bytes. Each goes on {@linkplain FrameOutput#rightSized right-sized}.
 */
final class DataJoins {
  /** A join's buffer: 4 KiB, a pool size class, header included. */
  static final int JOIN_CAPACITY = 4096;
  /** At most this many streams have a join open at once; others' small frames go on alone. */
  static final int MAX_JOINS = 8;

  private final FrameOutput output;
  /** The joins' buffers, {@code [0, count)}; made on a batch's first join, null between batches. */
  private ByteBuf[] buffers;
  /** The stream of each join. */
  private int[] streams;
  private int count;

  DataJoins(FrameOutput output) {
    this.output = output;
  }

  /** How many joins are open. */
  int count() {
    return count;
  }

  /** Whether a new join may open. */
  boolean hasRoom() {
    return count < MAX_JOINS;
  }

  /** The index of {@code stream}'s open join, or -1. */
  int indexOf(int stream) {
    for (int i = 0; i < count; i++) {
      if (streams[i] == stream) {
        return i;
      }
    }
    return -1;
  }

  /** Payload bytes in join {@code join}. */
  int payloadBytes(int join) {
    return buffers[join].readableBytes() - FrameHeader.BYTES;
  }

  /** Bytes held: 0 between batches. */
  int heldBytes() {
    int bytes = 0;
    for (int i = 0; i < count; i++) {
      bytes += buffers[i].readableBytes();
    }
    return bytes;
  }

  /**
   * Copies the payload of the whole DATA frame at {@code pos} into its stream's join, opening one
   * if needed ({@code join} is -1 then); hands the join on when full or at END_STREAM.
   *
   * @param in borrowed: nothing in it is moved or written
   */
  void join(ChannelHandlerContext ctx, int join, int stream, ByteBuf in, int pos, int length,
      int flags) {
    if (join >= 0 && !makeRoom(ctx, join, length)) {
      handOn(ctx, join, 0);
      join = -1;
    }
    if (join < 0) {
      join = open(stream, output.newCopy(ctx, JOIN_CAPACITY).writerIndex(FrameHeader.BYTES));
    }
    ByteBuf joined = buffers[join];
    joined.writeBytes(in, pos + FrameHeader.BYTES, length);
    if ((flags & FLAG_END_STREAM) != 0 || !joined.isWritable()) {
      handOn(ctx, join, flags & FLAG_END_STREAM);
    }
  }

  /**
   * Moves the head of the whole DATA frame at {@code pos} into its stream's open join: enough to
   * make the join {@link FrameSlicer#JOIN_BYTES}, or all of it if less than that would be left;
   * the join then goes on. A rest goes on as a frame of its own, its header written over bytes the
   * join copied. With {@code rewritable} false (padded, or no headroom) the frame is left whole.
   *
   * @param in borrowed: bytes between {@code pos} and the returned index may be overwritten
   * @return where the next frame starts: the rest's header, or the frame's end
   */
  int topUp(ChannelHandlerContext ctx, int join, ByteBuf in, int pos, int length, int flags,
      boolean rewritable) {
    if (!rewritable) {
      handOn(ctx, join, 0);
      return pos;
    }
    int take = Math.max(0, FrameSlicer.JOIN_BYTES - payloadBytes(join));
    if (length - take < FrameSlicer.JOIN_BYTES) {
      take = length;
    }
    int stream = streams[join];
    if (!makeRoom(ctx, join, take)) {
      handOn(ctx, join, 0);
      return pos;
    }
    buffers[join].writeBytes(in, pos + FrameHeader.BYTES, take);
    if (take == length) {
      handOn(ctx, join, flags & FLAG_END_STREAM);
      return pos + FrameHeader.BYTES + length;
    }
    handOn(ctx, join, 0);
    if (take == 0) {
      return pos;
    }
    int rest = pos + take;
    FrameHeader.setData(in, rest, length - take, flags, stream);
    return rest;
  }

  /**
   * Whether join {@code join} has room for {@code length} more bytes. A join in a right-sized
   * buffer (made from a cut frame's last piece, or waiting from a batch before) moves to a join's
   * buffer for them if they fit there.
   */
  private boolean makeRoom(ChannelHandlerContext ctx, int join, int length) {
    ByteBuf joined = buffers[join];
    if (joined.writableBytes() >= length) {
      return true;
    }
    if (joined.readableBytes() + length > JOIN_CAPACITY) {
      return false;
    }
    buffers[join] = output.newCopy(ctx, JOIN_CAPACITY).writeBytes(joined);
    joined.release();
    return true;
  }

  /**
   * Opens a join.
   *
   * @param joined owned: the join's buffer, 9 bytes left for its header
   * @return its index
   */
  int open(int stream, ByteBuf joined) {
    if (buffers == null) {
      buffers = new ByteBuf[MAX_JOINS];
      streams = new int[MAX_JOINS];
    }
    buffers[count] = joined;
    streams[count] = stream;
    return count++;
  }

  /** @return owned by the caller: the join's buffer, no longer open */
  ByteBuf take(int join) {
    ByteBuf joined = buffers[join];
    count--;
    buffers[join] = buffers[count];
    streams[join] = streams[count];
    buffers[count] = null;
    return joined;
  }

  /** Hands on a join as one DATA frame of its stream with {@code flags}. */
  void handOn(ChannelHandlerContext ctx, int join, int flags) {
    int stream = streams[join];
    ByteBuf joined = output.rightSized(ctx, take(join));
    FrameHeader.setData(joined, 0, joined.readableBytes() - FrameHeader.BYTES, flags, stream);
    FrameOutput.countData(false, joined.readableBytes());
    output.handOn(ctx, joined);
  }

  /** Hands on every open join. */
  void handOnAll(ChannelHandlerContext ctx) {
    while (count > 0) {
      handOn(ctx, count - 1, 0);
    }
  }

  /**
   * The read batch has ended: hands on every open join but those whose payload is at most {@code
   * waiting.bytesMayWait} of their stream, when that is not 0; those are right-sized and wait for
   * the next batch. Gives back the table when none waits.
   */
  void endBatch(ChannelHandlerContext ctx, Waiting waiting) {
    for (int i = count - 1; i >= 0; i--) {
      long mayWait = waiting.bytesMayWait(streams[i]);
      if (mayWait == 0 || payloadBytes(i) > mayWait) {
        handOn(ctx, i, 0);
      } else {
        buffers[i] = output.rightSized(ctx, buffers[i]);
      }
    }
    if (count == 0) {
      buffers = null;
      streams = null;
    }
  }

  /** How many bytes of a stream's DATA may wait for the next read batch. */
  @FunctionalInterface
  interface Waiting {
    /** None: every join goes on when its batch ends. */
    Waiting NONE = stream -> 0;

    /** Payload bytes of {@code stream} that may wait for the next batch; 0 for none. */
    long bytesMayWait(int stream);
  }

  /** Releases every open join. */
  void release() {
    for (int i = 0; i < count; i++) {
      buffers[i].release();
      buffers[i] = null;
    }
    count = 0;
  }
}
