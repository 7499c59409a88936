package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.netty.buffer.ByteBuf;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkService;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A retried call serializes its message again, once per attempt. The server fails the first
 * attempt with a retryable status only after the client released the message it forwarded and
 * the test wrote over its freed buffers, as a pool reusing them would. The retry must never send
 * the bytes that took their place: it sends the original, from the copy the release made, or,
 * with {@code keepSentUntilClose}, from the buffers the call kept.
 */
class SentMessageRetryTest {
  private static final String SERVICE = "pinless.test.Retry";
  /** Under grpc's 1 MiB per-call retry buffer, so that the call stays retriable. */
  private static final int MESSAGE_BYTES = 64 * 1024;
  /** A hang guard only: every wait ends on an event. */
  private static final long GUARD_SECONDS = 60;

  /** Every request message the server received, as bytes. */
  private final List<byte[]> received = new CopyOnWriteArrayList<>();
  /** Opened once the client released the message and its buffers were overwritten. */
  private final CountDownLatch released = new CountDownLatch(1);
  /** The first exception a task of the channel's executor threw. */
  private final CompletableFuture<Throwable> executorFailure = new CompletableFuture<>();
  private final ExecutorService executor = Executors.newCachedThreadPool();
  private Server server;
  private ManagedChannel channel;

  @BeforeEach
  void start() throws IOException {
    MethodDescriptor<byte[], byte[]> upload = upload(TestService.BYTES);
    ServerServiceDefinition service =
        ServerServiceDefinition.builder(SERVICE)
            .addMethod(
                upload,
                ServerCalls.asyncUnaryCall(
                    (request, out) -> {
                      received.add(request);
                      out.onNext(new byte[0]);
                      out.onCompleted();
                    }))
            .build();
    server =
        NettyServerBuilder.forAddress(
                new InetSocketAddress("127.0.0.1", 0), PinlessServerCredentials.insecure())
            .addService(ServerInterceptors.intercept(service, new FailFirstAttempt()))
            .addService(TestService.definition())
            .build()
            .start();
    channel =
        NettyChannelBuilder.forAddress(
                server.getListenSockets().get(0), PinlessChannelCredentials.insecure())
            .executor(this::executeRecordingFailure)
            .defaultServiceConfig(retryOnUnavailable())
            .enableRetry()
            .build();
    // A call first, so that the test's call goes straight to a ready transport.
    ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, new byte[1]);
  }

  @AfterEach
  void stop() throws InterruptedException {
    channel.shutdownNow();
    server.shutdownNow();
    channel.awaitTermination(10, TimeUnit.SECONDS);
    server.awaitTermination(10, TimeUnit.SECONDS);
    executor.shutdownNow();
  }

  /** Runs {@code task} on the executor, recording what it throws, as a thread would log it. */
  private void executeRecordingFailure(Runnable task) {
    executor.execute(
        () -> {
          try {
            task.run();
          } catch (RuntimeException | Error e) {
            executorFailure.complete(e);
          }
        });
  }

  @Test
  void retryOfAReleasedZeroCopyMessageSendsTheOriginal() throws Exception {
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    byte[] original = ChunkService.chunk(3, MESSAGE_BYTES).toByteArray();
    long copied = sendReleaseAndRetry(original, chunks, chunks::release, null);
    assertEquals(original.length, copied, "the release copied the sent message once");
  }

  @Test
  void retryOfAClosedPayloadSendsTheOriginal() throws Exception {
    byte[] original = TestService.message(MESSAGE_BYTES, 5);
    long copied = sendReleaseAndRetry(original, PayloadMarshaller.INSTANCE, Payload::close, null);
    assertEquals(original.length, copied, "the close copied the sent payload once");
  }

  @Test
  void retryOfAZeroCopyMessageKeptUntilCloseSendsTheOriginal() throws Exception {
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    byte[] original = ChunkService.chunk(4, MESSAGE_BYTES).toByteArray();
    long copied =
        sendReleaseAndRetry(original, chunks, chunks::release, chunks.keepSentUntilClose());
    assertEquals(0, copied, "a message the call keeps is not copied");
  }

  @Test
  void retryOfAPayloadKeptUntilCloseSendsTheOriginal() throws Exception {
    byte[] original = TestService.message(MESSAGE_BYTES, 6);
    PayloadMarshaller payloads = PayloadMarshaller.INSTANCE;
    long copied =
        sendReleaseAndRetry(original, payloads, Payload::close, payloads.keepSentUntilClose());
    assertEquals(0, copied, "a payload the call keeps is not copied");
  }

  /**
   * Receives {@code original} through {@code marshaller} from test buffers, sends it on a call
   * (through {@code keep} when not null) whose first attempt fails once {@code release} ran and
   * the freed buffers were written over, and checks that both attempts delivered the original
   * and that the buffers are freed by the call's close at the latest. Returns the bytes the
   * release copied for the retry.
   */
  private <T> long sendReleaseAndRetry(
      byte[] original, MethodDescriptor.Marshaller<T> marshaller, Consumer<T> release,
      ClientInterceptor keep) throws Exception {
    List<ByteBuf> pieces =
        PieceStreams.retain(PieceStreams.direct(original, MESSAGE_BYTES / 3, MESSAGE_BYTES / 2));
    try {
      T message = parseLikeGrpc(marshaller::parse, PieceStreams.open(pieces));
      Channel target = keep == null ? channel : ClientInterceptors.intercept(channel, keep);
      CompletableFuture<Status> closed = new CompletableFuture<>();
      ClientCall<T, byte[]> call =
          target.newCall(
              upload(marshaller),
              CallOptions.DEFAULT.withDeadlineAfter(GUARD_SECONDS, TimeUnit.SECONDS));
      call.start(
          new ClientCall.Listener<>() {
            @Override
            public void onClose(Status status, Metadata trailers) {
              closed.complete(status);
            }
          },
          new Metadata());
      call.request(1);
      call.sendMessage(message);
      call.halfClose();

      long copiedBefore = Metric.SENT_BYTES_COPIED.value();
      release.accept(message);
      long copied = Metric.SENT_BYTES_COPIED.value() - copiedBefore;
      if (keep == null) {
        for (ByteBuf piece : pieces) {
          assertEquals(1, piece.refCnt(), "freed at the release");
        }
      }
      PieceStreams.overwrite(pieces);
      released.countDown();

      Status status = closed.get(GUARD_SECONDS, TimeUnit.SECONDS);
      assertTrue(status.isOk(), status.toString());
      assertFalse(executorFailure.isDone(), () -> "a task failed: " + executorFailure.join());
      assertEquals(2, received.size(), "both attempts reached the server");
      for (byte[] bytes : received) {
        assertArrayEquals(original, bytes, "the server received only the original bytes");
      }
      for (ByteBuf piece : pieces) {
        assertEquals(1, piece.refCnt(), "freed at the call's close at the latest");
      }
      return copied;
    } finally {
      PieceStreams.release(pieces);
    }
  }

  private static <T> T parseLikeGrpc(Function<InputStream, T> parse, InputStream stream)
      throws IOException {
    try (InputStream s = stream) {
      return parse.apply(s);
    }
  }

  private static <T> MethodDescriptor<T, byte[]> upload(MethodDescriptor.Marshaller<T> requests) {
    return MethodDescriptor.<T, byte[]>newBuilder()
        .setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Upload"))
        .setRequestMarshaller(requests)
        .setResponseMarshaller(TestService.BYTES)
        .build();
  }

  /** grpc's retry policy for the service: two attempts, retried on UNAVAILABLE. */
  private static Map<String, Object> retryOnUnavailable() {
    Map<String, Object> policy =
        Map.of(
            "maxAttempts", 2.0,
            "initialBackoff", "0.001s",
            "maxBackoff", "0.001s",
            "backoffMultiplier", 1.0,
            "retryableStatusCodes", List.of("UNAVAILABLE"));
    Map<String, Object> method =
        Map.of("name", List.of(Map.of("service", SERVICE)), "retryPolicy", policy);
    return Map.of("methodConfig", List.of(method));
  }

  /** Fails the first attempt with UNAVAILABLE once the client released its message. */
  private final class FailFirstAttempt implements ServerInterceptor {
    private final AtomicBoolean failed = new AtomicBoolean();

    @Override
    public <Q, A> ServerCall.Listener<Q> interceptCall(
        ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
      if (failed.getAndSet(true)) {
        return next.startCall(call, headers);
      }
      call.request(1);
      return new ServerCall.Listener<>() {
        @Override
        public void onMessage(Q message) {
          received.add((byte[]) message);
        }

        @Override
        public void onHalfClose() {
          try {
            assertTrue(released.await(GUARD_SECONDS, TimeUnit.SECONDS));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          call.close(Status.UNAVAILABLE.withDescription("first attempt fails"), new Metadata());
        }
      };
    }
  }
}
