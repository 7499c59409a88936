package io.pinless.testing;

import io.netty.buffer.PoolArenaMetric;
import io.netty.buffer.PoolChunkListMetric;
import io.netty.buffer.PoolChunkMetric;
import io.netty.buffer.PoolSubpageMetric;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongPredicate;

/** What a pool's live buffers take, for tests and benchmarks that count memory. */
public final class PoolBytes {
  private PoolBytes() {}

  /**
   * Bytes of the pool's pages in use, heap and direct arenas: a page that holds small buffers
   * counts whole while any of them lives (the pool can give it to no other size), and huge
   * buffers, which live outside the chunks, count their size.
   */
  public static long pagesInUse(PooledByteBufAllocator alloc) {
    long bytes = 0;
    List<PoolArenaMetric> arenas = new ArrayList<>(alloc.metric().directArenas());
    arenas.addAll(alloc.metric().heapArenas());
    for (PoolArenaMetric arena : arenas) {
      long chunks = 0;
      for (PoolChunkListMetric list : arena.chunkLists()) {
        for (PoolChunkMetric chunk : list) {
          chunks += chunk.chunkSize();
          bytes += chunk.chunkSize() - chunk.freeBytes();
        }
      }
      if (arena.numActiveHugeAllocations() > 0) {
        bytes += Math.max(0, arena.numActiveBytes() - chunks);
      }
    }
    return bytes;
  }

  /**
   * Bytes the pool hands out to live buffers, heap and direct, at its size classes: the pages in
   * use less the free slots of the small size classes' pages.
   */
  public static long liveBytes(PooledByteBufAllocator alloc) {
    for (int attempt = 1; ; attempt++) {
      try {
        return liveBytesOnce(alloc);
      } catch (NullPointerException e) {
        // Netty's subpage metrics walk lists an event loop may be changing: read again.
        if (attempt == 1000) {
          throw e;
        }
      }
    }
  }

  /**
   * Reads {@code alloc}'s {@link #liveBytes} until {@code enough} accepts them, for what the read
   * budgets' sweep timers release; after a minute (a hang guard) returns what it read last.
   */
  public static long liveBytesOnceSwept(PooledByteBufAllocator alloc, LongPredicate enough) {
    long guard = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
    long bytes = liveBytes(alloc);
    while (!enough.test(bytes) && System.nanoTime() < guard) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
      bytes = liveBytes(alloc);
    }
    return bytes;
  }

  private static long liveBytesOnce(PooledByteBufAllocator alloc) {
    long bytes = pagesInUse(alloc);
    List<PoolArenaMetric> arenas = new ArrayList<>(alloc.metric().directArenas());
    arenas.addAll(alloc.metric().heapArenas());
    for (PoolArenaMetric arena : arenas) {
      for (PoolSubpageMetric page : arena.smallSubpages()) {
        bytes -= (long) page.numAvailable() * page.elementSize();
      }
    }
    return Math.max(0, bytes);
  }

  /** Pooled buffers allocated and not yet released, heap and direct. */
  public static long liveBuffers(PooledByteBufAllocator alloc) {
    long buffers = 0;
    List<PoolArenaMetric> arenas = new ArrayList<>(alloc.metric().directArenas());
    arenas.addAll(alloc.metric().heapArenas());
    for (PoolArenaMetric arena : arenas) {
      buffers += arena.numActiveAllocations();
    }
    return buffers;
  }
}
