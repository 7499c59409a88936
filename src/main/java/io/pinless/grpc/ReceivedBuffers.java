package io.pinless.grpc;

import io.grpc.Detachable;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The buffers of one received gRPC message, detached from the stream gRPC hands a marshaller so
 * that they outlive {@code parse}. gRPC closes its stream after {@code parse} returns. The
 * detached stream it leaves behind owns every piece of the message, and this class owns the
 * detached stream.
 *
 * <p>Ownership: the pieces belong to the detached stream until {@link #release()} closes it,
 * exactly once. The {@link ByteBuffer} views of {@link #pieces()} are valid until then. After it
 * the memory behind them goes back to its pool and may hold another message.
 *
 * <p>Memory: holds the whole message (on pinless connections, pooled direct buffers) plus the
 * list of views, until released.
 */
final class ReceivedBuffers {
  /** Owns the pieces; closing it releases them. Read position at the start of the message. */
  private final InputStream detached;
  /** Views of the pieces in message order, each from its first to its last message byte. */
  private final List<ByteBuffer> pieces;
  /** Message bytes over all pieces. */
  private final int size;
  /** Set by the first release. */
  private final AtomicBoolean released = new AtomicBoolean();

  private ReceivedBuffers(InputStream detached, List<ByteBuffer> pieces, int size) {
    this.detached = detached;
    this.pieces = pieces;
    this.size = size;
  }

  /**
   * Whether the message in {@code stream} can be detached and read piece by piece: the stream is
   * {@link KnownLength}, {@link HasByteBuffer} and {@link Detachable}, and every piece offers an
   * NIO buffer.
   */
  static boolean detachable(InputStream stream) {
    return stream instanceof KnownLength
        && stream instanceof Detachable
        && stream instanceof HasByteBuffer
        && ((HasByteBuffer) stream).byteBufferSupported()
        && stream.markSupported();
  }

  /**
   * Detaches the message of {@code stream}, which {@link #detachable} accepted, and collects views
   * of its pieces. Returns null, with nothing detached, for an empty message. Throws
   * {@link IllegalStateException} when the detached stream does not give its pieces as
   * {@code stream} promised; the detached stream is closed then.
   */
  static ReceivedBuffers detach(InputStream stream) throws IOException {
    int size = stream.available();
    if (size == 0) {
      return null;
    }
    InputStream detached = ((Detachable) stream).detach();
    try {
      return new ReceivedBuffers(detached, collect(detached, size), size);
    } catch (IOException | RuntimeException | Error e) {
      closeSuppressing(detached, e);
      throw e;
    }
  }

  /** Reads the pieces of {@code in}: marks, takes each piece's buffer and skips it, resets. */
  private static List<ByteBuffer> collect(InputStream in, int size) throws IOException {
    if (!(in instanceof HasByteBuffer) || !in.markSupported()) {
      throw new IllegalStateException(
          "detached stream " + in.getClass().getName() + " offers no buffers to mark");
    }
    HasByteBuffer buffers = (HasByteBuffer) in;
    // The mark keeps the pieces skipped over: without it a composite closes each one passed.
    in.mark(size);
    List<ByteBuffer> pieces = new ArrayList<>();
    int left = size;
    while (left > 0) {
      ByteBuffer piece = buffers.getByteBuffer();
      if (piece == null || !piece.hasRemaining()) {
        throw new IllegalStateException(
            "detached stream gave no buffer with " + left + " of " + size + " bytes left");
      }
      int n = Math.min(piece.remaining(), left);
      ByteBuffer view = piece.duplicate();
      view.limit(view.position() + n);
      pieces.add(view.slice());
      long skipped = in.skip(n);
      if (skipped != n) {
        throw new IllegalStateException("skipped " + skipped + " of a " + n + "-byte piece");
      }
      left -= n;
    }
    in.reset();
    return Collections.unmodifiableList(pieces);
  }

  /** Views of the message's pieces, in order; valid until {@link #release()}. */
  List<ByteBuffer> pieces() {
    return pieces;
  }

  /** Message bytes. */
  int size() {
    return size;
  }

  /** Whether {@link #release()} has not run yet. */
  boolean held() {
    return !released.get();
  }

  /**
   * Closes the detached stream, which releases every piece. Returns false, doing nothing, when
   * already released.
   */
  boolean release() {
    if (!released.compareAndSet(false, true)) {
      return false;
    }
    try {
      detached.close();
    } catch (IOException e) {
      throw new UncheckedIOException("closing the detached message stream", e);
    }
    return true;
  }

  private static void closeSuppressing(InputStream in, Throwable failure) {
    try {
      in.close();
    } catch (IOException | RuntimeException e) {
      failure.addSuppressed(e);
    }
  }
}
