package io.pinless.testing;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A download service for tests and benchmarks, with no generated gRPC code. {@link #DOWNLOAD}
 * answers a {@link ChunkRequest} with {@code count} {@link Chunk}s of {@code size} bytes, at
 * offsets 0, size, 2 size, and so on. A chunk's bytes are a function of its offset
 * ({@link #content}), so a client checks each one with {@link #matches}.
 *
 * <p>The server is cheap, so that a benchmark measures the client: the bytes of every chunk are
 * a substring of one pattern per size, built once. It sends only while the call is ready, so a
 * slow client makes it wait rather than buffer the whole download.
 */
public final class ChunkService {
  /** The service's name. */
  public static final String SERVICE = "pinless.testing.Chunks";

  /** The download method, parsing and serializing with {@link ProtoLiteUtils}. */
  public static final MethodDescriptor<ChunkRequest, Chunk> DOWNLOAD =
      MethodDescriptor.<ChunkRequest, Chunk>newBuilder()
          .setType(MethodDescriptor.MethodType.SERVER_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Download"))
          .setRequestMarshaller(ProtoLiteUtils.marshaller(ChunkRequest.getDefaultInstance()))
          .setResponseMarshaller(ProtoLiteUtils.marshaller(Chunk.getDefaultInstance()))
          .build();

  /** Period of the content in bytes; prime, so chunks at different offsets rarely look alike. */
  private static final int PERIOD = 65521;

  /** Per chunk size, {@code size + PERIOD} bytes of content from offset 0. */
  private static final ConcurrentHashMap<Integer, ByteString> PATTERNS = new ConcurrentHashMap<>();

  private ChunkService() {}

  /** {@link #DOWNLOAD} with {@code responses} parsing the chunks, for a client. */
  public static MethodDescriptor<ChunkRequest, Chunk> download(
      MethodDescriptor.Marshaller<Chunk> responses) {
    return DOWNLOAD.toBuilder(DOWNLOAD.getRequestMarshaller(), responses).build();
  }

  /** The service, for {@code ServerBuilder.addService}. */
  public static ServerServiceDefinition service() {
    return ServerServiceDefinition.builder(SERVICE)
        .addMethod(
            DOWNLOAD,
            ServerCalls.asyncServerStreamingCall(
                (request, responses) ->
                    new Sender(request, (ServerCallStreamObserver<Chunk>) responses).start()))
        .build();
  }

  /** A request for {@code count} chunks of {@code size} bytes. */
  public static ChunkRequest request(int count, int size) {
    return ChunkRequest.newBuilder().setCount(count).setSize(size).build();
  }

  /**
   * The bytes of the download from {@code offset}, {@code size} of them: a substring of a shared
   * pattern, no copy.
   */
  public static ByteString content(long offset, int size) {
    ByteString pattern = PATTERNS.computeIfAbsent(size, ChunkService::pattern);
    int start = (int) Math.floorMod(offset, (long) PERIOD);
    return pattern.substring(start, start + size);
  }

  /** Whether the bytes of {@code chunk} are those of the download at its offset. */
  public static boolean matches(Chunk chunk) {
    return chunk.getData().equals(content(chunk.getOffset(), chunk.getData().size()));
  }

  /** The chunk at {@code index} of a download of {@code size}-byte chunks. */
  public static Chunk chunk(int index, int size) {
    long offset = (long) index * size;
    return Chunk.newBuilder().setOffset(offset).setData(content(offset, size)).build();
  }

  private static ByteString pattern(int size) {
    byte[] bytes = new byte[size + PERIOD];
    for (int i = 0; i < bytes.length; i++) {
      bytes[i] = at(i % PERIOD);
    }
    return ByteString.copyFrom(bytes);
  }

  /** The byte at position {@code p} of the period: a multiplicative hash. */
  private static byte at(int p) {
    return (byte) ((p * 0x9E3779B1L) >>> 13);
  }

  /** Sends the chunks of one call while it is ready. */
  private static final class Sender {
    /** Chunks to send in all. */
    private final int count;
    /** Bytes per chunk. */
    private final int size;
    private final ServerCallStreamObserver<Chunk> responses;
    /** Chunks sent so far; touched only on the call's serialized executor. */
    private int sent;
    /** Set once completed or cancelled. */
    private boolean done;

    Sender(ChunkRequest request, ServerCallStreamObserver<Chunk> responses) {
      this.count = request.getCount();
      this.size = request.getSize();
      this.responses = responses;
    }

    /** Runs in the method handler, which the call serializes with its ready callbacks. */
    void start() {
      if (count < 0 || size < 0) {
        responses.onError(
            Status.INVALID_ARGUMENT
                .withDescription("count " + count + " and size " + size + " must be >= 0")
                .asRuntimeException());
        return;
      }
      responses.setOnCancelHandler(() -> done = true);
      responses.setOnReadyHandler(this::send);
      send();
    }

    private void send() {
      while (!done && sent < count && responses.isReady()) {
        responses.onNext(chunk(sent, size));
        sent++;
      }
      if (!done && sent == count) {
        done = true;
        responses.onCompleted();
      }
    }
  }
}
