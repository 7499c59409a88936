package io.pinless.grpc;

import io.grpc.Drainable;
import io.grpc.KnownLength;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * The bytes of a list of buffers, read in order by advancing their positions, for gRPC to send;
 * drains them without an intermediate copy. Keeps a hold on the received buffers behind them, if
 * any, until the first close.
 */
final class BufferStream extends InputStream implements KnownLength, Drainable {
  /** Bytes per write when draining a buffer with no array. */
  private static final int DRAIN_CHUNK = 8192;

  /** Borrowed: valid while the hold is kept; read by advancing their positions. */
  private final List<ByteBuffer> buffers;
  /** Index of the first buffer with bytes left. */
  private int current;
  /** Bytes left over all buffers. */
  private long left;
  /** The received buffers behind them, held until the first close; null when none. */
  private ReceivedBuffers held;

  BufferStream(List<ByteBuffer> buffers, long size, ReceivedBuffers held) {
    this.buffers = buffers;
    this.left = size;
    this.held = held;
  }

  /** The bytes of {@code bytes}, which must not change; holds nothing. */
  static BufferStream of(byte[] bytes) {
    return new BufferStream(List.of(ByteBuffer.wrap(bytes)), bytes.length, null);
  }

  /** Drops the hold on the received buffers; reads after it see the end of the stream. */
  @Override
  public void close() {
    current = buffers.size();
    left = 0;
    if (held != null) {
      ReceivedBuffers hold = held;
      held = null;
      hold.unhold();
    }
  }

  /** The first buffer with bytes left, or null at the end. */
  private ByteBuffer head() {
    while (current < buffers.size()) {
      ByteBuffer b = buffers.get(current);
      if (b.hasRemaining()) {
        return b;
      }
      current++;
    }
    return null;
  }

  @Override
  public int read() {
    ByteBuffer b = head();
    if (b == null) {
      return -1;
    }
    left--;
    return b.get() & 0xff;
  }

  @Override
  public int read(byte[] dest, int offset, int length) {
    if (length == 0) {
      return 0;
    }
    ByteBuffer b = head();
    if (b == null) {
      return -1;
    }
    int n = Math.min(length, b.remaining());
    b.get(dest, offset, n);
    left -= n;
    return n;
  }

  @Override
  public int available() {
    return (int) Math.min(Integer.MAX_VALUE, left);
  }

  @Override
  public int drainTo(OutputStream target) throws IOException {
    int drained = 0;
    byte[] chunk = null;
    for (ByteBuffer b; (b = head()) != null; ) {
      int n = b.remaining();
      if (b.hasArray()) {
        target.write(b.array(), b.arrayOffset() + b.position(), n);
        b.position(b.limit());
      } else {
        if (chunk == null) {
          chunk = new byte[Math.min(DRAIN_CHUNK, n)];
        }
        while (b.hasRemaining()) {
          int part = Math.min(chunk.length, b.remaining());
          b.get(chunk, 0, part);
          target.write(chunk, 0, part);
        }
      }
      drained += n;
      left -= n;
    }
    return drained;
  }
}
