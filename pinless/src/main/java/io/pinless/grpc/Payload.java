package io.pinless.grpc;

import static java.util.Objects.requireNonNull;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakDetectorFactory;
import io.netty.util.ResourceLeakTracker;
import java.io.InputStream;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The raw bytes of one gRPC message, sent or received with {@link PayloadMarshaller}.
 *
 * <p>Ownership: a payload received on the zero-copy path ({@link #isZeroCopy()}) owns the buffers
 * it arrived in until {@link #close()}. Its {@link #buffers()} are views of them and must not be
 * read after the close. A payload made with {@link #of} or {@link #wrap} for sending, or received
 * by copying, owns nothing, and its close only marks it closed. Closing twice throws
 * {@link IllegalStateException}.
 *
 * <p>Sending: gRPC serializes a payload once per attempt of its call, and a retry does so after
 * {@code sendMessage} returned. A payload may be closed once {@code sendMessage} returned: a retry
 * then sends a heap copy of a zero-copy payload, made at the close, or reads again the buffers
 * of one made for sending, which must not change until the call closes. With
 * {@link PayloadMarshaller#keepSentUntilClose()} on the channel the close makes no copy: the
 * buffers are freed at the later of the close and the call's close. A payload closed before its
 * first send is never sent: the marshaller refuses it.
 *
 * <p>Memory: a received zero-copy payload holds its message's buffers (on pinless connections
 * pooled direct buffers) until closed, and while gRPC serializes it. One never closed is reported
 * by Netty's leak detector and, once garbage-collected, logged and counted in
 * {@link io.pinless.PinlessMetrics}. Its buffers are then never freed, since a view taken from it
 * may outlive it.
 *
 * <p>Thread safety: every method may be called from any thread.
 */
public final class Payload implements AutoCloseable {
  private static final ResourceLeakDetector<Payload> LEAKS =
      ResourceLeakDetectorFactory.instance().newResourceLeakDetector(Payload.class);
  /** The zero-copy payloads not closed yet, weakly, with what each holds. */
  private static final Set<Unclosed> UNCLOSED = ConcurrentHashMap.newKeySet();
  /** Where the references of payloads collected unclosed arrive. */
  private static final ReferenceQueue<Payload> COLLECTED = new ReferenceQueue<>();

  /** The bytes, each buffer from position to limit; never handed out, only duplicates. */
  private final List<ByteBuffer> buffers;
  /** Bytes over all buffers. */
  private final long size;
  /** Frees the received buffers on close; null when the payload owns none. */
  private final Unclosed unclosed;
  /** Reports the payload if collected unclosed; null when it owns nothing or was not sampled. */
  private final ResourceLeakTracker<Payload> leak;
  /** Set by the first close. */
  private final AtomicBoolean closed = new AtomicBoolean();
  /** Set by the first send of a payload that owns no received buffers. */
  private volatile boolean sent;

  private Payload(List<ByteBuffer> buffers, ReceivedBuffers received) {
    this.buffers = buffers;
    long n = 0;
    for (ByteBuffer b : buffers) {
      n += b.remaining();
    }
    this.size = n;
    if (received == null) {
      this.unclosed = null;
      this.leak = null;
    } else {
      purge();
      this.unclosed = new Unclosed(this, received);
      UNCLOSED.add(unclosed);
      this.leak = LEAKS.track(this);
    }
  }

  /**
   * A payload of the bytes of {@code buffers}, each from its position to its limit, for sending.
   * Borrowed: the buffers are neither copied nor released; they must not change until the calls
   * that send it close.
   */
  public static Payload of(ByteBuffer... buffers) {
    List<ByteBuffer> views = new ArrayList<>(buffers.length);
    for (ByteBuffer b : buffers) {
      views.add(requireNonNull(b, "buffer").duplicate());
    }
    return new Payload(Collections.unmodifiableList(views), null);
  }

  /**
   * A payload of {@code bytes}, for sending; the array is not copied and must not change until
   * the calls that send it close.
   */
  public static Payload wrap(byte[] bytes) {
    return of(ByteBuffer.wrap(bytes));
  }

  /** A received payload that owns {@code received}: released by {@link #close()}. */
  static Payload received(ReceivedBuffers received) {
    List<ByteBuffer> views = new ArrayList<>(received.pieces().size());
    for (ByteBuffer piece : received.pieces()) {
      views.add(piece.duplicate());
    }
    return new Payload(Collections.unmodifiableList(views), received);
  }

  /**
   * The bytes, as read-only buffers in order, each from its position to its limit. Each call gives
   * fresh duplicates. Borrowed: views of the received buffers for a zero-copy payload, valid
   * until {@link #close()}. Throws {@link IllegalStateException} once closed.
   */
  public List<ByteBuffer> buffers() {
    checkOpen();
    List<ByteBuffer> views = new ArrayList<>(buffers.size());
    for (ByteBuffer b : buffers) {
      views.add(b.asReadOnlyBuffer());
    }
    return Collections.unmodifiableList(views);
  }

  /**
   * The bytes for one send, in a stream gRPC closes after reading it. A zero-copy payload keeps
   * its received buffers until that close, even if closed meanwhile. Throws
   * {@link io.grpc.StatusRuntimeException} with {@link Status#FAILED_PRECONDITION} for a payload
   * closed before its first send. One closed after a send (a retry of its call) is sent again:
   * from the caller's own buffers, or from the copy a zero-copy payload's close made.
   */
  InputStream sendingStream() {
    if (unclosed == null) {
      if (closed.get() && !sent) {
        throw closedBeforeSent();
      }
      sent = true;
      return new BufferStream(duplicates(), size, null);
    }
    ReceivedBuffers received = unclosed.received;
    if (received.holdForSending()) {
      return new BufferStream(duplicates(), size, received);
    }
    byte[] spare = received.spare();
    if (spare == null) {
      throw closedBeforeSent();
    }
    return BufferStream.of(spare);
  }

  private StatusRuntimeException closedBeforeSent() {
    return Status.FAILED_PRECONDITION
        .withDescription(
            "payload of " + size + " bytes closed before gRPC serialized it; close a payload"
                + " after sending it, not before")
        .asRuntimeException();
  }

  /** The received buffers this payload owns, or null when it owns none. */
  ReceivedBuffers received() {
    return unclosed == null ? null : unclosed.received;
  }

  /**
   * Writable duplicates of the buffers, for the marshaller to send from arrays directly. Borrowed:
   * valid while the payload is open or a {@linkplain #holdForSending hold} is kept.
   */
  List<ByteBuffer> duplicates() {
    List<ByteBuffer> copies = new ArrayList<>(buffers.size());
    for (ByteBuffer b : buffers) {
      copies.add(b.duplicate());
    }
    return copies;
  }

  private void checkOpen() {
    if (closed.get()) {
      throw new IllegalStateException("payload of " + size + " bytes is closed");
    }
  }

  /** The number of bytes. */
  public long size() {
    return size;
  }

  /** Whether the buffers are views of received buffers that are not closed yet. */
  public boolean isZeroCopy() {
    return unclosed != null && !closed.get();
  }

  /**
   * Releases the received buffers of a zero-copy payload; marks any other payload closed. Throws
   * {@link IllegalStateException} when closed already.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      throw new IllegalStateException("payload of " + size + " bytes closed twice");
    }
    if (unclosed != null) {
      UNCLOSED.remove(unclosed);
      unclosed.received.release();
      if (leak != null) {
        leak.close(this);
      }
    }
  }

  /**
   * Forgets payloads collected without a close. Their buffers are kept for good: a buffer taken
   * from {@link #buffers()} may outlive the payload.
   */
  private static void purge() {
    Reference<? extends Payload> ref;
    while ((ref = COLLECTED.poll()) != null) {
      Unclosed u = (Unclosed) ref;
      if (UNCLOSED.remove(u)) {
        u.received.abandon("a zero-copy Payload");
      }
    }
  }

  /** A weak reference to a payload that holds what the payload owns, for when it is collected. */
  private static final class Unclosed extends WeakReference<Payload> {
    /** The payload's received buffers. */
    final ReceivedBuffers received;

    Unclosed(Payload payload, ReceivedBuffers received) {
      super(payload, COLLECTED);
      this.received = received;
    }
  }
}
