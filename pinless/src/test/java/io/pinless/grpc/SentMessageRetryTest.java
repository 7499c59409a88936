package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkService;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.Arrays;
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
 * the test wrote over its buffers, as a pool reusing them would. The retry must never send the
 * bytes that took their place: with {@code keepSentUntilClose} it sends the original, without it
 * the marshaller refuses the released message.
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
  void retryOfAReleasedZeroCopyMessageSendsNoOtherBytes() throws Exception {
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    byte[] original = ChunkService.chunk(3, MESSAGE_BYTES).toByteArray();
    Throwable refused = sendReleaseAndRetry(original, chunks, chunks::release, null);
    assertRefused(refused, "released before gRPC serialized it");
  }

  @Test
  void retryOfAClosedPayloadSendsNoOtherBytes() throws Exception {
    byte[] original = TestService.message(MESSAGE_BYTES, 5);
    Throwable refused =
        sendReleaseAndRetry(original, PayloadMarshaller.INSTANCE, Payload::close, null);
    assertRefused(refused, "closed before gRPC serialized it");
  }

  @Test
  void retryOfAZeroCopyMessageKeptUntilCloseSendsTheOriginal() throws Exception {
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    byte[] original = ChunkService.chunk(4, MESSAGE_BYTES).toByteArray();
    sendReleaseAndRetry(original, chunks, chunks::release, chunks.keepSentUntilClose());
  }

  @Test
  void retryOfAPayloadKeptUntilCloseSendsTheOriginal() throws Exception {
    byte[] original = TestService.message(MESSAGE_BYTES, 6);
    PayloadMarshaller payloads = PayloadMarshaller.INSTANCE;
    sendReleaseAndRetry(original, payloads, Payload::close, payloads.keepSentUntilClose());
  }

  /**
   * Receives {@code original} through {@code marshaller} from test buffers, sends it on a call
   * (through {@code keep} when not null) whose first attempt fails once {@code release} ran, and
   * checks that the server received only the original. With {@code keep} the retry succeeds and
   * the buffers are freed at the call's close. Without it returns what the retry's serialization
   * threw.
   */
  private <T> Throwable sendReleaseAndRetry(
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

      release.accept(message);
      // A buffer the message let go of goes back to the pool: write over it as the pool's next
      // user would. The test's own reference keeps the memory valid.
      for (ByteBuf piece : pieces) {
        if (piece.refCnt() > 1) {
          continue;
        }
        byte[] other = new byte[piece.readableBytes()];
        Arrays.fill(other, (byte) 0x5a);
        piece.setBytes(piece.readerIndex(), other);
      }
      released.countDown();

      Throwable refused = null;
      if (keep == null) {
        refused = executorFailure.get(GUARD_SECONDS, TimeUnit.SECONDS);
        // grpc-core neither closes nor cancels a call whose replay threw: only a transport
        // shutdown ends it.
        channel.shutdownNow();
      }
      Status status = closed.get(GUARD_SECONDS, TimeUnit.SECONDS);
      assertTrue(received.size() >= 1, "the first attempt reached the server");
      for (byte[] bytes : received) {
        assertArrayEquals(original, bytes, "the server received only the original bytes");
      }
      if (keep != null) {
        assertTrue(status.isOk(), status.toString());
        assertEquals(2, received.size(), "both attempts reached the server");
        for (ByteBuf piece : pieces) {
          assertEquals(1, piece.refCnt(), "freed at the call's close");
        }
      }
      return refused;
    } finally {
      PieceStreams.release(pieces);
    }
  }

  private static void assertRefused(Throwable refused, String why) {
    Status status = Status.fromThrowable(refused);
    assertEquals(Status.Code.FAILED_PRECONDITION, status.getCode(), status.toString());
    assertTrue(status.getDescription().contains(why), status.getDescription());
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
