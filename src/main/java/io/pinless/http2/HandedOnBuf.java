package io.pinless.http2;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.pinless.read.ReadBudget;

/**
 * A buffer {@link Http2FrameSlicer} hands on: a composite of retained slices of read buffers and
 * right-sized copies. It counts its bytes in the connection's {@link ReadBudget} from creation
 * until its last reference (or that of any slice derived from it, which share its count) is
 * released, on whichever thread that happens.
 */
final class HandedOnBuf extends CompositeByteBuf {
  private final ReadBudget budget;
  /** The bytes counted in the budget; fixed when the buffer is handed on. */
  private long counted;

  HandedOnBuf(ByteBufAllocator alloc, ReadBudget budget) {
    super(alloc, true, Integer.MAX_VALUE);
    this.budget = budget;
  }

  /** Starts counting this buffer's readable bytes in the budget; call once, before handing on. */
  HandedOnBuf count() {
    counted = readableBytes();
    budget.add(counted);
    return this;
  }

  @Override
  protected void deallocate() {
    try {
      super.deallocate();
    } finally {
      budget.release(counted);
    }
  }
}
