package io.pinless.grpc;

import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.pinless.testing.ByteArrays;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * A byte-array gRPC service for tests, with no generated code: unary and bidi echo, a server
 * stream of {@code count} messages of {@code size} bytes, and a client stream that answers the
 * number of bytes and messages it received.
 */
final class TestService {
  static final String SERVICE = "pinless.test.Bytes";

  static final MethodDescriptor.Marshaller<byte[]> BYTES = ByteArrays.MARSHALLER;

  static final MethodDescriptor<byte[], byte[]> UNARY = method("Unary", MethodDescriptor.MethodType.UNARY);
  static final MethodDescriptor<byte[], byte[]> SERVER_STREAM =
      method("ServerStream", MethodDescriptor.MethodType.SERVER_STREAMING);
  static final MethodDescriptor<byte[], byte[]> CLIENT_STREAM =
      method("ClientStream", MethodDescriptor.MethodType.CLIENT_STREAMING);
  static final MethodDescriptor<byte[], byte[]> BIDI = method("Bidi", MethodDescriptor.MethodType.BIDI_STREAMING);

  private TestService() {}

  private static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
    return MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(type)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
        .setRequestMarshaller(BYTES)
        .setResponseMarshaller(BYTES)
        .build();
  }

  /** A request for {@link #SERVER_STREAM}. */
  static byte[] streamRequest(int count, int size) {
    return ByteBuffer.allocate(8).putInt(count).putInt(size).array();
  }

  /** Deterministic message content. */
  static byte[] message(int size, int seed) {
    byte[] b = new byte[size];
    for (int i = 0; i < size; i++) {
      b[i] = (byte) (i * 7 + seed);
    }
    return b;
  }

  static ServerServiceDefinition definition() {
    return ServerServiceDefinition.builder(SERVICE)
        .addMethod(UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
          out.onNext(req);
          out.onCompleted();
        }))
        .addMethod(SERVER_STREAM, ServerCalls.asyncServerStreamingCall((req, out) -> {
          ByteBuffer r = ByteBuffer.wrap(req);
          new Producer(r.getInt(), r.getInt(), (ServerCallStreamObserver<byte[]>) out).start();
        }))
        .addMethod(CLIENT_STREAM, ServerCalls.asyncClientStreamingCall(Counting::new))
        .addMethod(BIDI, ServerCalls.asyncBidiStreamingCall(Echo::new))
        .build();
  }

  /**
   * Sends a server stream's messages only while the stream is ready, as a well-behaved gRPC
   * service does: a client that stops reading, cancels or goes away leaves at most a flow-control
   * window of messages queued, and nothing is written once the call has ended.
   */
  private static final class Producer implements Runnable {
    private final int count;
    private final int size;
    private final ServerCallStreamObserver<byte[]> out;
    /** Messages sent so far; touched only on the call's serialized executor. */
    private int sent;
    private boolean ended;

    Producer(int count, int size, ServerCallStreamObserver<byte[]> out) {
      this.count = count;
      this.size = size;
      this.out = out;
    }

    void start() {
      out.setOnCancelHandler(() -> ended = true);
      out.setOnReadyHandler(this);
      run();
    }

    @Override
    public void run() {
      while (!ended && sent < count && out.isReady()) {
        out.onNext(message(size, sent++));
      }
      if (!ended && sent == count) {
        ended = true;
        out.onCompleted();
      }
    }
  }

  /** Counts what a client stream sends, and answers bytes (long) and messages (int). */
  private static final class Counting implements StreamObserver<byte[]> {
    private final StreamObserver<byte[]> out;
    private long bytes;
    private int messages;

    Counting(StreamObserver<byte[]> out) {
      this.out = out;
    }

    @Override
    public void onNext(byte[] value) {
      bytes += value.length;
      messages++;
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {
      out.onNext(ByteBuffer.allocate(12).putLong(bytes).putInt(messages).array());
      out.onCompleted();
    }
  }

  /** Echoes every message of a bidi stream. */
  private static final class Echo implements StreamObserver<byte[]> {
    private final StreamObserver<byte[]> out;

    Echo(StreamObserver<byte[]> out) {
      this.out = out;
    }

    @Override
    public void onNext(byte[] value) {
      out.onNext(value);
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {
      out.onCompleted();
    }
  }
}
