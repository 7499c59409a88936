package io.pinless.grpc;

import static java.util.Objects.requireNonNull;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.ExtensionRegistryLite;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.ClientInterceptor;
import io.grpc.Drainable;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakDetectorFactory;
import io.netty.util.ResourceLeakTracker;
import io.pinless.PinlessMetrics.Metric;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A protobuf marshaller whose received messages alias the buffers they arrived in: a
 * {@code bytes} field comes out as a view of the received memory, not a copy. It replaces
 * {@link ProtoLiteUtils#marshaller} on the receiving side of a method.
 *
 * <pre>
 *   ZeroCopyMarshaller&lt;Chunk&gt; chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
 *   MethodDescriptor&lt;ChunkRequest, Chunk&gt; download =
 *       method.toBuilder().setResponseMarshaller(chunks).build();
 *   ...
 *   try (ZeroCopyMarshaller.Lease lease = chunks.lease(chunk)) {
 *     out.write(chunk.getData().asReadOnlyByteBufferList());
 *   }
 * </pre>
 *
 * <p>Ownership: a message parsed on the zero-copy path owns the buffers of its bytes until
 * {@link #release} (or closing its {@link #lease}). After that its {@code bytes} fields read
 * memory that may hold another message: the application must not touch the message again, nor
 * any {@code ByteString} or buffer taken from it, nor any message built from it (by its builder,
 * or holding it as a field), which holds views of the same buffers. A message never released is
 * reported by Netty's leak detector and, once garbage-collected, logged and counted in
 * {@link io.pinless.PinlessMetrics}. Its buffers are then never freed, since a view taken from it
 * may outlive it.
 *
 * <p>Sending: a zero-copy message may be sent on another call with a {@code ZeroCopyMarshaller}
 * of its type. gRPC serializes it once per attempt, and a retry (transparent, or by a retry
 * policy) serializes it again after {@code sendMessage} returned. A sent message may be released
 * once {@code sendMessage} returned: the release copies it to the heap, and a retry sends that
 * copy. With {@link #keepSentUntilClose()} on the channel the release makes no copy: the buffers
 * are freed at the later of the release and the call's close. That copy is then skipped for every
 * send of the message, so one also sent on a channel without the interceptor is released only
 * once that call closed. A message built from a zero-copy one takes no hold when sent: the
 * received message is released only once that call closed. A message released before its first
 * send is never serialized: {@link #stream} throws {@link io.grpc.StatusRuntimeException} with
 * {@link Status#FAILED_PRECONDITION}, which fails the call.
 *
 * <p>The zero-copy path needs gRPC's message stream to be {@link KnownLength},
 * {@link io.grpc.HasByteBuffer} and {@link io.grpc.Detachable} with its pieces in NIO buffers
 * (uncompressed messages on grpc-netty). grpc-core copies runs of pieces under 1 KiB into heap
 * arrays that offer no NIO buffer: such parts are copied, and the rest aliased, as long as they
 * are at most 1/8 of the message. Otherwise, and for empty messages, it parses by copying as
 * {@link ProtoLiteUtils} does, and the message needs no release. {@link #isZeroCopy} tells the
 * two apart.
 *
 * <pre>
 *   pieces of one message:  [ 16 KiB direct ][ 40 B heap ][ 1 MiB direct ]
 *   parsed from:            [ view         ][ staged copy ][ view        ]
 *                                           (pooled direct)
 * </pre>
 *
 * <p>Pieces under {@value #MIN_ALIASED_PIECE} bytes, heap pieces and parts without NIO buffers
 * are copied into one pooled direct staging buffer: protobuf's decoder aliases only when every
 * piece is direct, and its rope joins pieces under 128 bytes into a heap array. A message with no
 * piece left to alias is parsed by copying.
 *
 * <p>Memory: per unreleased message, its received buffers, the staging buffer if any, and one
 * map entry. A released message keeps a small entry, so that a second release fails, until it is
 * garbage-collected; a message sent and released with no call keeping it keeps its heap copy in
 * that entry. A message being serialized keeps its buffers until gRPC closes the stream
 * {@link #stream} returned, even when released meanwhile.
 *
 * <p>Thread safety: every method may be called from any thread.
 */
public final class ZeroCopyMarshaller<T extends MessageLite>
    implements MethodDescriptor.PrototypeMarshaller<T> {
  /** Smallest piece aliased: protobuf's rope copies joined pieces under 128 bytes to the heap. */
  static final int MIN_ALIASED_PIECE = 128;

  private static final ResourceLeakDetector<Object> LEAKS = leakDetector();
  /**
   * Zero-copy messages not yet collected, released or not, by message identity: shared by every
   * marshaller, so that any of them sends or releases a message another one parsed.
   */
  private static final ConcurrentHashMap<MessageKey, Held> HELD = new ConcurrentHashMap<>();
  /** Where the keys of collected messages arrive. */
  private static final ReferenceQueue<Object> COLLECTED = new ReferenceQueue<>();

  /** The message type's default instance: the prototype and the parse of an empty message. */
  private final T prototype;
  /** Parses the message type. */
  private final Parser<T> parser;
  /** Sends, and parses what cannot be aliased. */
  private final MethodDescriptor.Marshaller<T> copying;

  private ZeroCopyMarshaller(T prototype) {
    this.prototype = prototype;
    @SuppressWarnings("unchecked")
    Parser<T> parser = (Parser<T>) prototype.getParserForType();
    this.parser = parser;
    this.copying = ProtoLiteUtils.marshaller(prototype);
  }

  /** A marshaller for the type of {@code defaultInstance}. */
  public static <T extends MessageLite> ZeroCopyMarshaller<T> of(T defaultInstance) {
    return new ZeroCopyMarshaller<>(requireNonNull(defaultInstance, "defaultInstance"));
  }

  /**
   * Serializes {@code message} for sending, as {@link ProtoLiteUtils#marshaller} does. A zero-copy
   * message keeps its buffers until the stream returned is closed, even if released meanwhile; one
   * released after a send is serialized from the copy its release made. Throws
   * {@link io.grpc.StatusRuntimeException} with {@link Status#FAILED_PRECONDITION} for a message
   * released before its first send: its buffers may hold another message's bytes.
   */
  @Override
  public InputStream stream(T message) {
    requireNonNull(message, "message");
    Held h = HELD.get(new MessageKey(message, null));
    if (h == null) {
      return copying.stream(message);
    }
    if (!h.buffers.holdForSending()) {
      byte[] spare = h.buffers.spare();
      if (spare == null) {
        throw Status.FAILED_PRECONDITION
            .withDescription(
                "zero-copy message of " + message.getClass().getName() + " released before"
                    + " gRPC serialized it; release a message after sending it, not before")
            .asRuntimeException();
      }
      return BufferStream.of(spare);
    }
    try {
      return new HeldStream(copying.stream(message), h.buffers);
    } catch (RuntimeException | Error e) {
      h.buffers.unhold();
      throw e;
    }
  }

  /**
   * A client interceptor that keeps each zero-copy message sent on a call from being freed until
   * the call closes, so that a retry re-sends the same bytes and a release after the send copies
   * nothing. The application's release still counts: the buffers are freed at the later of the
   * release and the call's close.
   */
  public ClientInterceptor keepSentUntilClose() {
    return new SentMessageHolds(
        message -> {
          Held h = HELD.get(new MessageKey(message, null));
          return h == null ? null : h.buffers;
        });
  }

  /**
   * Parses a received message, aliasing its buffers when {@code stream} allows it; such a message
   * must be {@linkplain #release released}. Throws {@link io.grpc.StatusRuntimeException} with
   * {@link Status#INTERNAL} for bytes that are not a valid message; nothing is held then.
   */
  @Override
  public T parse(InputStream stream) {
    purge();
    if (!ReceivedBuffers.detachable(stream)) {
      return parseCopying(stream);
    }
    ReceivedBuffers buffers;
    try {
      buffers = ReceivedBuffers.detach(stream);
    } catch (IOException e) {
      throw new UncheckedIOException("reading the pieces of a received message", e);
    }
    if (buffers == null) {
      return prototype;
    }
    if (!buffers.aliasable()) {
      try {
        return parseCopying(buffers.stream());
      } finally {
        buffers.release();
      }
    }
    ByteBuf staging = null;
    try {
      staging = stage(buffers.pieces());
      T message = parseAliased(buffers, staging);
      if (buffers.held()) {
        if (staging != null) {
          buffers.attach(staging);
          staging = null;
        }
        HELD.put(new MessageKey(message, COLLECTED), new Held(buffers, LEAKS.track(message)));
      }
      return message;
    } catch (RuntimeException | Error e) {
      release(buffers, staging);
      throw e;
    }
  }

  /**
   * Parses from views of the pieces, or from a copy when no piece can be aliased. Releases
   * {@code buffers} and {@code staging} when the message holds neither.
   */
  private T parseAliased(ReceivedBuffers buffers, ByteBuf staging) {
    List<ByteBuffer> pieces = buffers.pieces();
    long aliased = 0;
    List<ByteString> parts = new ArrayList<>(pieces.size());
    int runStart = -1;
    for (ByteBuffer piece : pieces) {
      if (aliasable(piece)) {
        if (runStart >= 0) {
          parts.add(stagedRun(staging, runStart));
          runStart = -1;
        }
        parts.add(UnsafeByteOperations.unsafeWrap(piece));
        aliased += piece.remaining();
      } else {
        if (runStart < 0) {
          runStart = staging.writerIndex();
        }
        staging.writeBytes(piece.duplicate());
      }
    }
    if (runStart >= 0) {
      parts.add(stagedRun(staging, runStart));
    }
    if (aliased == 0) {
      // Nothing of the message would alias a received buffer: copy it to the heap and let go.
      T message = parseFrom(ByteString.copyFrom(parts).toByteArray());
      release(buffers, staging);
      Metric.MESSAGE_BYTES_COPIED.add(buffers.size());
      return message;
    }
    CodedInputStream in = ByteString.copyFrom(parts).newCodedInput();
    in.enableAliasing(true);
    T message = parseFrom(in);
    if (message == prototype) {
      release(buffers, staging);
      return message;
    }
    Metric.MESSAGE_BYTES_ALIASED.add(aliased);
    Metric.MESSAGE_BYTES_COPIED.add(buffers.size() - aliased);
    return message;
  }

  /**
   * A pooled direct buffer sized for the pieces that cannot be aliased, or null when there are
   * none. Caller must release.
   */
  private static ByteBuf stage(List<ByteBuffer> pieces) {
    int bytes = 0;
    for (ByteBuffer piece : pieces) {
      if (!aliasable(piece)) {
        bytes += piece.remaining();
      }
    }
    return bytes == 0 ? null : ByteBufAllocator.DEFAULT.directBuffer(bytes, bytes);
  }

  private static boolean aliasable(ByteBuffer piece) {
    return piece.isDirect() && piece.remaining() >= MIN_ALIASED_PIECE;
  }

  /** A view of {@code staging} from {@code start} to its writer index. */
  private static ByteString stagedRun(ByteBuf staging, int start) {
    return UnsafeByteOperations.unsafeWrap(staging.nioBuffer(start, staging.writerIndex() - start));
  }

  private static void release(ReceivedBuffers buffers, ByteBuf staging) {
    buffers.release();
    if (staging != null) {
      staging.release();
    }
  }

  private T parseCopying(InputStream stream) {
    if (!(stream instanceof KnownLength)) {
      CountingStream counted = new CountingStream(stream);
      T message = copying.parse(counted);
      Metric.MESSAGE_BYTES_COPIED.add(counted.count);
      return message;
    }
    int size;
    try {
      size = stream.available();
    } catch (IOException e) {
      throw new UncheckedIOException("reading the length of a received message", e);
    }
    T message = copying.parse(stream);
    Metric.MESSAGE_BYTES_COPIED.add(size);
    return message;
  }

  private T parseFrom(byte[] bytes) {
    return parseFrom(CodedInputStream.newInstance(bytes));
  }

  /** Parses the whole of {@code in}, with no size limit: gRPC has enforced its own. */
  private T parseFrom(CodedInputStream in) {
    in.setSizeLimit(Integer.MAX_VALUE);
    try {
      T message = parser.parseFrom(in, ExtensionRegistryLite.getEmptyRegistry());
      in.checkLastTagWas(0);
      return message;
    } catch (InvalidProtocolBufferException e) {
      // The half-parsed message protobuf attaches may alias the received buffers, which are
      // freed before the status reaches the application: the cause goes without it.
      throw Status.INTERNAL
          .withDescription("Invalid protobuf byte sequence")
          .withCause(e.setUnfinishedMessage(null))
          .asRuntimeException();
    }
  }

  /** The default instance this marshaller was made with. */
  @Override
  public T getMessagePrototype() {
    return prototype;
  }

  /** The class of the messages this marshaller parses. */
  @Override
  @SuppressWarnings("unchecked")
  public Class<T> getMessageClass() {
    return (Class<T>) prototype.getClass();
  }

  /**
   * Gives back the received buffers {@code message} aliases; the message must not be used after.
   * Does nothing for a message parsed by copying. Throws {@link IllegalStateException} when the
   * message was released already.
   */
  public void release(T message) {
    requireNonNull(message, "message");
    purge();
    Held h = HELD.get(new MessageKey(message, null));
    if (h != null) {
      h.release(message);
    }
  }

  /** Releases {@code message} when closed; for try-with-resources. */
  public Lease lease(T message) {
    requireNonNull(message, "message");
    return () -> release(message);
  }

  /** Whether {@code message} aliases received buffers that are not released yet. */
  public boolean isZeroCopy(T message) {
    requireNonNull(message, "message");
    purge();
    Held h = HELD.get(new MessageKey(message, null));
    return h != null && h.buffers.held();
  }

  /**
   * Forgets collected messages. The buffers of one collected without a release are kept for good:
   * a {@code ByteString} or buffer taken from it may outlive it.
   */
  private static void purge() {
    Reference<?> key;
    while ((key = COLLECTED.poll()) != null) {
      Held h = HELD.remove(key);
      if (h != null) {
        h.buffers.abandon("a zero-copy message");
      }
    }
  }

  /**
   * The release of one message: closing it calls {@link #release}, so a second close throws
   * {@link IllegalStateException} for a zero-copy message.
   */
  public interface Lease extends AutoCloseable {
    /** Releases the message. */
    @Override
    void close();
  }

  /** What one zero-copy message holds. */
  private static final class Held {
    /** The message's received pieces, with the staging buffer attached if any. */
    final ReceivedBuffers buffers;
    /** Reports the message if it is collected unreleased; null when not sampled. */
    private final ResourceLeakTracker<Object> leak;

    Held(ReceivedBuffers buffers, ResourceLeakTracker<Object> leak) {
      this.buffers = buffers;
      this.leak = leak;
    }

    void release(Object message) {
      if (!buffers.release()) {
        throw new IllegalStateException(
            "message of " + message.getClass().getName() + " released twice");
      }
      if (leak != null) {
        leak.close(message);
      }
    }
  }

  /**
   * The serialized form of a zero-copy message: keeps the message's buffers held until closed.
   * Reads after the close see the end of the stream.
   */
  private static final class HeldStream extends FilterInputStream
      implements KnownLength, Drainable {
    /** Held until the first close. */
    private final ReceivedBuffers buffers;
    /** Set by the first close. */
    private final AtomicBoolean closed = new AtomicBoolean();

    HeldStream(InputStream serialized, ReceivedBuffers buffers) {
      super(serialized);
      this.buffers = buffers;
    }

    @Override
    public int read() throws IOException {
      return closed.get() ? -1 : in.read();
    }

    @Override
    public int read(byte[] dest, int offset, int length) throws IOException {
      return closed.get() ? -1 : in.read(dest, offset, length);
    }

    @Override
    public int drainTo(OutputStream target) throws IOException {
      if (closed.get()) {
        return 0;
      }
      if (in instanceof Drainable) {
        return ((Drainable) in).drainTo(target);
      }
      return Math.toIntExact(in.transferTo(target));
    }

    @Override
    public void close() throws IOException {
      if (!closed.compareAndSet(false, true)) {
        return;
      }
      try {
        in.close();
      } finally {
        buffers.unhold();
      }
    }
  }

  /** Counts the bytes read through it. */
  private static final class CountingStream extends FilterInputStream {
    /** Bytes read or skipped so far. */
    long count;

    CountingStream(InputStream in) {
      super(in);
    }

    @Override
    public int read() throws IOException {
      int b = in.read();
      if (b >= 0) {
        count++;
      }
      return b;
    }

    @Override
    public int read(byte[] dest, int offset, int length) throws IOException {
      int n = in.read(dest, offset, length);
      if (n > 0) {
        count += n;
      }
      return n;
    }

    @Override
    public long skip(long n) throws IOException {
      long skipped = in.skip(n);
      count += skipped;
      return skipped;
    }

    @Override
    public boolean markSupported() {
      return false;
    }
  }

  /** A weak reference to a message, equal to another only for the same message object. */
  private static final class MessageKey extends WeakReference<Object> {
    private final int hash;

    MessageKey(Object message, ReferenceQueue<Object> queue) {
      super(message, queue);
      this.hash = System.identityHashCode(message);
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object o) {
      if (this == o) {
        return true;
      }
      if (!(o instanceof MessageKey)) {
        return false;
      }
      Object referent = get();
      return referent != null && referent == ((MessageKey) o).get();
    }
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static ResourceLeakDetector<Object> leakDetector() {
    return (ResourceLeakDetector)
        ResourceLeakDetectorFactory.instance().newResourceLeakDetector(ZeroCopyMarshaller.class);
  }
}
