package io.pinless.tls;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.util.concurrent.PromiseNotifier;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.function.IntFunction;

/**
 * Plaintext written and not yet sealed, in order, with each write's promise. {@link #take} gives
 * the next record's worth of plaintext: a run of small writes gathered into one buffer, or a
 * slice of a large one with no copy. A write's promise goes with the record holding its last
 * byte: {@link #promiseOfTaken} gives the promise to write that record with, which is the
 * write's own when only one write ends in it (no listener, no composite buffer per write, as
 * {@code CoalescingBufferQueue} needs).
 *
 * <p>Plaintext held here does not count towards the channel's writability: it is held only until
 * the next flush, and sealed records are written to the channel then. Confined to the event loop.
 */
final class PendingWrites {
  /** Each write's buffer, then its promise. */
  private final ArrayDeque<Object> entries = new ArrayDeque<>(8);
  /** Promises of the writes whose last byte was taken since the last {@link #promiseOfTaken}. */
  private ChannelPromise[] ended = new ChannelPromise[4];
  private int endedCount;

  /** @param plaintext owned: released once taken whole, or by {@link #failAll} */
  void add(ByteBuf plaintext, ChannelPromise promise) {
    entries.add(plaintext);
    entries.add(promise);
  }

  boolean isEmpty() {
    return entries.isEmpty();
  }

  /**
   * Takes up to {@code maxBytes} from the front: a write that alone holds at least that much
   * gives a slice of itself; a single write is taken as it is; several are gathered into one
   * buffer from {@code allocate}.
   *
   * @return owned by the caller
   */
  ByteBuf take(int maxBytes, IntFunction<ByteBuf> allocate) {
    skipEmpty();
    ByteBuf front = (ByteBuf) entries.peekFirst();
    if (front == null) {
      return Unpooled.EMPTY_BUFFER;
    }
    if (front.readableBytes() > maxBytes) {
      return front.readRetainedSlice(maxBytes);
    }
    if (entries.size() == 2 || front.readableBytes() == maxBytes) {
      entries.pollFirst();
      end((ChannelPromise) entries.pollFirst());
      return front;
    }
    int total = 0;
    for (Object entry : entries) {
      if (entry instanceof ByteBuf) {
        total += ((ByteBuf) entry).readableBytes();
        if (total >= maxBytes) {
          break;
        }
      }
    }
    ByteBuf gathered = allocate.apply(Math.min(total, maxBytes));
    try {
      while (gathered.isWritable() && !entries.isEmpty()) {
        ByteBuf next = (ByteBuf) entries.peekFirst();
        gathered.writeBytes(next, Math.min(next.readableBytes(), gathered.writableBytes()));
        skipEmpty();
      }
    } catch (RuntimeException e) {
      gathered.release();
      throw e;
    }
    return gathered;
  }

  /** Releases the writes at the front that have nothing left and records their promises. */
  private void skipEmpty() {
    while (!entries.isEmpty() && !((ByteBuf) entries.peekFirst()).isReadable()) {
      ((ByteBuf) entries.pollFirst()).release();
      end((ChannelPromise) entries.pollFirst());
    }
  }

  private void end(ChannelPromise promise) {
    if (promise.isVoid()) {
      return;
    }
    if (endedCount == ended.length) {
      ended = Arrays.copyOf(ended, endedCount * 2);
    }
    ended[endedCount++] = promise;
  }

  /**
   * The promise to write the record of what was taken with: it completes the promises of the
   * writes that ended in it.
   */
  ChannelPromise promiseOfTaken(ChannelHandlerContext ctx) {
    try {
      switch (endedCount) {
        case 0:
          return ctx.newPromise();
        case 1:
          return ended[0];
        default:
          ChannelPromise record = ctx.newPromise();
          record.addListener(new PromiseNotifier<>(false, Arrays.copyOf(ended, endedCount)));
          return record;
      }
    } finally {
      Arrays.fill(ended, 0, endedCount, null);
      endedCount = 0;
    }
  }

  /** Fails the promises of what was taken and not written, and of every write still queued. */
  void failAll(Throwable cause) {
    for (int i = 0; i < endedCount; i++) {
      ended[i].tryFailure(cause);
      ended[i] = null;
    }
    endedCount = 0;
    while (!entries.isEmpty()) {
      ((ByteBuf) entries.pollFirst()).release();
      ((ChannelPromise) entries.pollFirst()).tryFailure(cause);
    }
  }
}
