package io.pinless.grpc;

import io.grpc.ClientInterceptor;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.pinless.PinlessMetrics.Metric;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * A marshaller of raw message bytes: a received {@link Payload} gives the application views of
 * the buffers the message arrived in, with no copy and no parsing. Use it for methods whose
 * messages the application stores or forwards as they are.
 *
 * <p>Forwarding: gRPC serializes a sent payload once per attempt of its call, and a retry
 * (transparent, or by a retry policy) serializes it again after {@code sendMessage} returned. A
 * forwarded payload may be closed once {@code sendMessage} returned: its close copies it to the
 * heap, and a retry sends that copy. With {@link #keepSentUntilClose()} on the channel the close
 * makes no copy: the buffers are freed at the later of the close and the call's close. A payload
 * closed before its first send is never sent: {@link #stream} throws, which fails the call.
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
   * A payload closed after a send is sent again from its own buffers or the copy its close made.
   * Throws {@link io.grpc.StatusRuntimeException} with {@link io.grpc.Status#FAILED_PRECONDITION}
   * for a payload closed before its first send.
   */
  @Override
  public InputStream stream(Payload payload) {
    return payload.sendingStream();
  }

  /**
   * A client interceptor that keeps each zero-copy payload sent on a call from being freed until
   * the call closes, so that a retry re-sends the same bytes and a close after the send copies
   * nothing. The payload's close still counts: its buffers are freed at the later of the close
   * and the call's close.
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
}
