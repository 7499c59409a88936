package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.util.concurrent.FastThreadLocal;
import io.netty.util.concurrent.PromiseNotifier;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.security.GeneralSecurityException;
import java.util.Arrays;

/**
 * Seals plaintext into ALTS records: plaintext {@link ByteBuf}s in, frames out, no frame larger
 * than {@code maxFrameSize} bytes in all. The sending half of {@link AltsRecordStage}, and what
 * {@link AltsRecordEncoder} runs.
 *
 * <pre>
 *   writes:  | w1 (3 KiB) | w2 (30 KiB) | w3 (1 KiB) |  flush
 *   frames:  | len | 6 | seal(w1 + 13 KiB of w2) | tag || len | 6 | seal(17 KiB of w2 + w3) | tag |
 * </pre>
 *
 * <p>Writes are queued until flush, then coalesced into frames as large as allowed. Each frame is
 * one pooled direct buffer, sealed straight from the callers' buffers (composites included; with
 * Conscrypt, which seals only whole direct buffers, the pieces of a frame gathered from several
 * buffers, or from a heap buffer, are first copied into the thread's scratch buffer and sealed
 * from it). A write's buffer is released as
 * soon as its last byte is sealed; its promise completes when the frame holding that byte is
 * written, and fails if encryption failed before it.
 *
 * <p>Memory: between flushes it holds the written buffers, which the callers gave it; after a flush
 * it holds nothing. The frames it writes belong to the channel's outbound buffer.
 */
final class AltsRecordSealer {
  private final RecordCipher cipher;
  private final int maxPayload;
  /**
   * The writes not yet framed, in order: each buffer followed by its promise, in {@code [head,
   * size)}. Entries before {@code done} are writes sealed in full into the frame being built (their
   * buffers released, their promises waiting for that frame); from {@code done} on they are still
   * pending. Taken on the first write (the thread's spare array, see {@link #SPARE}) and given
   * back once a flush has framed everything, so a connection between flushes (an idle one) holds
   * no array.
   */
  private Object[] queue;
  private int head;
  private int done;
  private int size;
  /** Bytes readable in the pending writes. */
  private long pendingBytes;
  /**
   * Scratch: the NIO views of one frame's plaintext; made on first use (only a provider that
   * takes pieces, the JDK's, needs it).
   */
  private ByteBuffer[] views;
  /** The first fatal error; every later write fails with it. */
  private Throwable failure;

  /** A sealer of records this end sends; see {@link AltsRecordEncoder#AltsRecordEncoder}. */
  AltsRecordSealer(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize, AesGcm aes) {
    this.maxPayload = AltsFrames.checkMaxFrameSize(maxFrameSize) - AltsFrames.OVERHEAD_BYTES;
    this.cipher = new RecordCipher(protocol, key, aes, !isClient);
  }

  /**
   * Queues {@code buf} until the next flush.
   *
   * @param buf owned: released once sealed, or on failure
   */
  void write(ByteBuf buf, ChannelPromise promise) {
    if (failure != null) {
      buf.release();
      promise.setFailure(failure);
      return;
    }
    if (queue == null) {
      queue = takeSpare();
    } else if (size == queue.length) {
      // Entries before head are spent only while a flush frames (a write from a promise
      // listener); the queue is given back when that flush ends, so it just grows.
      queue = Arrays.copyOf(queue, size * 2);
    }
    queue[size++] = buf;
    queue[size++] = promise;
    pendingBytes += buf.readableBytes();
  }

  /** Room for four writes at first. */
  private static final int INITIAL_QUEUE = 8;
  /** The largest queue array a thread keeps as its spare (1024 writes). */
  private static final int MAX_SPARE = 2048;
  /**
   * Per thread: one empty queue array, lent to the encoder that writes first and given back by it
   * when a flush has framed everything. A connection of the event loop usually writes and
   * flushes in one task, so the loop's connections share one array and none keeps one between
   * flushes; an encoder that finds it lent out makes its own. (A queue made per flush would grow
   * again on every flush of many writes.)
   */
  private static final FastThreadLocal<Object[][]> SPARE =
      new FastThreadLocal<>() {
        @Override
        protected Object[][] initialValue() {
          return new Object[1][];
        }
      };

  /** @return an empty array for the queue: the thread's spare if it has one */
  private static Object[] takeSpare() {
    Object[][] spare = SPARE.get();
    Object[] array = spare[0];
    if (array == null) {
      return new Object[INITIAL_QUEUE];
    }
    spare[0] = null;
    return array;
  }

  /** Gives the empty {@code array} to the thread as its spare, if larger than the one kept. */
  private static void giveSpare(Object[] array) {
    Object[][] spare = SPARE.get();
    if (array.length <= MAX_SPARE && (spare[0] == null || spare[0].length < array.length)) {
      spare[0] = array;
    }
  }

  /**
   * The pending buffer at entry {@code i} (an even index).
   *
   * @return borrowed: the queue still owns it
   */
  private ByteBuf bufferAt(int i) {
    return (ByteBuf) queue[i];
  }

  /**
   * Seals everything queued into frames, writes them and flushes. A fatal error fails what is
   * still queued, is fired, and closes the channel.
   */
  void flush(ChannelHandlerContext ctx) {
    if (queue == null) {
      ctx.flush();
      return;
    }
    try {
      if (pendingBytes == 0) {
        takeEmptyHeads();
        writeFrame(ctx, Unpooled.EMPTY_BUFFER);
      }
      while (pendingBytes > 0) {
        sealFrame(ctx, (int) Math.min(maxPayload, pendingBytes));
      }
      // A write that failed at once may have closed the channel, which failed what was pending
      // and dropped the queue.
      if (queue != null && head == size) {
        giveSpare(queue);
        queue = null;
        head = done = size = 0;
      }
    } catch (AltsRecordException e) {
      // The records sealed before the failure are good: send them, then end the connection.
      failure = e;
      failPending(e);
      ctx.flush();
      ctx.fireExceptionCaught(e);
      ctx.close();
      return;
    }
    ctx.flush();
  }

  /** Seals the next {@code payload} pending bytes into one frame and writes it. */
  private void sealFrame(ChannelHandlerContext ctx, int payload) {
    byte[] nonce = cipher.current();
    int frameBytes = payload + AltsFrames.OVERHEAD_BYTES;
    ByteBuf first = bufferAt(done);
    boolean straight = first.readableBytes() >= payload && first.nioBufferCount() == 1
        && (first.isDirect() || !cipher.sealsWholeBuffersOnly());
    ByteBuf frame = straight
        ? frameApart(ctx, frameBytes, first)
        : ctx.alloc().directBuffer(frameBytes);
    try {
      frame.writeIntLE(payload + AltsFrames.MIN_LENGTH);
      frame.writeIntLE(AltsFrames.TYPE_RECORD);
      if (straight) {
        // One piece (the common case for large writes): sealed straight from the caller's buffer.
        // Conscrypt seals heap bytes only through its slow JCA path, so a heap piece is gathered.
        cipher.seal(nonce, AltsFrames.view(first, first.readerIndex(), payload),
            AltsFrames.view(frame, 8, payload + AesGcm.TAG_BYTES));
      } else if (cipher.sealsWholeBuffersOnly()) {
        // Several pieces, or a heap one, and a provider that seals only whole direct buffers:
        // gather them into one direct buffer and seal from it.
        sealGathered(ctx, nonce, payload, AltsFrames.view(frame, 8, payload + AesGcm.TAG_BYTES));
      } else {
        int count = gatherViews(payload);
        cipher.seal(nonce, views, count, AltsFrames.view(frame, 8, payload + AesGcm.TAG_BYTES));
      }
      frame.writerIndex(AltsFrames.HEADER_BYTES + payload + AesGcm.TAG_BYTES);
    } catch (GeneralSecurityException | RuntimeException e) {
      frame.release();
      throw e instanceof AltsRecordException
          ? (AltsRecordException) e
          : new AltsRecordException(
              AltsRecordException.Reason.CRYPTO_FAILURE, "record encryption failed: " + e, e);
    } finally {
      if (views != null) {
        Arrays.fill(views, null);
      }
    }
    cipher.increment();
    consume(payload);
    writeFrame(ctx, frame);
  }

  /**
   * A buffer for a frame of {@code frameBytes} that does not end where {@code plaintext}'s
   * readable bytes begin. Conscrypt takes an output that ends at its input's first byte for an
   * overlap and copies the whole input first; pooled buffers of one size class lie side by side,
   * so this happens whenever the caller's buffer follows the frame's in memory.
   *
   * @param plaintext borrowed: only its address is read
   * @return owned by the caller: a direct buffer of at least {@code frameBytes}
   */
  private static ByteBuf frameApart(ChannelHandlerContext ctx, int frameBytes, ByteBuf plaintext) {
    ByteBuf frame = ctx.alloc().directBuffer(frameBytes);
    if (!AltsFrames.endsAt(frame, frameBytes, plaintext)) {
      return frame;
    }
    ByteBuf other = ctx.alloc().directBuffer(frameBytes);
    frame.release();
    return other;
  }

  /**
   * Seals the next {@code payload} pending bytes into {@code out} from one direct buffer they are
   * copied into: the thread's {@link #GATHER} scratch, or for a payload larger than it may grow,
   * a pooled buffer whose bytes start one in (so they never begin where the frame ends, see
   * {@link #frameApart}).
   */
  private void sealGathered(ChannelHandlerContext ctx, byte[] nonce, int payload, ByteBuffer out)
      throws GeneralSecurityException {
    if (payload <= MAX_GATHER_BYTES) {
      ByteBuffer scratch = gatherScratch(payload);
      copyPending(scratch, payload);
      cipher.seal(nonce, scratch.flip(), out);
      return;
    }
    ByteBuf whole = ctx.alloc().directBuffer(payload + 1);
    try {
      ByteBuffer view = AltsFrames.view(whole, 1, payload);
      copyPending(view, payload);
      cipher.seal(nonce, view.position(view.position() - payload), out);
    } finally {
      whole.release();
    }
  }

  /** The scratch's first size: a record of ALTS's default frame size. */
  private static final int MIN_GATHER_BYTES = 16 * 1024;
  /** The largest gather the thread's scratch takes: a record of grpc-java's preferred size. */
  private static final int MAX_GATHER_BYTES = 128 * 1024;

  /**
   * Per thread: the direct buffer plaintexts are gathered into. Reused, so each gather copies
   * into memory the CPU's cache holds and takes no pooled buffer; it belongs to the thread (the
   * event loop), not to a connection, and grows to the largest gather, at most {@link
   * #MAX_GATHER_BYTES}. A JDK buffer, freed with the thread.
   */
  private static final FastThreadLocal<ByteBuffer[]> GATHER =
      new FastThreadLocal<>() {
        @Override
        protected ByteBuffer[] initialValue() {
          return new ByteBuffer[1];
        }
      };

  /** This thread's gather scratch, cleared, with room for {@code payload} bytes. */
  private static ByteBuffer gatherScratch(int payload) {
    ByteBuffer[] slot = GATHER.get();
    ByteBuffer scratch = slot[0];
    if (scratch == null || scratch.capacity() < payload) {
      scratch = ByteBuffer.allocateDirect(Math.max(payload, MIN_GATHER_BYTES));
      slot[0] = scratch;
    }
    return scratch.clear();
  }

  /**
   * Copies the next {@code payload} pending bytes into {@code into} from its position on,
   * advancing its position and leaving every reader index as it is.
   */
  private void copyPending(ByteBuffer into, int payload) {
    int left = payload;
    int end = into.position() + payload;
    for (int i = done; i < size && left > 0; i += 2) {
      ByteBuf buf = bufferAt(i);
      int n = Math.min(left, buf.readableBytes());
      buf.getBytes(buf.readerIndex(), into.limit(into.position() + n));
      left -= n;
    }
    into.limit(end);
  }

  /** Fills {@link #views} with NIO views of the next {@code payload} pending bytes. */
  private int gatherViews(int payload) {
    int count = 0;
    int left = payload;
    for (int i = done; i < size && left > 0; i += 2) {
      ByteBuf buf = bufferAt(i);
      int n = Math.min(left, buf.readableBytes());
      if (n == 0) {
        continue;
      }
      int index = buf.readerIndex();
      if (buf.nioBufferCount() == 1) {
        count = addView(count, buf.internalNioBuffer(index, n));
      } else {
        for (ByteBuffer b : buf.nioBuffers(index, n)) {
          count = addView(count, b);
        }
      }
      left -= n;
    }
    return count;
  }

  private int addView(int count, ByteBuffer view) {
    if (views == null) {
      views = new ByteBuffer[4];
    } else if (count == views.length) {
      views = Arrays.copyOf(views, count * 2);
    }
    views[count] = view;
    return count + 1;
  }

  /**
   * Advances past {@code payload} sealed bytes: releases each buffer that is used up, its promise
   * now waiting for the frame; empty buffers right after it go with it.
   */
  private void consume(int payload) {
    int left = payload;
    while (done < size) {
      ByteBuf first = bufferAt(done);
      int n = Math.min(left, first.readableBytes());
      first.skipBytes(n);
      left -= n;
      pendingBytes -= n;
      if (first.isReadable()) {
        return;
      }
      takeHead();
      if (left == 0 && done < size && bufferAt(done).isReadable()) {
        return;
      }
    }
  }

  /** Moves leading empty buffers into the frame being built. */
  private void takeEmptyHeads() {
    while (done < size && !bufferAt(done).isReadable()) {
      takeHead();
    }
  }

  /** Releases the first pending buffer; its promise now waits for the frame being built. */
  private void takeHead() {
    bufferAt(done).release();
    queue[done] = null;
    done += 2;
  }

  /**
   * Writes {@code frame} with the promises of the writes that end in it, then forgets them.
   *
   * @param frame owned: handed to the next handler
   */
  private void writeFrame(ChannelHandlerContext ctx, ByteBuf frame) {
    int ending = (done - head) / 2;
    switch (ending) {
      case 0:
        // A frame in the middle of a large write: nobody waits on it, and a failure of it also
        // fails the frame that ends the write. (A void promise would fire a second exception.)
        ctx.write(frame, ctx.newPromise());
        break;
      case 1:
        ctx.write(frame, (ChannelPromise) queue[head + 1]);
        break;
      default:
        ChannelPromise[] promises = new ChannelPromise[ending];
        for (int i = 0; i < ending; i++) {
          promises[i] = (ChannelPromise) queue[head + 1 + 2 * i];
        }
        ChannelPromise all = ctx.newPromise();
        all.addListener(new PromiseNotifier<>(promises));
        ctx.write(frame, all);
        break;
    }
    if (queue != null) { // null if the write closed the channel and failed what was pending
      Arrays.fill(queue, head, done, null);
      head = done;
    }
  }

  private void failPending(Throwable cause) {
    if (queue == null) {
      return;
    }
    // Taken first: a promise's listener may write again, into a queue of its own.
    Object[] failed = queue;
    int from = head;
    int sealed = done;
    int to = size;
    queue = null;
    head = done = size = 0;
    pendingBytes = 0;
    for (int i = from; i < to; i += 2) {
      if (i >= sealed) {
        ((ByteBuf) failed[i]).release();
      }
      ((ChannelPromise) failed[i + 1]).tryFailure(cause);
    }
  }

  /** The channel is closing: fails the writes not yet sealed. */
  void close() {
    failPending(new ClosedChannelException());
  }

  /** Fails the writes not yet sealed and destroys the key: the sealer is not used again. */
  void release() {
    failPending(new ClosedChannelException());
    cipher.destroy();
  }

  /** Slots of the queue of unframed writes: 0 when it holds none. */
  int queueSlots() {
    return queue == null ? 0 : queue.length;
  }

  /** The counter of the next record, for tests that start near overflow. */
  AltsCounter counter() {
    return cipher;
  }
}
