package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.read.ReadBudget;

/**
 * What the slicer hands to the next handler: retained slices of read buffers and pooled copies.
 * The budget tracks every read buffer sliced and every copy made until downstream has released
 * them. Neighbouring slices of one read buffer go on as one slice: each buffer costs grpc-netty a
 * pass of its decoder.
 *
 * <p>Memory: it holds nothing between reads. The region and the tracked read refer to the read
 * buffer of the call in progress, and {@link #endRead} forgets them.
 */
final class FrameOutput {
  private final ReadBudget budget;
  /** The read buffer of this read once the budget tracks it; else null. */
  private ByteBuf trackedRead;
  /** The read buffer whose bytes {@code [regionFrom, regionTo)} go on as one slice; or null. */
  private ByteBuf regionRead;
  private int regionFrom;
  private int regionTo;

  FrameOutput(ReadBudget budget) {
    this.budget = budget;
  }

  /**
   * Adds the bytes {@code [from, to)} of the read buffer to the region that goes on as one slice,
   * handing on the region so far first if they do not follow it.
   *
   * @param in borrowed
   */
  void addToRegion(ChannelHandlerContext ctx, ByteBuf in, int from, int to) {
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
  void handOnRegion(ChannelHandlerContext ctx) {
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
  void handOn(ChannelHandlerContext ctx, ByteBuf out) {
    handOnRegion(ctx);
    forward(ctx, out);
  }

  /** Forgets the read buffer of the read that ends, whatever was handed on. */
  void endRead() {
    regionRead = null;
    trackedRead = null;
  }

  /**
   * A retained slice of the read buffer {@code in}, which the budget tracks from its first slice.
   *
   * @param in borrowed
   * @return owned by the caller: a retained slice, which pins {@code in} until released
   */
  ByteBuf sliceOf(ByteBuf in, int index, int length) {
    if (trackedRead != in) {
      budget.track(in);
      trackedRead = in;
    }
    return in.retainedSlice(index, length);
  }

  /** @return owned by the caller: a new pooled buffer of {@code capacity}, tracked by the budget */
  ByteBuf newCopy(ChannelHandlerContext ctx, int capacity) {
    ByteBuf copy = ctx.alloc().directBuffer(capacity);
    budget.track(copy);
    return copy;
  }

  /**
   * {@code copy} in a buffer at most 1/8 larger than its bytes: gRPC may hold it until its message
   * is whole, and a join's or a gather's buffer is sized for more than it may get.
   *
   * @param copy owned: returned as is, or released once its bytes are copied
   * @return owned by the caller
   */
  ByteBuf rightSized(ChannelHandlerContext ctx, ByteBuf copy) {
    if (copy.readableBytes() >= copy.capacity() - copy.capacity() / 8) {
      return copy;
    }
    ByteBuf right = newCopy(ctx, copy.readableBytes()).writeBytes(copy);
    copy.release();
    return right;
  }

  /** Counts DATA frame bytes handed on, as slices or as copies. */
  static void countData(boolean sliced, int bytes) {
    (sliced ? Metric.DATA_BYTES_SLICED : Metric.DATA_BYTES_COPIED).add(bytes);
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
}
