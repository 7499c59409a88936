package io.pinless.grpc;

import io.grpc.Detachable;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import io.netty.buffer.ByteBuf;
import io.pinless.PinlessMetrics.Metric;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Logger;

/**
 * The buffers of one received gRPC message, detached from the stream gRPC hands a marshaller so
 * that they outlive {@code parse}. gRPC closes its stream after {@code parse} returns. The
 * detached stream it leaves behind owns every piece of the message, and this class owns the
 * detached stream.
 *
 * <p>Ownership: the pieces belong to the detached stream, and this class closes it once the last
 * hold is dropped. The owner's {@link #release()} drops the first hold. A sender reading the
 * bytes takes one more with {@link #holdForSending()} and drops it with {@link #unhold()}, so a
 * release that races a send frees nothing under it. gRPC reads a sent message again for each
 * retry of its call, after {@code sendMessage} returned: a call that keeps the message takes a
 * {@link #holdForCall()} until it closes, and a message sent with none is copied to a heap
 * {@link #spare()} when freed, for such a retry to read instead. The {@link ByteBuffer} views of
 * {@link #pieces()} are valid while any hold is left. After that the memory behind them goes back
 * to its pool and may hold another message. An {@linkplain #attach attached} buffer is freed with
 * the pieces.
 *
 * <p>gRPC copies runs of small pieces into heap arrays that offer no NIO buffer (grpc-core's
 * {@code CompositeReadableBuffer}). Such parts are read into heap arrays of their own, copied and
 * counted ({@link #copiedBytes()}), and the rest is still collected as views; a message with more
 * than 1/{@value #COPIED_SHARE} of its bytes in such parts is not worth aliasing ({@link
 * #aliasable()} is false) and is read whole from {@link #stream()}.
 *
 * <p>Memory: holds the whole message (on pinless connections, pooled direct buffers) plus the
 * list of views, until the owner released and no sender reads them; then, for a message sent
 * with no call keeping it, a heap copy of it until this object is collected.
 */
final class ReceivedBuffers {
  /** A message with more than 1/this of its bytes in parts without NIO buffers is copied whole. */
  static final int COPIED_SHARE = 8;
  /** The first read of a part without NIO buffers; each further one doubles, up to 64 KiB. */
  private static final int FIRST_COPY_BYTES = 256;
  private static final int LARGEST_COPY_BYTES = 65536;
  /**
   * Empty pieces stepped over in one message before the stream counts as stuck: far above the
   * empty DATA frames Netty lets a peer send in a row.
   */
  private static final int MAX_EMPTY_PIECES = 1 << 16;
  private static final Logger LOG = Logger.getLogger(ReceivedBuffers.class.getName());
  /** Set once the first abandoned message is logged. */
  private static final AtomicBoolean ABANDON_LOGGED = new AtomicBoolean();

  /** Owns the pieces; closing it releases them. Read position at the start of the message. */
  private final InputStream detached;
  /**
   * Views of the pieces in message order, each from its first to its last message byte; heap
   * copies for parts without NIO buffers. Null when the message is not {@linkplain #aliasable}.
   */
  private final List<ByteBuffer> pieces;
  /** Message bytes over all pieces. */
  private final int size;
  /** Message bytes read into heap copies: those of parts without NIO buffers. */
  private int copied;
  /** Set by the owner's first release. */
  private final AtomicBoolean released = new AtomicBoolean();
  /**
   * Holds on the pieces: the owner's until it releases, plus one per reading sender and per call
   * keeping the message. Guarded by this; the pieces are freed when it reaches 0.
   */
  private int holds = 1;
  /** Whether a sender read the message; guarded by this. */
  private boolean sent;
  /** Whether a call kept the message for its retries; guarded by this. */
  private boolean keptByCall;
  /** The message's bytes kept past the free for a retry; guarded by this. */
  private byte[] spare;
  /** Freed with the pieces, or null; owned. */
  private volatile ByteBuf attached;

  private ReceivedBuffers(InputStream detached, int size) throws IOException {
    this.detached = detached;
    this.size = size;
    this.pieces = collect();
  }

  /**
   * Whether the message in {@code stream} can be detached and read piece by piece: the stream is
   * {@link KnownLength}, {@link HasByteBuffer}, {@link Detachable} and can be marked.
   */
  static boolean detachable(InputStream stream) {
    return stream instanceof KnownLength
        && stream instanceof Detachable
        && stream instanceof HasByteBuffer
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
      return new ReceivedBuffers(detached, size);
    } catch (IOException | RuntimeException | Error e) {
      closeSuppressing(detached, e);
      throw e;
    }
  }

  /**
   * Reads the pieces of the detached stream: marks, takes each piece's buffer and skips it (or
   * reads a part without one into heap arrays), resets. Null once too much is copied.
   */
  private List<ByteBuffer> collect() throws IOException {
    InputStream in = detached;
    if (!(in instanceof HasByteBuffer) || !in.markSupported()) {
      throw new IllegalStateException(
          "detached stream " + in.getClass().getName() + " offers no buffers to mark");
    }
    HasByteBuffer buffers = (HasByteBuffer) in;
    // The mark keeps the pieces skipped over: without it a composite closes each one passed.
    in.mark(size);
    List<ByteBuffer> views = new ArrayList<>();
    int left = size;
    int copyBytes = FIRST_COPY_BYTES;
    int emptyPieces = 0;
    while (left > 0) {
      ByteBuffer piece;
      try {
        piece = buffers.getByteBuffer();
      } catch (UnsupportedOperationException e) {
        // A part without an NIO buffer, of unknown length: read in doubling steps until the
        // next piece offers one (the last step may copy the head of that piece too).
        int n = Math.min(copyBytes, left);
        views.add(ByteBuffer.wrap(in.readNBytes(n)));
        copied += n;
        left -= n;
        if ((long) copied * COPIED_SHARE > size) {
          in.reset();
          return null;
        }
        copyBytes = Math.min(2 * copyBytes, LARGEST_COPY_BYTES);
        continue;
      }
      copyBytes = FIRST_COPY_BYTES;
      if (piece != null && !piece.hasRemaining() && emptyPieces++ < MAX_EMPTY_PIECES) {
        // An empty piece (a peer's empty DATA frame): a skip of nothing steps over it.
        in.skip(0);
        continue;
      }
      if (piece == null || !piece.hasRemaining()) {
        throw new IllegalStateException(
            "detached stream gave no buffer with " + left + " of " + size + " bytes left");
      }
      int n = Math.min(piece.remaining(), left);
      ByteBuffer view = piece.duplicate();
      view.limit(view.position() + n);
      views.add(view.slice());
      long skipped = in.skip(n);
      if (skipped != n) {
        throw new IllegalStateException("skipped " + skipped + " of a " + n + "-byte piece");
      }
      left -= n;
    }
    in.reset();
    return Collections.unmodifiableList(views);
  }

  /**
   * Whether the message is read from {@link #pieces()}: false when more than
   * 1/{@value #COPIED_SHARE} of it came without NIO buffers; read it from {@link #stream()} then.
   */
  boolean aliasable() {
    return pieces != null;
  }

  /** Bytes of the message in parts without NIO buffers, read into heap copies. */
  int copiedBytes() {
    return pieces == null ? size : copied;
  }

  /** The detached stream, at the start of the message; valid until {@link #release()}. */
  InputStream stream() {
    return detached;
  }

  /**
   * Views of the message's pieces, in order, valid until {@link #release()}; null when not
   * {@link #aliasable()}.
   */
  List<ByteBuffer> pieces() {
    return pieces;
  }

  /** Message bytes. */
  int size() {
    return size;
  }

  /**
   * Makes this own {@code buffer}, freed with the pieces. Owned: released once the last hold is
   * dropped. Called at most once, before the buffers are handed on.
   */
  void attach(ByteBuf buffer) {
    this.attached = buffer;
  }

  /** Whether the owner has not released yet. */
  boolean held() {
    return !released.get();
  }

  /**
   * The owner's release: drops its hold, which frees the pieces unless a sender still reads them.
   * Returns false, doing nothing, when already released.
   */
  boolean release() {
    if (!released.compareAndSet(false, true)) {
      return false;
    }
    unhold();
    return true;
  }

  /**
   * Takes a hold for a sender that reads the pieces, keeping them valid until {@link #unhold()},
   * and marks the message sent. Returns false, taking nothing, once the pieces are freed.
   */
  synchronized boolean holdForSending() {
    if (!take()) {
      return false;
    }
    sent = true;
    return true;
  }

  /**
   * Takes a hold for a call that may send the message again, until {@link #unhold()}: while such
   * a hold is taken the free keeps no {@linkplain #spare spare}. Returns false, taking nothing,
   * once the pieces are freed.
   */
  synchronized boolean holdForCall() {
    if (!take()) {
      return false;
    }
    keptByCall = true;
    return true;
  }

  /** Takes one more hold unless the pieces are freed; the caller holds the lock. */
  private boolean take() {
    if (holds == 0) {
      return false;
    }
    holds++;
    return true;
  }

  /**
   * Drops a hold; the last one closes the detached stream, which releases every piece. A message
   * sent with no call keeping it is first copied to the {@linkplain #spare spare}.
   */
  void unhold() {
    synchronized (this) {
      if (holds == 0) {
        throw new IllegalStateException("hold dropped twice on a " + size + "-byte message");
      }
      if (--holds > 0) {
        return;
      }
      if (sent && !keptByCall && pieces != null) {
        spare = copyPieces();
        Metric.SENT_BYTES_COPIED.add(size);
      }
    }
    ByteBuf buffer = attached;
    try {
      detached.close();
    } catch (IOException e) {
      throw new UncheckedIOException("closing the detached message stream", e);
    } finally {
      if (buffer != null) {
        buffer.release();
      }
    }
  }

  /**
   * The message's bytes, copied at the free of a message that was sent while no call kept it, so
   * that a retry of that call sends them again; null otherwise. Not to be changed.
   */
  synchronized byte[] spare() {
    return spare;
  }

  private byte[] copyPieces() {
    byte[] copy = new byte[size];
    int at = 0;
    for (ByteBuffer piece : pieces) {
      int n = piece.remaining();
      piece.duplicate().get(copy, at, n);
      at += n;
    }
    return copy;
  }

  /**
   * For an owner collected without a release: keeps the pieces for good, since views taken from
   * the owner may still read them. Counts them and logs the first time in the process.
   */
  void abandon(String owner) {
    if (!held()) {
      return;
    }
    ByteBuf buffer = attached;
    long bytes = size + (buffer == null ? 0 : buffer.capacity());
    Metric.UNRELEASED_BYTES_KEPT.add(bytes);
    if (ABANDON_LOGGED.compareAndSet(false, true)) {
      LOG.warning(
          owner + " was garbage-collected unreleased: its " + bytes + " bytes of received"
              + " buffers are kept, never freed, as views of them may still be in use. Release"
              + " every zero-copy message (ZeroCopyMarshaller.release, Payload.close). Counted in"
              + " PinlessMetrics " + Metric.UNRELEASED_BYTES_KEPT.key() + "; logged once.");
    }
  }

  private static void closeSuppressing(InputStream in, Throwable failure) {
    try {
      in.close();
    } catch (IOException | RuntimeException e) {
      failure.addSuppressed(e);
    }
  }
}
