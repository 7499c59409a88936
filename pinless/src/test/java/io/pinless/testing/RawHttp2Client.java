package io.pinless.testing;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http2.DefaultHttp2Headers;
import io.netty.handler.codec.http2.DefaultHttp2HeadersEncoder;
import io.netty.handler.codec.http2.Http2Exception;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.util.AsciiString;
import io.pinless.alts.handshake.AltsHandshakeResult;
import io.pinless.connection.RecordStage;
import io.pinless.tls.TlsHandshakeResult;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;

/**
 * An HTTP/2 client that sends gRPC request messages in the shapes a hostile peer picks: DATA
 * frames of a chosen size, taking turns across its streams, sealed (over ALTS or TLS) into records
 * of a chosen size. It keeps to flow control (the server's SETTINGS and WINDOW_UPDATEs), answers
 * SETTINGS and PINGs, and ends each burst with a PING whose ACK says the server has read every
 * byte before it. The messages it starts are longer than it ever sends, so they stay incomplete.
 *
 * <p>Over ALTS or TLS it sits after pinless's handshake handler and takes the record stage the
 * handshake gives; over plaintext it writes frames as they are. Confined to its event loop;
 * {@link #sendUntil} may be called from any thread.
 */
public final class RawHttp2Client extends ChannelDuplexHandler {
  private static final byte[] PREFACE =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
  private static final int DATA = 0x0;
  private static final int HEADERS = 0x1;
  private static final int RST_STREAM = 0x3;
  private static final int SETTINGS = 0x4;
  private static final int PING = 0x6;
  private static final int GOAWAY = 0x7;
  private static final int WINDOW_UPDATE = 0x8;
  private static final int FLAG_ACK = 0x1;
  private static final int FLAG_END_HEADERS = 0x4;
  private static final int SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
  /** HTTP/2's initial windows, until the server's SETTINGS and WINDOW_UPDATEs say otherwise. */
  private static final int DEFAULT_WINDOW = 65535;
  /** Plaintext gathered before a socket flush, so tiny records do not cost a write each. */
  private static final int FLUSH_BYTES = 64 * 1024;
  /** Records sealed before a socket flush: each may hold a buffer the engine sized for a whole one. */
  private static final int FLUSH_RECORDS = 256;

  private final boolean secure;
  private final String path;
  private final int streams;
  private final int messageBytes;
  private final int frameBytes;
  private final int recordBytes;
  private final CompletableFuture<Void> ready = new CompletableFuture<>();

  private ChannelHandlerContext ctx;
  /** The record stage once the handshake gave it; null over plaintext. */
  private RecordStage records;
  /** Received plaintext not yet parsed into frames. */
  private ByteBuf inbound;
  /** Plaintext written since the last record was sealed. */
  private int recordFill;
  /** Bytes written since the last socket flush. */
  private int unflushed;
  /** Records sealed since the last socket flush. */
  private int unflushedRecords;

  private long connectionWindow = DEFAULT_WINDOW;
  /** Whether the preface, SETTINGS and every stream's HEADERS are written. */
  private boolean streamsOpen;
  /** Whether the server's first SETTINGS has arrived. */
  private boolean serverSettingsSeen;
  private long initialStreamWindow = DEFAULT_WINDOW;
  private long[] streamWindows;
  /** Body bytes (the 5-byte gRPC prefix, then payload) each stream has sent. */
  private long[] sent;
  /** The body bytes per stream the current burst sends; -1 when none is under way. */
  private long target = -1;
  private int nextStream;
  private long pingCount;
  private CompletableFuture<Void> burst;
  /** Completes once the current burst is written to the socket; set by {@link #sendUntil}. */
  private volatile CompletableFuture<Void> written;
  private Throwable failure;

  /**
   * A client of {@code streams} streams to {@code path}, each starting a message of {@code
   * messageBytes}, sent in DATA frames of {@code frameBytes} and records of {@code recordBytes}.
   *
   * @param secure true after a pinless ALTS or TLS handshake handler, false over plaintext
   */
  public RawHttp2Client(boolean secure, String path, int streams, int messageBytes,
      int frameBytes, int recordBytes) {
    if (frameBytes < 1 || frameBytes > 16384 || recordBytes < 1) {
      throw new IllegalArgumentException(frameBytes + "-byte frames, " + recordBytes + "-byte records");
    }
    this.secure = secure;
    this.path = path;
    this.streams = streams;
    this.messageBytes = messageBytes;
    this.frameBytes = frameBytes;
    this.recordBytes = recordBytes;
  }

  /**
   * Completes once the bytes of the burst {@link #sendUntil} last started, its closing PING
   * included, are written to the socket (before the server need read them).
   */
  public CompletableFuture<Void> written() {
    return written;
  }

  /**
   * Completes once the streams are open and the server's first SETTINGS has arrived, or fails with
   * the connection's error. The server writes its connection WINDOW_UPDATE with that SETTINGS, so
   * a server loop blocked after this still lets the client use the server's windows.
   */
  public CompletableFuture<Void> ready() {
    return ready;
  }

  /** Payload bytes (the gRPC prefix excluded) every stream has sent so far. */
  public long payloadSent() {
    long total = 0;
    for (long s : sent) {
      total += Math.max(0, s - 5);
    }
    return total;
  }

  /**
   * Sends on every stream until each has sent {@code payloadBytes} of its message (all of it at
   * {@code messageBytes}; the stream stays open), then a PING. Completes when the server
   * acknowledges the PING, so it has read everything before it.
   */
  public CompletableFuture<Void> sendUntil(long payloadBytes) {
    if (payloadBytes > messageBytes) {
      throw new IllegalArgumentException(payloadBytes + " bytes of a " + messageBytes + "-byte message");
    }
    written = new CompletableFuture<>();
    CompletableFuture<Void> done = new CompletableFuture<>();
    ctx.executor().execute(() -> {
      if (failure != null) {
        done.completeExceptionally(failure);
        return;
      }
      burst = done;
      target = payloadBytes + 5;
      pump();
    });
    return done;
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    inbound = ctx.alloc().heapBuffer();
    streamWindows = new long[streams];
    sent = new long[streams];
    if (!secure && ctx.channel().isActive()) {
      start();
    }
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    if (!secure) {
      start();
    }
    ctx.fireChannelActive();
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    if (evt instanceof AltsHandshakeResult) {
      records = ((AltsHandshakeResult) evt).takeRecordStage();
      start();
    } else if (evt instanceof TlsHandshakeResult) {
      records = ((TlsHandshakeResult) evt).takeRecordStage();
      start();
    } else {
      ctx.fireUserEventTriggered(evt);
    }
  }

  /** @param msg owned: ciphertext (or plaintext), released here */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    ByteBuf in = (ByteBuf) msg;
    try {
      if (records == null) {
        inbound.writeBytes(in);
      } else {
        records.open(ctx, in, 0, (c, plaintext) -> {
          inbound.writeBytes(plaintext);
          plaintext.release();
        });
      }
      parseFrames();
    } catch (RuntimeException | Http2Exception e) {
      fail(e);
    } finally {
      in.release();
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    fail(new IllegalStateException("the server closed the connection"));
    ctx.fireChannelInactive();
  }

  @Override
  public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
    fail(cause);
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    inbound.release();
    if (records != null) {
      records.release();
      records = null;
    }
  }

  /** Sends the preface, SETTINGS and every stream's HEADERS. */
  private void start() {
    ByteBuf out = ctx.alloc().buffer();
    out.writeBytes(PREFACE);
    writeFrameHeader(out, 0, SETTINGS, 0, 0);
    DefaultHttp2HeadersEncoder hpack = new DefaultHttp2HeadersEncoder();
    Http2Headers headers = new DefaultHttp2Headers()
        .method("POST")
        .scheme(secure ? "https" : "http")
        .path(path)
        .authority("localhost")
        .add(AsciiString.of("content-type"), AsciiString.of("application/grpc"))
        .add(AsciiString.of("te"), AsciiString.of("trailers"));
    try {
      for (int i = 0; i < streams; i++) {
        streamWindows[i] = initialStreamWindow;
        ByteBuf block = ctx.alloc().buffer();
        try {
          hpack.encodeHeaders(streamId(i), headers, block);
          writeFrameHeader(out, block.readableBytes(), HEADERS, FLAG_END_HEADERS, streamId(i));
          out.writeBytes(block);
        } finally {
          block.release();
        }
      }
    } catch (Http2Exception e) {
      out.release();
      fail(e);
      return;
    }
    ctx.pipeline().get(FlushGate.class).held = true;
    emit(out);
    flushNow();
    streamsOpen = true;
    completeReady();
  }

  private void completeReady() {
    if (streamsOpen && serverSettingsSeen) {
      ready.complete(null);
    }
  }

  /** Writes DATA frames taking turns across streams while windows allow, up to the target. */
  private void pump() {
    if (target < 0 || failure != null) {
      return;
    }
    boolean progress = true;
    while (progress) {
      progress = false;
      for (int n = 0; n < streams; n++) {
        int i = nextStream;
        nextStream = (nextStream + 1) % streams;
        long room = Math.min(Math.min(connectionWindow, streamWindows[i]), target - sent[i]);
        int len = (int) Math.min(frameBytes, room);
        if (len <= 0 || (len < frameBytes && target - sent[i] > len)) {
          continue; // a short frame only at the end of a burst, not at a window's edge
        }
        ByteBuf frame = ctx.alloc().buffer(9 + len);
        writeFrameHeader(frame, len, DATA, 0, streamId(i));
        for (int k = 0; k < len; k++) {
          frame.writeByte(bodyByte(sent[i] + k));
        }
        emit(frame);
        sent[i] += len;
        streamWindows[i] -= len;
        connectionWindow -= len;
        progress = true;
      }
    }
    for (int i = 0; i < streams; i++) {
      if (sent[i] < target) {
        flushNow(); // waits for a WINDOW_UPDATE
        return;
      }
    }
    target = -1;
    ByteBuf ping = ctx.alloc().buffer(17);
    writeFrameHeader(ping, 8, PING, 0, 0);
    ping.writeLong(++pingCount);
    CompletableFuture<Void> burstWritten = written;
    ChannelPromise pingWritten = ctx.newPromise();
    pingWritten.addListener(f -> {
      if (f.isSuccess()) {
        burstWritten.complete(null);
      } else {
        burstWritten.completeExceptionally(f.cause());
      }
    });
    emit(ping, pingWritten);
    flushNow();
  }

  /** The byte at {@code offset} of a stream's body: the gRPC prefix, then a pattern. */
  private int bodyByte(long offset) {
    if (offset == 0) {
      return 0; // not compressed
    }
    if (offset < 5) {
      return messageBytes >>> (8 * (4 - (int) offset)) & 0xff;
    }
    return (int) (offset * 31 + 7) & 0xff;
  }

  /**
   * Writes plaintext, sealed into records of {@code recordBytes} when a record stage is in use.
   *
   * @param out owned: released once written
   */
  private void emit(ByteBuf out) {
    emit(out, null);
  }

  /**
   * @param out owned: released once written
   * @param promise completed once the last byte of {@code out} is written; null for none
   */
  private void emit(ByteBuf out, ChannelPromise promise) {
    if (records == null) {
      unflushed += out.readableBytes();
      ctx.write(out, promise == null ? ctx.voidPromise() : promise);
      return;
    }
    while (out.isReadable()) {
      int take = Math.min(out.readableBytes(), recordBytes - recordFill);
      boolean last = take == out.readableBytes();
      records.write(ctx, out.readRetainedSlice(take),
          last && promise != null ? promise : ctx.newPromise());
      recordFill += take;
      unflushed += take;
      if (recordFill == recordBytes) {
        sealRecord();
      }
    }
    out.release();
  }

  /** Seals what is queued into one record; the stage writes it to {@link FlushGate}. */
  private void sealRecord() {
    records.flush(ctx);
    recordFill = 0;
    if (unflushed >= FLUSH_BYTES || ++unflushedRecords >= FLUSH_RECORDS) {
      flushNow();
    }
  }

  private void flushNow() {
    if (records != null && recordFill > 0) {
      records.flush(ctx);
      recordFill = 0;
    }
    unflushed = 0;
    unflushedRecords = 0;
    FlushGate gate = ctx.pipeline().get(FlushGate.class);
    gate.held = false;
    ctx.flush();
    gate.held = true;
  }

  private void parseFrames() throws Http2Exception {
    while (inbound.readableBytes() >= 9) {
      int start = inbound.readerIndex();
      int length = inbound.getUnsignedMedium(start);
      if (inbound.readableBytes() < 9 + length) {
        break;
      }
      int type = inbound.getUnsignedByte(start + 3);
      int flags = inbound.getUnsignedByte(start + 4);
      int stream = inbound.getInt(start + 5) & 0x7fffffff;
      ByteBuf payload = inbound.slice(start + 9, length);
      inbound.skipBytes(9 + length);
      onFrame(type, flags, stream, payload);
    }
    inbound.discardReadBytes();
  }

  /** @param payload borrowed */
  private void onFrame(int type, int flags, int stream, ByteBuf payload) {
    switch (type) {
      case SETTINGS:
        if ((flags & FLAG_ACK) == 0) {
          serverSettingsSeen = true;
          completeReady();
          for (int p = 0; p + 6 <= payload.readableBytes(); p += 6) {
            if (payload.getUnsignedShort(p) == SETTINGS_INITIAL_WINDOW_SIZE) {
              long value = payload.getUnsignedInt(p + 2);
              for (int i = 0; i < streams; i++) {
                streamWindows[i] += value - initialStreamWindow;
              }
              initialStreamWindow = value;
            }
          }
          ByteBuf ack = ctx.alloc().buffer(9);
          writeFrameHeader(ack, 0, SETTINGS, FLAG_ACK, 0);
          emit(ack);
          flushNow();
          pump();
        }
        break;
      case WINDOW_UPDATE:
        long increment = payload.getUnsignedInt(0) & 0x7fffffffL;
        if (stream == 0) {
          connectionWindow += increment;
        } else {
          streamWindows[(stream - 1) / 2] += increment;
        }
        pump();
        break;
      case PING:
        if ((flags & FLAG_ACK) != 0) {
          if (payload.getLong(0) == pingCount && burst != null) {
            CompletableFuture<Void> done = burst;
            burst = null;
            done.complete(null);
          }
        } else {
          ByteBuf pong = ctx.alloc().buffer(17);
          writeFrameHeader(pong, 8, PING, FLAG_ACK, 0);
          pong.writeBytes(payload, 0, 8);
          emit(pong);
          flushNow();
        }
        break;
      case HEADERS:
      case RST_STREAM:
        fail(new IllegalStateException(
            "the server ended stream " + stream + " before its message was complete (frame type "
                + type + ")"));
        break;
      case GOAWAY:
        fail(new IllegalStateException("the server sent GOAWAY: "
            + payload.toString(8, payload.readableBytes() - 8, StandardCharsets.UTF_8)));
        break;
      default:
        break;
    }
  }

  private void fail(Throwable cause) {
    if (failure != null) {
      return;
    }
    failure = cause;
    ready.completeExceptionally(cause);
    if (burst != null) {
      burst.completeExceptionally(cause);
    }
  }

  private static int streamId(int index) {
    return 2 * index + 1;
  }

  /** @param out borrowed: a frame header is appended */
  private static void writeFrameHeader(ByteBuf out, int length, int type, int flags, int stream) {
    out.writeMedium(length).writeByte(type).writeByte(flags).writeInt(stream);
  }

  /**
   * Holds the channel's flushes back while the client writes, so records sealed one at a time
   * reach the socket in large writes. Goes first in the pipeline, before any handshake handler;
   * flushes pass until the client starts.
   */
  public static final class FlushGate extends ChannelDuplexHandler {
    private boolean held;

    @Override
    public void flush(ChannelHandlerContext ctx) {
      if (!held) {
        ctx.flush();
      }
    }
  }
}
