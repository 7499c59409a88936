package io.pinless.http2;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http2.DefaultHttp2FrameWriter;
import io.netty.handler.codec.http2.DefaultHttp2Headers;
import io.netty.handler.codec.http2.Http2CodecUtil;
import io.netty.handler.codec.http2.Http2Flags;
import io.netty.handler.codec.http2.Http2Settings;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

/** Test support: HTTP/2 byte streams written by Netty's own frame writer, and a frame parser. */
public final class Http2Recording {
  private Http2Recording() {}

  /** A client's stream: preface, SETTINGS, HEADERS, DATA of many sizes, control frames. */
  static byte[] clientStream(int... dataSizes) {
    return clientStreamInFrames(Http2CodecUtil.DEFAULT_MAX_FRAME_SIZE, dataSizes);
  }

  /**
   * As {@link #clientStream}, written to a peer that advertised {@code maxFrameSize}: DATA
   * payloads longer than that are written as several frames.
   */
  static byte[] clientStreamInFrames(int maxFrameSize, int... dataSizes) {
    EmbeddedChannel ch = new EmbeddedChannel(new ChannelInboundHandlerAdapter());
    ChannelHandlerContext ctx = ch.pipeline().firstContext();
    DefaultHttp2FrameWriter w = new DefaultHttp2FrameWriter();
    try {
      w.maxFrameSize(maxFrameSize);
    } catch (io.netty.handler.codec.http2.Http2Exception e) {
      throw new IllegalArgumentException(e);
    }
    ch.writeOutbound(Http2CodecUtil.connectionPrefaceBuf());
    w.writeSettings(ctx, new Http2Settings().initialWindowSize(1 << 20), ctx.newPromise());
    w.writeHeaders(
        ctx, 1, new DefaultHttp2Headers().method("POST").path("/svc/M").scheme("http"), 0, false,
        ctx.newPromise());
    int i = 0;
    for (int size : dataSizes) {
      w.writeData(ctx, 1, Unpooled.wrappedBuffer(pattern(size, i++)), 0, false, ctx.newPromise());
      if (i % 2 == 0) {
        w.writeWindowUpdate(ctx, 0, 1000, ctx.newPromise());
        w.writePing(ctx, false, 42L + i, ctx.newPromise());
      }
    }
    w.writeData(ctx, 1, Unpooled.EMPTY_BUFFER, 0, true, ctx.newPromise());
    w.writeRstStream(ctx, 3, 8, ctx.newPromise());
    w.writeFrame(ctx, (byte) 0x42, 0, new Http2Flags(), Unpooled.wrappedBuffer(new byte[7]),
        ctx.newPromise()); // an unknown frame type: passed on like any other
    ch.flush();
    byte[] out = drain(ch);
    ch.finishAndReleaseAll();
    return out;
  }

  static byte[] drain(EmbeddedChannel ch) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    Object o;
    while ((o = ch.readOutbound()) != null) {
      ByteBuf b = (ByteBuf) o;
      out.writeBytes(ByteBufUtil.getBytes(b));
      b.release();
    }
    return out.toByteArray();
  }

  /** A frame: its type, its length, and where it starts in the stream. */
  public record Frame(int type, int length, int offset) {}

  /**
   * Parses {@code bytes} as whole frames (after {@code skip} bytes).
   *
   * @throws AssertionError if the bytes end inside a frame
   */
  static List<Frame> frames(byte[] bytes, int skip) {
    List<Frame> frames = wholeFrames(bytes, skip);
    int end = frames.isEmpty() ? skip : frames.get(frames.size() - 1).offset() + 9
        + frames.get(frames.size() - 1).length();
    if (end < bytes.length) {
      throw new AssertionError("a frame cut at " + end + " of " + bytes.length);
    }
    return frames;
  }

  /**
   * The whole frames of {@code bytes} (after {@code skip} bytes), up to a frame the bytes end
   * inside (as a copy of a connection's bytes taken while it runs may).
   */
  public static List<Frame> wholeFrames(byte[] bytes, int skip) {
    List<Frame> frames = new ArrayList<>();
    int pos = skip;
    while (bytes.length - pos >= 9) {
      int length = (bytes[pos] & 0xff) << 16 | (bytes[pos + 1] & 0xff) << 8 | (bytes[pos + 2] & 0xff);
      if (bytes.length - pos - 9 < length) {
        break;
      }
      frames.add(new Frame(bytes[pos + 3] & 0xff, length, pos));
      pos += 9 + length;
    }
    return frames;
  }

  /**
   * The frames of {@code bytes} (after {@code skip} bytes) as the peer meant them: each frame as
   * type, flags, stream and payload, with consecutive DATA frames of one stream merged until one
   * that ends the stream. A stream and the same stream with its DATA frames split at any points
   * (END_STREAM on the last piece only) give equal lists.
   */
  static List<String> meaning(byte[] bytes, int skip) {
    List<String> out = new ArrayList<>();
    java.io.ByteArrayOutputStream data = null;
    int dataStream = -1;
    for (Frame f : frames(bytes, skip)) {
      int flags = bytes[f.offset() + 4] & 0xff;
      int stream = java.nio.ByteBuffer.wrap(bytes, f.offset() + 5, 4).getInt() & 0x7fffffff;
      byte[] payload = Arrays.copyOfRange(bytes, f.offset() + 9, f.offset() + 9 + f.length());
      if (f.type() == 0 && data != null && stream == dataStream) {
        data.writeBytes(payload);
      } else {
        if (data != null) {
          out.add("DATA stream " + dataStream + " open " + HexFormat.of().formatHex(data.toByteArray()));
          data = null;
        }
        if (f.type() == 0) {
          data = new java.io.ByteArrayOutputStream();
          data.writeBytes(payload);
          dataStream = stream;
        } else {
          out.add("type " + f.type() + " flags " + flags + " stream " + stream + " "
              + HexFormat.of().formatHex(payload));
        }
      }
      if (f.type() == 0 && (flags & 1) != 0) {
        out.add("DATA stream " + dataStream + " ended " + HexFormat.of().formatHex(data.toByteArray()));
        data = null;
      }
    }
    if (data != null) {
      out.add("DATA stream " + dataStream + " open " + HexFormat.of().formatHex(data.toByteArray()));
    }
    return out;
  }

  static byte[] pattern(int length, int seed) {
    byte[] b = new byte[length];
    for (int i = 0; i < length; i++) {
      b[i] = (byte) (i * 31 + seed);
    }
    return b;
  }
}
