package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class ReadBudgetTest {
  @Test
  void theLargestLimitIsNeverExceededWhateverTheAllowance() {
    ReadBudget budget = new ReadBudget(Long.MAX_VALUE);
    ByteBuf held = Unpooled.directBuffer(4096);
    budget.track(held);
    for (long allowance : new long[] {0, 1, 1 << 20, Long.MAX_VALUE}) {
      assertFalse(budget.isExceeded(allowance), "allowance " + allowance);
    }
    held.release();
    budget.releaseAll();
  }

  @Test
  void countsRetainedBuffersUntilReleasedAndGrowsItsArraysWhenNeeded() {
    ReadBudget budget = new ReadBudget(100_000);
    List<ByteBuf> downstream = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(16384);
      budget.track(read);
      downstream.add(read.retainedSlice(0, 100));
      read.release(); // the reader is done with it; the budget and the slice hold it
    }
    assertEquals(10, budget.trackedBuffers());
    assertTrue(budget.slots() >= 10, "the arrays grew");
    assertEquals(10 * 16384, budget.retainedBytes());
    assertTrue(budget.isExceeded());
    for (int i = 0; i < 9; i++) {
      downstream.get(i).release();
    }
    assertEquals(16384, budget.retainedBytes(), "a sweep dropped the nine released buffers");
    assertTrue(budget.slots() > 0);
    downstream.get(9).release();
    budget.sweep();
    assertEquals(0, budget.retainedBytes());
    assertEquals(0, budget.trackedBuffers());
  }

  @Test
  void aBufferCountsWhatItPinsInItsPoolToTheEndOfItsSizeClass() {
    ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(9000);
    ByteBuf slice = read.retainedSlice(0, 100);
    try {
      int sizeClass = read.writerIndex() + read.maxFastWritableBytes();
      assertTrue(sizeClass > 9000, "the pool rounds 9,000 up to a size class: " + sizeClass);
      assertEquals(sizeClass, ReadBudget.pinnedBytes(read));
      assertEquals(sizeClass, ReadBudget.pinnedBytes(slice), "a slice pins all of it");
      ByteBuf heap = io.netty.buffer.Unpooled.buffer(9000);
      assertEquals(9000, ReadBudget.pinnedBytes(heap), "an unpooled buffer pins its capacity");
      heap.release();
    } finally {
      slice.release();
      read.release();
    }
  }

  @Test
  void theProcessWideTotalFollowsTrackSweepAndReleaseAll() {
    ReadBudget budget = new ReadBudget(1_000_000);
    ByteBuf a = PooledByteBufAllocator.DEFAULT.directBuffer(12_345);
    ByteBuf b = PooledByteBufAllocator.DEFAULT.directBuffer(54_321);
    int pinsA = ReadBudget.pinnedBytes(a);
    int pinsB = ReadBudget.pinnedBytes(b);
    long before = io.pinless.PinlessMetrics.Metric.TRACKED_BYTES.value();
    budget.track(a);
    budget.track(b);
    long tracking = io.pinless.PinlessMetrics.Metric.TRACKED_BYTES.value();
    ByteBuf sliceOfB = b.retainedSlice(0, 10);
    a.release();
    b.release();
    budget.sweep(); // a is no longer held downstream; b is, by its slice
    long afterSweep = io.pinless.PinlessMetrics.Metric.TRACKED_BYTES.value();
    budget.releaseAll();
    long afterReleaseAll = io.pinless.PinlessMetrics.Metric.TRACKED_BYTES.value();
    sliceOfB.release();
    assertEquals(pinsA + pinsB, tracking - before);
    assertEquals(pinsB, afterSweep - before, "the sweep took what a pins off");
    assertEquals(0, afterReleaseAll - before, "releaseAll took the rest off");
  }

  @Test
  void releaseAllGivesUpItsReferences() {
    ReadBudget budget = new ReadBudget(1000);
    ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(4096);
    budget.track(read);
    ByteBuf slice = read.retainedSlice(0, 10);
    read.release();
    budget.releaseAll();
    assertEquals(0, budget.trackedBuffers());
    assertEquals(1, read.refCnt(), "only the slice holds it now");
    slice.release();
    assertEquals(0, read.refCnt());
  }
  @Test
  void holdsNoTableUntilItTracksAndGivesItBackWhenTrimmedEmpty() {
    ReadBudget budget = new ReadBudget(1000);
    assertEquals(0, budget.slots());
    assertTrue(budget.trim());
    ByteBuf read = PooledByteBufAllocator.DEFAULT.directBuffer(64);
    budget.track(read);
    ByteBuf slice = read.retainedSlice(0, 10);
    read.release();
    assertTrue(budget.hasTable());
    assertFalse(budget.trim(), "a buffer is tracked: the table stays");
    assertEquals(1, budget.trackedBuffers());
    slice.release();
    budget.sweep();
    assertTrue(budget.trim());
    assertFalse(budget.hasTable());
    assertEquals(0, read.refCnt(), "the sweep released it");
  }
}
