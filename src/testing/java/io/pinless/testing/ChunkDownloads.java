package io.pinless.testing;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A download of {@link Chunk} messages for measuring the receive path: the server streams chunks
 * it encoded once, and the client parses each with the marshaller under test, checks a few of its
 * bytes and lets it go.
 *
 * <p>The server does not build or serialize a message per send. Each chunk goes out as its
 * encoded fields: a few bytes of header (the offset, the data field's tag and length), then the
 * data array shared by every chunk, drained into gRPC's framer in two writes. So the server's
 * cost is the same whatever the client does, and a comparison of two clients on one server
 * measures their receive paths.
 *
 * <pre>
 *   Chunk i on the wire:  08 varint(i * size) | 12 varint(size) | data[size] (shared)
 * </pre>
 */
public final class ChunkDownloads {
  /** The service's name; its one method is {@code Download}. */
  public static final String SERVICE = "pinless.testing.ChunkDownloads";

  private static final MethodDescriptor.Marshaller<ChunkRequest> REQUESTS =
      ProtoUtils.marshaller(ChunkRequest.getDefaultInstance());

  /** The server's side of a chunk: its encoded bytes, streamed, never parsed. */
  private static final MethodDescriptor.Marshaller<EncodedChunk> ENCODED =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(EncodedChunk chunk) {
          return new EncodedChunkStream(chunk);
        }

        @Override
        public EncodedChunk parse(InputStream stream) {
          throw new UnsupportedOperationException("the server only sends chunks");
        }
      };

  private static final MethodDescriptor<ChunkRequest, EncodedChunk> SERVED =
      MethodDescriptor.<ChunkRequest, EncodedChunk>newBuilder()
          .setType(MethodDescriptor.MethodType.SERVER_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Download"))
          .setRequestMarshaller(REQUESTS)
          .setResponseMarshaller(ENCODED)
          .build();

  private ChunkDownloads() {}

  /** A chunk as the server sends it: its header bytes, then the shared data. */
  private record EncodedChunk(byte[] header, byte[] data) {}

  /** An encoded chunk that gRPC sizes and drains into its framer without a scratch copy. */
  private static final class EncodedChunkStream extends InputStream
      implements KnownLength, io.grpc.Drainable {
    private final byte[] header;
    private final byte[] data;
    /** Bytes read so far, header first. */
    private int position;

    EncodedChunkStream(EncodedChunk chunk) {
      this.header = chunk.header();
      this.data = chunk.data();
    }

    @Override
    public int available() {
      return header.length + data.length - position;
    }

    @Override
    public int read() {
      if (available() == 0) {
        return -1;
      }
      int i = position++;
      return (i < header.length ? header[i] : data[i - header.length]) & 0xff;
    }

    @Override
    public int read(byte[] into, int offset, int length) {
      if (length == 0) {
        return 0;
      }
      if (available() == 0) {
        return -1;
      }
      int n = 0;
      if (position < header.length) {
        n = Math.min(length, header.length - position);
        System.arraycopy(header, position, into, offset, n);
      } else {
        n = Math.min(length, available());
        System.arraycopy(data, position - header.length, into, offset, n);
      }
      position += n;
      return n;
    }

    @Override
    public int drainTo(OutputStream target) throws IOException {
      int n = available();
      if (position < header.length) {
        target.write(header, position, header.length - position);
        position = header.length;
      }
      target.write(data, position - header.length, data.length - (position - header.length));
      position = header.length + data.length;
      return n;
    }
  }

  /** The byte at {@code index} of every chunk's data. */
  public static byte dataByte(int index) {
    return (byte) (index * 31 + 7);
  }

  /**
   * The service: {@code Download} streams {@code count} chunks of {@code size} data bytes, sent
   * only while the stream is ready. The data array is made once per size asked for.
   */
  public static ServerServiceDefinition service() {
    java.util.Map<Integer, byte[]> dataBySize = new java.util.concurrent.ConcurrentHashMap<>();
    return ServerServiceDefinition.builder(SERVICE)
        .addMethod(SERVED, ServerCalls.asyncServerStreamingCall((request, out) -> {
          int count = request.getCount();
          int size = request.getSize();
          if (count < 0 || size < 0) {
            out.onError(Status.INVALID_ARGUMENT
                .withDescription("count " + count + " and size " + size + " must not be negative")
                .asRuntimeException());
            return;
          }
          byte[] data = dataBySize.computeIfAbsent(size, ChunkDownloads::data);
          ServerCallStreamObserver<EncodedChunk> stream = (ServerCallStreamObserver<EncodedChunk>) out;
          int[] sent = {0};
          Runnable send = () -> {
            while (sent[0] < count && stream.isReady()) {
              stream.onNext(new EncodedChunk(header((long) sent[0] * size, size), data));
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

  private static byte[] data(int size) {
    byte[] data = new byte[size];
    for (int i = 0; i < size; i++) {
      data[i] = dataByte(i);
    }
    return data;
  }

  /** Field 1 (offset, a varint) and the tag and length of field 2 (data). */
  private static byte[] header(long offset, int size) {
    int length = (offset == 0 ? 0 : CodedOutputStream.computeInt64Size(1, offset))
        + CodedOutputStream.computeTagSize(2) + CodedOutputStream.computeUInt32SizeNoTag(size);
    byte[] header = new byte[length];
    CodedOutputStream out = CodedOutputStream.newInstance(header);
    try {
      if (offset != 0) {
        out.writeInt64(1, offset);
      }
      out.writeTag(2, com.google.protobuf.WireFormat.WIRETYPE_LENGTH_DELIMITED);
      out.writeUInt32NoTag(size);
      out.checkNoSpaceLeft();
    } catch (IOException e) {
      throw new IllegalStateException("a header of " + length + " bytes", e);
    }
    return header;
  }

  /** The client's method, whose responses {@code chunks} parses. */
  public static MethodDescriptor<ChunkRequest, Chunk> download(
      MethodDescriptor.Marshaller<Chunk> chunks) {
    return SERVED.toBuilder(REQUESTS, chunks).build();
  }

  /**
   * Downloads {@code count} chunks of {@code size} bytes through {@code method}. Each chunk's
   * offset, size and first, middle and last data bytes are checked, then it goes to {@code
   * release} (which lets go of the buffers a zero-copy parse kept).
   *
   * @return completes with the data bytes received, or with the first failure
   */
  public static CompletableFuture<Long> download(Channel channel,
      MethodDescriptor<ChunkRequest, Chunk> method, int count, int size, Consumer<Chunk> release) {
    CompletableFuture<Long> done = new CompletableFuture<>();
    ClientCalls.asyncServerStreamingCall(channel.newCall(method, CallOptions.DEFAULT),
        ChunkRequest.newBuilder().setCount(count).setSize(size).build(),
        new StreamObserver<Chunk>() {
          private long bytes;
          private int received;
          private String failure;

          @Override
          public void onNext(Chunk chunk) {
            try {
              if (failure == null) {
                failure = check(chunk, (long) received * size, size);
              }
              bytes += chunk.getData().size();
              received++;
            } finally {
              release.accept(chunk);
            }
          }

          @Override
          public void onError(Throwable t) {
            done.completeExceptionally(t);
          }

          @Override
          public void onCompleted() {
            if (failure == null && received != count) {
              failure = "received " + received + " of " + count + " chunks";
            }
            if (failure != null) {
              done.completeExceptionally(new IllegalStateException(failure));
            } else {
              done.complete(bytes);
            }
          }
        });
    return done;
  }

  /** What is wrong with {@code chunk}, or null. */
  private static String check(Chunk chunk, long offset, int size) {
    ByteString data = chunk.getData();
    if (chunk.getOffset() != offset || data.size() != size) {
      return "chunk at " + chunk.getOffset() + " of " + data.size() + " bytes, expected at "
          + offset + " of " + size;
    }
    for (int i : new int[] {0, size / 2, size - 1}) {
      if (size > 0 && data.byteAt(i) != dataByte(i)) {
        return "chunk at " + offset + ": byte " + i + " is " + data.byteAt(i);
      }
    }
    return null;
  }
}
