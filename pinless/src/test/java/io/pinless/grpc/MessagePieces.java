package io.pinless.grpc;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;

/**
 * A received message cut into pieces as fuzz input chooses: where the cuts fall, whether each
 * piece is a direct or a heap buffer, and whether it offers an NIO buffer. The test keeps one
 * reference of every piece, to check what the marshaller gave back.
 */
final class MessagePieces implements AutoCloseable {
  /** Most pieces a message is cut into. */
  private static final int MAX_PIECES = 12;

  /** The pieces, in order; each with one reference of the test's. */
  final List<ByteBuf> pieces = new ArrayList<>();
  private final boolean[] byteBuffers;

  /** Cuts {@code bytes} as {@code data} chooses. */
  MessagePieces(byte[] bytes, FuzzedDataProvider data) {
    int count = bytes.length == 0 ? 1 : data.consumeInt(1, Math.min(MAX_PIECES, bytes.length));
    int[] cuts = new int[count + 1];
    cuts[count] = bytes.length;
    for (int i = 1; i < count; i++) {
      cuts[i] = data.consumeInt(cuts[i - 1], bytes.length);
    }
    byteBuffers = new boolean[count];
    for (int i = 0; i < count; i++) {
      int n = cuts[i + 1] - cuts[i];
      boolean direct = data.consumeBoolean();
      byteBuffers[i] = data.consumeProbabilityDouble() < 0.9;
      ByteBuf b =
          direct
              ? PooledByteBufAllocator.DEFAULT.directBuffer(n)
              : PooledByteBufAllocator.DEFAULT.heapBuffer(n);
      pieces.add(b.writeBytes(bytes, cuts[i], n).retain());
    }
  }

  /** A message stream over the pieces, as gRPC's deframer opens one. */
  InputStream open() {
    return PieceStreams.open(pieces, byteBuffers);
  }

  /** Whether the marshaller and gRPC's stream gave back every piece: only the test holds them. */
  boolean onlyTheTestHolds() {
    for (ByteBuf b : pieces) {
      if (b.refCnt() != 1) {
        return false;
      }
    }
    return true;
  }

  /** Writes over the pieces only the test holds, as their pool's next user would. */
  void overwriteFreed() {
    PieceStreams.overwrite(pieces);
  }

  /** Releases the test's references. */
  @Override
  public void close() {
    for (ByteBuf b : pieces) {
      b.release();
    }
  }
}
