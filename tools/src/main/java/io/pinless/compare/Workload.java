package io.pinless.compare;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The calls compared: a download (a server stream of an object in messages, sent only while the
 * stream is ready, as a storage server does) and a unary echo of small messages. The client's
 * view of a downloaded message reads each byte once, as a protobuf parser would, and keeps only
 * the count.
 */
final class Workload {
  private static final String SERVICE = "pinless.compare.Workload";

  /**
   * Messages as arrays, marshalled the way protobuf's are: the outgoing stream knows its length
   * and drains itself into gRPC's buffers, and a received message is read once into an array of
   * its size (gRPC's received streams know their length too).
   */
  private static final MethodDescriptor.Marshaller<byte[]> BYTES =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
          return new ArrayStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
          try (stream) {
            byte[] message = stream.readNBytes(stream.available());
            if (stream.read() != -1) {
              throw new IllegalStateException("a message longer than it said");
            }
            return message;
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };

  /** An array's bytes that gRPC can size and drain without copying through a scratch buffer. */
  private static final class ArrayStream extends ByteArrayInputStream
      implements io.grpc.KnownLength, io.grpc.Drainable {
    ArrayStream(byte[] bytes) {
      super(bytes);
    }

    @Override
    public int drainTo(java.io.OutputStream target) throws IOException {
      int n = count - pos;
      target.write(buf, pos, n);
      pos = count;
      return n;
    }
  }

  /** A downloaded message as the client sees it: the number of bytes read out of it. */
  private static final MethodDescriptor.Marshaller<Integer> READ_ONCE =
      new MethodDescriptor.Marshaller<>() {
        private final ThreadLocal<byte[]> scratch = ThreadLocal.withInitial(() -> new byte[64 << 10]);

        @Override
        public InputStream stream(Integer value) {
          throw new UnsupportedOperationException("a download only arrives");
        }

        @Override
        public Integer parse(InputStream stream) {
          byte[] into = scratch.get();
          int total = 0;
          try (stream) {
            for (int n; (n = stream.read(into)) > 0; ) {
              total += n;
            }
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
          return total;
        }
      };

  private static final MethodDescriptor<byte[], byte[]> DOWNLOAD_SERVED =
      MethodDescriptor.<byte[], byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.SERVER_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Download"))
          .setRequestMarshaller(BYTES)
          .setResponseMarshaller(BYTES)
          .build();

  private static final MethodDescriptor<byte[], Integer> DOWNLOAD =
      DOWNLOAD_SERVED.toBuilder(BYTES, READ_ONCE).build();

  private static final MethodDescriptor<byte[], byte[]> ECHO =
      MethodDescriptor.<byte[], byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Echo"))
          .setRequestMarshaller(BYTES)
          .setResponseMarshaller(BYTES)
          .build();

  private Workload() {}

  /** The service: Download streams {@code count} messages of {@code size} bytes; Echo echoes. */
  static ServerServiceDefinition service(int messageBytes) {
    byte[] message = new byte[messageBytes];
    for (int i = 0; i < message.length; i++) {
      message[i] = (byte) (i * 31 + 7);
    }
    return ServerServiceDefinition.builder(SERVICE)
        .addMethod(DOWNLOAD_SERVED, ServerCalls.asyncServerStreamingCall((request, out) -> {
          ByteBuffer r = ByteBuffer.wrap(request);
          int count = r.getInt();
          int size = r.getInt();
          if (size != message.length) {
            out.onError(io.grpc.Status.INVALID_ARGUMENT
                .withDescription("this server streams messages of " + message.length + " bytes")
                .asRuntimeException());
            return;
          }
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
        .addMethod(ECHO, ServerCalls.asyncUnaryCall((request, out) -> {
          out.onNext(request);
          out.onCompleted();
        }))
        .build();
  }

  /** Downloads one object of {@code count} messages of {@code size} bytes; completes with its bytes. */
  static CompletableFuture<Long> download(ManagedChannel channel, int count, int size) {
    CompletableFuture<Long> done = new CompletableFuture<>();
    long expected = (long) count * size;
    ClientCalls.asyncServerStreamingCall(
        channel.newCall(DOWNLOAD, CallOptions.DEFAULT),
        ByteBuffer.allocate(8).putInt(count).putInt(size).array(),
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
            if (total == expected) {
              done.complete(total);
            } else {
              done.completeExceptionally(new IllegalStateException(
                  "downloaded " + total + " of " + expected + " bytes"));
            }
          }
        });
    return done;
  }

  /** One echo of {@code message}; completes when the same number of bytes came back. */
  static CompletableFuture<Void> echo(ManagedChannel channel, byte[] message) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    ClientCalls.asyncUnaryCall(channel.newCall(ECHO, CallOptions.DEFAULT), message,
        new StreamObserver<byte[]>() {
          @Override
          public void onNext(byte[] value) {
            if (value.length != message.length) {
              done.completeExceptionally(new IllegalStateException(
                  "echoed " + value.length + " of " + message.length + " bytes"));
            }
          }

          @Override
          public void onError(Throwable t) {
            done.completeExceptionally(t);
          }

          @Override
          public void onCompleted() {
            done.complete(null);
          }
        });
    return done;
  }

  /**
   * Each channel downloads objects one after the other through {@code download} until {@code
   * deadlineNanos}, recording each object's time in {@code latencies}.
   *
   * @return payload bytes downloaded
   */
  static long downloadLoop(List<ManagedChannel> channels, Marshalling.Download download,
      int objectBytes, int messageBytes, long deadlineNanos, Latencies latencies)
      throws Exception {
    AtomicLong bytes = new AtomicLong();
    CompletableFuture<?>[] loops = new CompletableFuture<?>[channels.size()];
    for (int i = 0; i < loops.length; i++) {
      CompletableFuture<Void> loop = new CompletableFuture<>();
      nextDownload(channels.get(i), download, objectBytes / messageBytes, messageBytes,
          deadlineNanos, latencies, bytes, loop);
      loops[i] = loop;
    }
    CompletableFuture.allOf(loops).get(deadlineNanos - System.nanoTime() + TimeUnit.MINUTES.toNanos(2),
        TimeUnit.NANOSECONDS);
    return bytes.get();
  }

  private static void nextDownload(ManagedChannel channel, Marshalling.Download download,
      int count, int size, long deadlineNanos, Latencies latencies, AtomicLong bytes,
      CompletableFuture<Void> loop) {
    long start = System.nanoTime();
    download.start(channel, count, size).whenComplete((got, failure) -> {
      if (failure != null) {
        loop.completeExceptionally(failure);
        return;
      }
      long end = System.nanoTime();
      latencies.record(end - start);
      bytes.addAndGet(got);
      if (end - deadlineNanos < 0) {
        nextDownload(channel, download, count, size, deadlineNanos, latencies, bytes, loop);
      } else {
        loop.complete(null);
      }
    });
  }

  /**
   * Keeps {@code inFlight} echoes of {@code message} going on each channel until
   * {@code deadlineNanos}, recording each call's time in {@code latencies}.
   *
   * @return calls completed
   */
  static long echoLoop(List<ManagedChannel> channels, byte[] message, int inFlight,
      long deadlineNanos, Latencies latencies) throws Exception {
    AtomicLong calls = new AtomicLong();
    CompletableFuture<?>[] chains = new CompletableFuture<?>[channels.size() * inFlight];
    for (int i = 0; i < chains.length; i++) {
      CompletableFuture<Void> chain = new CompletableFuture<>();
      nextEcho(channels.get(i % channels.size()), message, deadlineNanos, latencies, calls, chain);
      chains[i] = chain;
    }
    CompletableFuture.allOf(chains).get(deadlineNanos - System.nanoTime() + TimeUnit.MINUTES.toNanos(1),
        TimeUnit.NANOSECONDS);
    return calls.get();
  }

  private static void nextEcho(ManagedChannel channel, byte[] message, long deadlineNanos,
      Latencies latencies, AtomicLong calls, CompletableFuture<Void> chain) {
    long start = System.nanoTime();
    echo(channel, message).whenComplete((ignored, failure) -> {
      if (failure != null) {
        chain.completeExceptionally(failure);
        return;
      }
      long end = System.nanoTime();
      latencies.record(end - start);
      calls.incrementAndGet();
      if (end - deadlineNanos < 0) {
        nextEcho(channel, message, deadlineNanos, latencies, calls, chain);
      } else {
        chain.complete(null);
      }
    });
  }
}
