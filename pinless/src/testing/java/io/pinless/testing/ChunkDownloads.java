package io.pinless.testing;

import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.MethodDescriptor;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The client side of {@link ChunkService}'s download, for measuring a receive path: each chunk is
 * parsed by the marshaller under test, checked at a few bytes, and let go.
 *
 * <p>A few bytes, not all: {@link ChunkService#matches} reads every byte of a chunk, which would
 * add the same cost to every marshaller compared and hide their difference. The offset, the size
 * and the first, middle and last bytes are checked, enough to catch a chunk parsed from the wrong
 * buffer or a buffer reused before its release.
 */
public final class ChunkDownloads {
  private ChunkDownloads() {}

  /**
   * Downloads {@code count} chunks of {@code size} bytes through {@code method} (one of {@link
   * ChunkService#download}). Each chunk is checked, then goes to {@code release}, which lets go of
   * the buffers a zero-copy parse kept.
   *
   * @return completes with the data bytes received, or with the first failure
   */
  public static CompletableFuture<Long> download(Channel channel,
      MethodDescriptor<ChunkRequest, Chunk> method, int count, int size, Consumer<Chunk> release) {
    CompletableFuture<Long> done = new CompletableFuture<>();
    ClientCalls.asyncServerStreamingCall(channel.newCall(method, CallOptions.DEFAULT),
        ChunkService.request(count, size),
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
    if (size == 0) {
      return null;
    }
    for (int i : new int[] {0, size / 2, size - 1}) {
      byte expected = ChunkService.content(offset + i, 1).byteAt(0);
      if (data.byteAt(i) != expected) {
        return "chunk at " + offset + ": byte " + i + " is " + data.byteAt(i) + ", not " + expected;
      }
    }
    return null;
  }
}
