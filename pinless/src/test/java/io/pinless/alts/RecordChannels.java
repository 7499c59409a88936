package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

/** Test support: channels around the record handlers, and what comes out of them. */
final class RecordChannels {
  static final byte[] KEY44 = new byte[44];
  static final byte[] KEY16 = new byte[16];

  static {
    for (int i = 0; i < KEY44.length; i++) {
      KEY44[i] = (byte) (i * 7 + 3);
    }
    System.arraycopy(KEY44, 0, KEY16, 0, 16);
  }

  private RecordChannels() {}

  /** Collects what a decoder fires: plaintext (copied, then released), errors, inactivity. */
  static final class Capture extends ChannelInboundHandlerAdapter {
    final ByteArrayOutputStream plaintext = new ByteArrayOutputStream();
    final List<Throwable> errors = new ArrayList<>();
    final List<Object> others = new ArrayList<>();
    int reads;
    boolean inactive;

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      if (msg instanceof ByteBuf) {
        ByteBuf buf = (ByteBuf) msg;
        try {
          plaintext.writeBytes(ByteBufUtil.getBytes(buf));
          reads++;
        } finally {
          buf.release();
        }
      } else {
        others.add(msg);
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      errors.add(cause);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      inactive = true;
    }

    byte[] bytes() {
      return plaintext.toByteArray();
    }

    /** The single error, which must be an AltsRecordException. */
    /** The one error, an AltsRecordException or (from a record stage) a status caused by one. */
    AltsRecordException onlyError() {
      Throwable error = errors.size() == 1 ? errors.get(0) : null;
      if (error instanceof io.grpc.StatusRuntimeException) {
        error = error.getCause();
      }
      if (!(error instanceof AltsRecordException)) {
        throw new AssertionError("expected one AltsRecordException, got " + errors);
      }
      return (AltsRecordException) error;
    }
  }

  /**
   * Records close requests and, while {@link #hold} is set, keeps the channel open so a test can
   * show what a handler does with reads that arrive after it asked to close.
   */
  static final class CloseRecorder extends io.netty.channel.ChannelOutboundHandlerAdapter {
    int closes;
    boolean hold = true;

    @Override
    public void close(ChannelHandlerContext ctx, io.netty.channel.ChannelPromise promise) {
      closes++;
      if (hold) {
        promise.setSuccess();
      } else {
        ctx.close(promise);
      }
    }
  }

  /** A channel with a close recorder, a decoder and a {@link Capture} behind it. */
  static EmbeddedChannel decoderChannel(
      CloseRecorder closer, AltsRecordDecoder decoder, Capture capture) {
    return new EmbeddedChannel(closer, decoder, capture);
  }

  /**
   * Seals each message as its own flush with a fresh encoder and returns the frames' bytes.
   */
  static byte[] encode(
      AltsRecordProtocol protocol, byte[] key, boolean isClient, int maxFrameSize,
      byte[]... messages) {
    EmbeddedChannel ch = new EmbeddedChannel(new AltsRecordEncoder(protocol, key, isClient, maxFrameSize));
    for (byte[] m : messages) {
      ch.writeOutbound(direct(m));
    }
    byte[] out = drainOutbound(ch);
    ch.finishAndReleaseAll();
    return out;
  }

  /** Reads, concatenates and releases every outbound buffer of {@code ch}. */
  static byte[] drainOutbound(EmbeddedChannel ch) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteBuf b;
    while ((b = ch.readOutbound()) != null) {
      try {
        out.writeBytes(ByteBufUtil.getBytes(b));
      } finally {
        b.release();
      }
    }
    return out.toByteArray();
  }

  /** @return owned: a pooled direct buffer holding {@code bytes}, to release or hand on */
  static ByteBuf direct(byte[] bytes) {
    return direct(bytes, 0, bytes.length);
  }

  /** @return owned: a pooled direct buffer holding a range of {@code bytes}, to release */
  static ByteBuf direct(byte[] bytes, int offset, int length) {
    ByteBuf b = PooledByteBufAllocator.DEFAULT.directBuffer(length);
    b.writeBytes(bytes, offset, length);
    return b;
  }

  /**
   * Feeds {@code stream} to {@code ch} in reads of {@code chunk} bytes, until it closes. Reads of
   * up to 64 bytes wrap the array (heap buffers the leak detector does not trace, so that
   * byte-by-byte feeds of large streams stay fast); larger reads are pooled direct buffers like
   * a socket's.
   */
  static void feed(EmbeddedChannel ch, byte[] stream, int chunk) {
    for (int i = 0; i < stream.length && ch.isOpen(); i += chunk) {
      int n = Math.min(chunk, stream.length - i);
      ch.writeInbound(chunk <= 64 ? Unpooled.wrappedBuffer(stream, i, n) : direct(stream, i, n));
    }
  }

  /** Deterministic test bytes. */
  static byte[] pattern(int length, int seed) {
    byte[] b = new byte[length];
    int x = seed * 0x9E3779B9 + 1;
    for (int i = 0; i < length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      b[i] = (byte) x;
    }
    return b;
  }

  /** Concatenates arrays. */
  static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }

  /** Little-endian u32 into {@code b} at {@code offset}. */
  static void putIntLE(byte[] b, int offset, long value) {
    for (int i = 0; i < 4; i++) {
      b[offset + i] = (byte) (value >>> (8 * i));
    }
  }
}
