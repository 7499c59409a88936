package io.pinless.grpc;

import io.grpc.HasByteBuffer;
import io.grpc.internal.AbstractReadableBuffer;
import io.grpc.internal.CompositeReadableBuffer;
import io.grpc.internal.ReadableBuffer;
import io.grpc.internal.ReadableBuffers;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Message streams as gRPC's deframer opens them, over buffers a test allocates: each piece is a
 * {@link ReadableBuffer} over a {@link ByteBuf}, as grpc-netty's {@code NettyReadableBuffer} is,
 * joined in grpc-core's {@link CompositeReadableBuffer} and opened with
 * {@link ReadableBuffers#openStream}. The stream is {@code KnownLength}, {@code HasByteBuffer}
 * and {@code Detachable}.
 */
final class PieceStreams {
  /**
   * Whether the grpc-core in use joins a run of pieces under 1 KiB into a heap array when a larger
   * piece follows (1.84 on; 1.76 keeps every piece): found by composing two such and a larger.
   */
  static final boolean GRPC_JOINS_SMALL_PIECES = joinsSmallPieces();

  private PieceStreams() {}

  private static boolean joinsSmallPieces() {
    try (InputStream probe = open(direct(new byte[1026], 1, 2))) {
      return !((HasByteBuffer) probe).byteBufferSupported();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Pooled direct buffers holding {@code bytes} cut at {@code cuts}; caller must release. */
  static List<ByteBuf> direct(byte[] bytes, int... cuts) {
    return cut(PooledByteBufAllocator.DEFAULT, true, bytes, cuts);
  }

  /** Pooled heap buffers holding {@code bytes} cut at {@code cuts}; caller must release. */
  static List<ByteBuf> heap(byte[] bytes, int... cuts) {
    return cut(PooledByteBufAllocator.DEFAULT, false, bytes, cuts);
  }

  private static List<ByteBuf> cut(
      ByteBufAllocator alloc, boolean direct, byte[] bytes, int... cuts) {
    List<ByteBuf> pieces = new ArrayList<>();
    int start = 0;
    for (int i = 0; i <= cuts.length; i++) {
      int end = i < cuts.length ? cuts[i] : bytes.length;
      ByteBuf b = direct ? alloc.directBuffer(end - start) : alloc.heapBuffer(end - start);
      pieces.add(b.writeBytes(bytes, start, end - start));
      start = end;
    }
    return pieces;
  }

  /**
   * A stream over {@code pieces} whose pieces offer NIO buffers. Owned: each piece gets one
   * reference released when the stream, or the stream detached from it, is closed; retain before
   * to keep the buffers.
   */
  static InputStream open(List<ByteBuf> pieces) {
    return open(pieces, true);
  }

  /** Like {@link #open(List)}, with pieces that offer NIO buffers or not. Owned, as there. */
  static InputStream open(List<ByteBuf> pieces, boolean byteBuffers) {
    CompositeReadableBuffer composite = new CompositeReadableBuffer();
    for (ByteBuf b : pieces) {
      composite.addBuffer(new Piece(b, byteBuffers));
    }
    return ReadableBuffers.openStream(composite, true);
  }

  /**
   * Like {@link #open(List)}, piece {@code i} offering an NIO buffer when {@code byteBuffers[i]}.
   * Owned, as there.
   */
  static InputStream open(List<ByteBuf> pieces, boolean[] byteBuffers) {
    CompositeReadableBuffer composite = new CompositeReadableBuffer();
    for (int i = 0; i < pieces.size(); i++) {
      composite.addBuffer(new Piece(pieces.get(i), byteBuffers[i]));
    }
    return ReadableBuffers.openStream(composite, true);
  }

  /**
   * A stream over {@code head}, pieces that offer NIO buffers or not, then {@code tail}, which
   * does. Owned, as {@link #open(List)}.
   */
  static InputStream open(List<ByteBuf> head, boolean byteBuffers, ByteBuf tail) {
    CompositeReadableBuffer composite = new CompositeReadableBuffer();
    for (ByteBuf b : head) {
      composite.addBuffer(new Piece(b, byteBuffers));
    }
    composite.addBuffer(new Piece(tail, true));
    return ReadableBuffers.openStream(composite, true);
  }

  /**
   * Collects garbage until {@code ref} is cleared: the object it referred to is unreachable and
   * collected. Waits on collection events; the bound of 600 rounds is a hang guard only.
   */
  static void awaitCollected(Reference<?> ref) throws InterruptedException {
    for (int round = 0; ref.get() != null; round++) {
      if (round == 600) {
        throw new AssertionError("never collected: " + ref.get());
      }
      ReferenceQueue<Object> queue = new ReferenceQueue<>();
      WeakReference<Object> sentinel = new WeakReference<>(new Object(), queue);
      System.gc();
      queue.remove(100);
      sentinel.clear();
    }
  }

  /**
   * Allocates {@code count} pooled direct buffers of each of {@code sizes}, filled with
   * {@code fill}, as other messages reusing freed memory would. Caller must release them.
   */
  static List<ByteBuf> churn(byte fill, int count, int... sizes) {
    List<ByteBuf> taken = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      for (int size : sizes) {
        ByteBuf b = PooledByteBufAllocator.DEFAULT.directBuffer(size);
        while (b.isWritable()) {
          b.writeByte(fill);
        }
        taken.add(b);
      }
    }
    return taken;
  }

  /** Retains every buffer once, for a test to check what a stream released. */
  static List<ByteBuf> retain(List<ByteBuf> pieces) {
    pieces.forEach(ByteBuf::retain);
    return pieces;
  }

  /**
   * Writes over each buffer that only the test still references, as the pool's next user of
   * memory a stream let go of would. Borrowed: nothing is released.
   */
  static void overwrite(List<ByteBuf> pieces) {
    for (ByteBuf piece : pieces) {
      if (piece.refCnt() == 1) {
        byte[] other = new byte[piece.readableBytes()];
        Arrays.fill(other, (byte) 0x5a);
        piece.setBytes(piece.readerIndex(), other);
      }
    }
  }

  /**
   * Runs {@code probe} (a parse, which forgets collected messages) until the process counts at
   * least {@code bytes} more kept unreleased than {@code keptBefore}. The collector enqueues a
   * collected message's reference on its own thread, after the referent is cleared, so one probe
   * may come too early. Fails after a minute of probes.
   */
  static void probeUntilKept(long keptBefore, long bytes, Runnable probe) {
    long guard = System.nanoTime() + java.util.concurrent.TimeUnit.MINUTES.toNanos(1);
    do {
      probe.run();
      if (io.pinless.PinlessMetrics.Metric.UNRELEASED_BYTES_KEPT.value() - keptBefore >= bytes) {
        return;
      }
      Thread.yield();
    } while (System.nanoTime() < guard);
    throw new AssertionError("the collected message's " + bytes + " bytes were never counted kept");
  }

  /** Releases every buffer once. */
  static void release(List<ByteBuf> pieces) {
    pieces.forEach(ByteBuf::release);
  }

  /** One piece of a message over a buffer it owns one reference of. */
  private static final class Piece extends AbstractReadableBuffer {
    /** Owned: released once by {@link #close()}. */
    private final ByteBuf buf;
    /** Whether {@link #getByteBuffer()} is offered. */
    private final boolean byteBuffers;
    private boolean closed;

    Piece(ByteBuf buf, boolean byteBuffers) {
      this.buf = buf;
      this.byteBuffers = byteBuffers;
    }

    @Override
    public int readableBytes() {
      return buf.readableBytes();
    }

    @Override
    public int readUnsignedByte() {
      return buf.readUnsignedByte();
    }

    @Override
    public void skipBytes(int length) {
      buf.skipBytes(length);
    }

    @Override
    public void readBytes(byte[] dest, int destOffset, int length) {
      buf.readBytes(dest, destOffset, length);
    }

    @Override
    public void readBytes(OutputStream dest, int length) throws IOException {
      buf.readBytes(dest, length);
    }

    /** grpc-java 1.76's {@code ReadableBuffer} declares it; 1.85's does not. */
    public void readBytes(ByteBuffer dest) {
      buf.readBytes(dest);
    }

    @Override
    public ReadableBuffer readBytes(int length) {
      return new Piece(buf.readRetainedSlice(length), byteBuffers);
    }

    @Override
    public boolean markSupported() {
      return true;
    }

    @Override
    public void mark() {
      buf.markReaderIndex();
    }

    @Override
    public void reset() {
      buf.resetReaderIndex();
    }

    @Override
    public boolean byteBufferSupported() {
      return byteBuffers && buf.nioBufferCount() > 0;
    }

    @Override
    public ByteBuffer getByteBuffer() {
      if (!byteBufferSupported()) {
        throw new UnsupportedOperationException("as grpc-core's buffers without NIO buffers");
      }
      return buf.nioBuffer();
    }

    @Override
    public void close() {
      if (!closed) {
        closed = true;
        buf.release();
      }
    }
  }
}
