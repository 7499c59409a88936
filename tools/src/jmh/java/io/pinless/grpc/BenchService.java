package io.pinless.grpc;

import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The download the benchmarks measure: a server stream of {@code count} messages of {@code size}
 * bytes, sent only while the stream is ready. The server's marshaller hands gRPC a stream it can
 * size and drain into its output in one write, as protobuf's does; the client's reads every byte
 * of a message once (as a protobuf parser would) into a scratch array and keeps only the count.
 *
 * <p>Why not a plain {@code ByteArrayInputStream}: gRPC's framer copies one through Guava's
 * {@code ByteStreams.copy}, a new 8 KiB scratch array per message. At 1 KiB messages that cost
 * would dominate the sending loop and the heap per byte of every variant alike: a cost of the
 * fixture, not of any transport.
 */
final class BenchService {
  static final String SERVICE = "pinless.bench.Download";

  /** Requests and responses: the server's bytes go out as they are. */
  private static final MethodDescriptor.Marshaller<byte[]> BYTES_OUT =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
          return new DrainedBytes(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
          try {
            return stream.readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };

  /** An array's bytes, which gRPC's framer sizes and writes to its output in one call. */
  private static final class DrainedBytes extends ByteArrayInputStream
      implements io.grpc.KnownLength, io.grpc.Drainable {
    DrainedBytes(byte[] bytes) {
      super(bytes);
    }

    @Override
    public int drainTo(java.io.OutputStream target) throws IOException {
      int left = count - pos;
      target.write(buf, pos, left);
      pos = count;
      return left;
    }
  }

  /** The client's view of a response: how many bytes it read. */
  private static final MethodDescriptor.Marshaller<Integer> COUNTED =
      new MethodDescriptor.Marshaller<>() {
        private final ThreadLocal<byte[]> scratch = ThreadLocal.withInitial(() -> new byte[65536]);

        @Override
        public InputStream stream(Integer value) {
          throw new UnsupportedOperationException("the client only receives");
        }

        @Override
        public Integer parse(InputStream stream) {
          byte[] into = scratch.get();
          int total = 0;
          try {
            for (int n; (n = stream.read(into)) > 0; ) {
              total += n;
            }
            stream.close();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
          return total;
        }
      };

  static final MethodDescriptor<byte[], byte[]> DOWNLOAD_SERVER =
      MethodDescriptor.<byte[], byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.SERVER_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Download"))
          .setRequestMarshaller(BYTES_OUT)
          .setResponseMarshaller(BYTES_OUT)
          .build();

  static final MethodDescriptor<byte[], Integer> DOWNLOAD =
      DOWNLOAD_SERVER.toBuilder(BYTES_OUT, COUNTED).build();

  /** A unary call that answers its request's bytes: the small calls the benchmarks time. */
  static final MethodDescriptor<byte[], byte[]> ECHO =
      MethodDescriptor.<byte[], byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Echo"))
          .setRequestMarshaller(BYTES_OUT)
          .setResponseMarshaller(BYTES_OUT)
          .build();

  /** One message per size, made once: the benchmarks measure transport, not the fixture. */
  private static final Map<Integer, byte[]> MESSAGES = new ConcurrentHashMap<>();

  private BenchService() {}

  private static byte[] message(int size) {
    byte[] message = new byte[size];
    for (int i = 0; i < size; i++) {
      message[i] = (byte) (i * 31);
    }
    return message;
  }

  /**
   * Downloads through {@code channel} what {@code request} asks for and checks the byte count.
   *
   * @return the payload bytes received
   */
  static long download(io.grpc.ManagedChannel channel, byte[] request, long expectedBytes)
      throws Exception {
    long got = downloadAsync(channel, request).get(60, java.util.concurrent.TimeUnit.SECONDS);
    if (got != expectedBytes) {
      throw new IllegalStateException("downloaded " + got + " of " + expectedBytes + " bytes");
    }
    return got;
  }

  /** Starts a download through {@code channel}; completes with the payload bytes received. */
  static java.util.concurrent.CompletableFuture<Long> downloadAsync(
      io.grpc.ManagedChannel channel, byte[] request) {
    java.util.concurrent.CompletableFuture<Long> done = new java.util.concurrent.CompletableFuture<>();
    io.grpc.stub.ClientCalls.asyncServerStreamingCall(
        channel.newCall(DOWNLOAD, io.grpc.CallOptions.DEFAULT),
        request,
        new StreamObserver<Integer>() {
          private long total;

          @Override
          public void onNext(Integer value) {
            total += value;
          }

          @Override
          public void onError(Throwable t) {
            done.completeExceptionally(t);
          }

          @Override
          public void onCompleted() {
            done.complete(total);
          }
        });
    return done;
  }

  /** A request for {@code count} messages of {@code size} bytes. */
  static byte[] request(int count, int size) {
    return ByteBuffer.allocate(8).putInt(count).putInt(size).array();
  }

  static ServerServiceDefinition definition() {
    return ServerServiceDefinition.builder(SERVICE)
        .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
          out.onNext(req);
          out.onCompleted();
        }))
        .addMethod(DOWNLOAD_SERVER, ServerCalls.asyncServerStreamingCall((req, out) -> {
          ByteBuffer r = ByteBuffer.wrap(req);
          int count = r.getInt();
          byte[] message = MESSAGES.computeIfAbsent(r.getInt(), BenchService::message);
          ServerCallStreamObserver<byte[]> stream = (ServerCallStreamObserver<byte[]>) out;
          int[] sent = {0};
          Runnable send = () -> {
            while (sent[0] < count && stream.isReady()) {
              stream.onNext(message);
              if (++sent[0] == count) {
                stream.onCompleted();
              }
            }
          };
          stream.setOnCancelHandler(() -> sent[0] = count);
          stream.setOnReadyHandler(send);
          send.run();
        }))
        .build();
  }
}
