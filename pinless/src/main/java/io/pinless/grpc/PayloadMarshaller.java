package io.pinless.grpc;

import io.grpc.ClientInterceptor;
import io.grpc.Drainable;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.pinless.PinlessMetrics.Metric;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * A marshaller of raw message bytes: a received {@link Payload} gives the application views of
 * the buffers the message arrived in, with no copy and no parsing. Use it for methods whose
 * messages the application stores or forwards as they are.
 *
 * <p>Forwarding: gRPC serializes a sent payload once per attempt of its call, and a retry
 * (transparent, or by a retry policy) serializes it again after {@code sendMessage} returned. So a
 * forwarded payload must stay open until the call it was sent on closes. Close it in the call's
 * {@code onClose}, or install {@link #keepSentUntilClose()} on the channel and close it whenever
 * done. A closed payload is never sent: {@link #stream} throws. That fails a first attempt
 * cleanly. A retry's replay cannot report it: grpc-core leaves the call open, and not even a
 * cancel closes it until the transport does.
 *
 * <p>A received payload is zero-copy when gRPC's message stream is {@link KnownLength},
 * {@link io.grpc.HasByteBuffer} and {@link io.grpc.Detachable} with its pieces in NIO buffers
 * (uncompressed messages on grpc-netty); parts without one (grpc-core's heap copies of runs of
 * small pieces), at most 1/8 of the message, are copied into heap buffers among the views. Such a
 * payload must be closed. Otherwise the bytes are copied into one heap buffer and the close only
 * marks the payload closed.
 *
 * <p>Memory: holds nothing itself. What a received payload holds is described on {@link Payload}.
 */
public final class PayloadMarshaller implements MethodDescriptor.Marshaller<Payload> {
  /** The marshaller; it keeps no state of its own. */
  public static final PayloadMarshaller INSTANCE = new PayloadMarshaller();

  private PayloadMarshaller() {}

  /**
   * The bytes of {@code payload} for gRPC to send. gRPC calls this once per attempt of the call.
   * A zero-copy payload keeps its buffers until gRPC closes the stream, even if closed meanwhile.
   * Throws {@link io.grpc.StatusRuntimeException} with {@link io.grpc.Status#FAILED_PRECONDITION}
   * for a closed payload.
   */
  @Override
  public InputStream stream(Payload payload) {
    ReceivedBuffers held = payload.holdForSending();
    return new PayloadStream(payload.duplicates(), payload.size(), held);
  }

  /**
   * A client interceptor that keeps each zero-copy payload sent on a call from being freed until
   * the call closes, so that a retry re-sends the same bytes. The payload's close still counts:
   * its buffers are freed at the later of the close and the call's close.
   */
  public ClientInterceptor keepSentUntilClose() {
    return new SentMessageHolds(m -> m instanceof Payload ? ((Payload) m).received() : null);
  }

  /** A payload of the received message in {@code stream}; the caller must close it. */
  @Override
  public Payload parse(InputStream stream) {
    try {
      if (ReceivedBuffers.detachable(stream)) {
        ReceivedBuffers received = ReceivedBuffers.detach(stream);
        if (received == null) {
          return Payload.of();
        }
        if (received.aliasable()) {
          Metric.MESSAGE_BYTES_ALIASED.add(received.size() - received.copiedBytes());
          Metric.MESSAGE_BYTES_COPIED.add(received.copiedBytes());
          return Payload.received(received);
        }
        try {
          byte[] bytes = received.stream().readAllBytes();
          Metric.MESSAGE_BYTES_COPIED.add(bytes.length);
          return Payload.wrap(bytes);
        } finally {
          received.release();
        }
      }
      byte[] bytes = stream.readAllBytes();
      Metric.MESSAGE_BYTES_COPIED.add(bytes.length);
      return Payload.wrap(bytes);
    } catch (IOException e) {
      throw new UncheckedIOException("reading a received message", e);
    }
  }

  /** Reads the buffers of a payload in order; drains them without an intermediate copy. */
  private static final class PayloadStream extends InputStream implements KnownLength, Drainable {
    /** Bytes per write when draining a buffer with no array. */
    private static final int DRAIN_CHUNK = 8192;

    /** The payload's buffers; read by advancing their positions. */
    private final List<ByteBuffer> buffers;
    /** Index of the first buffer with bytes left. */
    private int current;
    /** Bytes left over all buffers. */
    private long left;
    /** The payload's received buffers, held until the first close; null when it owns none. */
    private ReceivedBuffers held;

    PayloadStream(List<ByteBuffer> buffers, long size, ReceivedBuffers held) {
      this.buffers = buffers;
      this.left = size;
      this.held = held;
    }

    /** Drops the hold on the payload's buffers; reads after it see the end of the stream. */
    @Override
    public void close() {
      current = buffers.size();
      left = 0;
      if (held != null) {
        ReceivedBuffers hold = held;
        held = null;
        hold.unhold();
      }
    }

    /** The first buffer with bytes left, or null at the end. */
    private ByteBuffer head() {
      while (current < buffers.size()) {
        ByteBuffer b = buffers.get(current);
        if (b.hasRemaining()) {
          return b;
        }
        current++;
      }
      return null;
    }

    @Override
    public int read() {
      ByteBuffer b = head();
      if (b == null) {
        return -1;
      }
      left--;
      return b.get() & 0xff;
    }

    @Override
    public int read(byte[] dest, int offset, int length) {
      if (length == 0) {
        return 0;
      }
      ByteBuffer b = head();
      if (b == null) {
        return -1;
      }
      int n = Math.min(length, b.remaining());
      b.get(dest, offset, n);
      left -= n;
      return n;
    }

    @Override
    public int available() {
      return (int) Math.min(Integer.MAX_VALUE, left);
    }

    @Override
    public int drainTo(OutputStream target) throws IOException {
      int drained = 0;
      byte[] chunk = null;
      for (ByteBuffer b; (b = head()) != null; ) {
        int n = b.remaining();
        if (b.hasArray()) {
          target.write(b.array(), b.arrayOffset() + b.position(), n);
          b.position(b.limit());
        } else {
          if (chunk == null) {
            chunk = new byte[Math.min(DRAIN_CHUNK, n)];
          }
          while (b.hasRemaining()) {
            int part = Math.min(chunk.length, b.remaining());
            b.get(chunk, 0, part);
            target.write(chunk, 0, part);
          }
        }
        drained += n;
        left -= n;
      }
      return drained;
    }
  }
}
