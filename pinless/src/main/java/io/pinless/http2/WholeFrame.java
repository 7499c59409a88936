package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.ChannelHandlerContext;

/**
 * A frame (or the client preface) that reads cut and that goes on once whole, as a composite of
 * its parts: any frame but unpadded DATA given headroom.
 *
 * <pre>
 *   read 1: | ... | HEADERS len=300, first 100 B |   read 2: | last 200 B | ... |
 *   handed on:  composite( copy of the 109 B | copy of the 200 B )
 * </pre>
 *
 * <p>Invariant: the parts of a DATA frame large enough against its read buffer ({@link
 * FrameSlicer#mayPin}) are retained slices; every other part is copied into pieces of at most
 * {@link #COPY_PIECE_BYTES}, each no larger than what has come of the frame with it (at least
 * {@link #MIN_PIECE_BYTES}): a frame's length never makes it allocate ahead of the bytes that
 * have come, and what it holds is at most twice those bytes, or one smallest piece.
 *
 * <p>Memory: it holds the parts received so far, copies and slices (which pin their read
 * buffers), until the frame is whole; then nothing.
 */
final class WholeFrame {
  /** Copies of a frame's parts grow in pieces of at most this many bytes (16 KiB). */
  static final int COPY_PIECE_BYTES = 16384;
  /** The smallest piece, so a frame that trickles in does not take a piece per byte. */
  static final int MIN_PIECE_BYTES = 64;

  private final FrameOutput output;
  /** Bytes still to come, header included. */
  private int left;
  /** The whole size of the frame, header included. */
  private int frameBytes;
  /** Whether it is a DATA frame, whose parts may be slices. */
  private boolean isData;
  /** The parts received so far; made on the first part. */
  private CompositeByteBuf parts;
  /** Copied bytes not yet added to {@link #parts}: it grows by whole pieces. */
  private ByteBuf copyPiece;

  WholeFrame(FrameOutput output) {
    this.output = output;
  }

  /** Starts a frame of {@code bytes} in all, header included. */
  void start(int bytes, boolean isData) {
    left = bytes;
    frameBytes = bytes;
    this.isData = isData;
  }

  /** Bytes still to come: 0 once the frame has gone on. */
  int left() {
    return left;
  }

  /** Bytes held between reads. */
  int heldBytes() {
    return (parts == null ? 0 : parts.readableBytes())
        + (copyPiece == null ? 0 : copyPiece.readableBytes());
  }

  /** Releases the parts and forgets the frame. */
  void release() {
    left = 0;
    if (copyPiece != null) {
      copyPiece.release();
      copyPiece = null;
    }
    if (parts != null) {
      parts.release();
      parts = null;
    }
  }

  /**
   * Adds the next {@code n} bytes of {@code in}: a retained slice if it is a DATA frame large
   * enough against this read buffer (the frame, not the part), else a copy. Hands the frame on
   * once it is whole.
   *
   * @param in borrowed: its reader index is advanced by {@code n}
   */
  void append(ChannelHandlerContext ctx, ByteBuf in, int n, int pinBase) {
    if (n > 0) {
      if (isData && FrameSlicer.mayPin(frameBytes, pinBase)) {
        addCopyPiece(ctx);
        parts(ctx).addComponent(true, output.sliceOf(in, in.readerIndex(), n));
        in.skipBytes(n);
        FrameOutput.countData(true, n);
        left -= n;
      } else {
        if (isData) {
          FrameOutput.countData(false, n);
        }
        copy(ctx, in, n);
      }
    }
    if (left == 0) {
      addCopyPiece(ctx);
      ByteBuf frame = parts;
      parts = null;
      output.handOn(ctx, frame);
    }
  }

  /**
   * Copies the next {@code n} bytes of {@code in} into the frame.
   *
   * @param in borrowed: its reader index is advanced by {@code n}
   */
  void copy(ChannelHandlerContext ctx, ByteBuf in, int n) {
    int remaining = n;
    while (remaining > 0) {
      if (copyPiece == null) {
        // No larger than what has come of the frame with this part: a header's claim alone
        // allocates nothing ahead of the peer's bytes.
        int received = frameBytes - left + remaining;
        copyPiece = output.newCopy(ctx,
            Math.min(left, Math.min(COPY_PIECE_BYTES, Math.max(MIN_PIECE_BYTES, received))));
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
    if (parts == null) {
      parts = ctx.alloc().compositeDirectBuffer(Integer.MAX_VALUE);
    }
    return parts;
  }

  private void addCopyPiece(ChannelHandlerContext ctx) {
    if (copyPiece != null) {
      parts(ctx).addComponent(true, copyPiece);
      copyPiece = null;
    }
  }
}
