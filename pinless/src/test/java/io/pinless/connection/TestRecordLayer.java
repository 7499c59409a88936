package io.pinless.connection;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.CorruptedFrameException;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongToIntFunction;

/**
 * Test support: a record layer over {@link RecordFraming} whose records carry their body as
 * plaintext (no cipher), with the header check a test gives, as a pipeline entry. A record's
 * body of all 0xEE bytes fails to open, to reach the path of a record that does not open.
 */
public final class TestRecordLayer extends RecordFraming {
  /** The byte a body made of it alone fails to open. */
  public static final byte POISON = (byte) 0xEE;

  private final int headerSize;
  private final LongToIntFunction recordBytes;

  /**
   * @param headerSize the bytes of a header
   * @param recordBytes the whole record's size from a header, or the layer's exception
   */
  public TestRecordLayer(int headerSize, LongToIntFunction recordBytes) {
    super(headerSize);
    this.headerSize = headerSize;
    this.recordBytes = recordBytes;
  }

  /** TLS's framing: type u8, version u16, length u16, at most 2^14 + 2048 bytes of body. */
  public static TestRecordLayer tlsLike() {
    return new TestRecordLayer(5, header -> {
      int length = (int) header & 0xffff;
      if (length > (1 << 14) + 2048) {
        throw new CorruptedFrameException("record length " + length + " exceeds 18432");
      }
      return 5 + length;
    });
  }

  @Override
  protected int recordBytes(long header) {
    return recordBytes.applyAsInt(header);
  }

  @Override
  protected int plaintextBound(int recordBytes) {
    return recordBytes - headerSize();
  }

  @Override
  protected ByteBuf allocateOutput(ChannelHandlerContext ctx, int headroom, int plaintextBytes) {
    return ctx.alloc().directBuffer(headroom + plaintextBytes)
        .writerIndex(headroom).readerIndex(headroom);
  }

  @Override
  protected void openRecord(ByteBuf record, int start, int recordBytes, ByteBuf out) {
    int body = recordBytes - headerSize();
    boolean poisoned = body > 0;
    for (int i = 0; i < body && poisoned; i++) {
      poisoned = record.getByte(start + headerSize() + i) == POISON;
    }
    if (poisoned) {
      throw new CorruptedFrameException("a poisoned record of " + recordBytes + " bytes");
    }
    out.writeBytes(record, start + headerSize(), body);
  }

  @Override
  protected RuntimeException truncated(String what) {
    return new CorruptedFrameException("closed after " + what);
  }

  @Override
  protected int freshReadBytes(int largestRecordBytes) {
    return 3 * 16 * 1024;
  }

  private int headerSize() {
    return headerSize;
  }

  /** Runs {@code layer} as a pipeline entry; collects plaintext and errors. */
  public static final class Handler extends ChannelInboundHandlerAdapter {
    public final TestRecordLayer layer;
    public final ByteArrayOutputStream plaintext = new ByteArrayOutputStream();
    public final List<RuntimeException> errors = new ArrayList<>();

    public Handler(TestRecordLayer layer) {
      this.layer = layer;
    }

    /** @param msg owned: released here */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf in = (ByteBuf) msg;
      try {
        layer.openRecords(ctx, in, 0, (c, out) -> {
          try {
            byte[] b = new byte[out.readableBytes()];
            out.readBytes(b);
            plaintext.writeBytes(b);
          } finally {
            out.release();
          }
        });
      } catch (RuntimeException e) {
        errors.add(e);
      } finally {
        in.release();
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      try {
        layer.endOfInput();
      } catch (RuntimeException e) {
        errors.add(e);
      }
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
      layer.releasePartial();
    }
  }
}
