package io.pinless.connection;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.CorruptedFrameException;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ReadBudget;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;
import io.pinless.testing.ReadCounter;
import org.junit.jupiter.api.Test;

class ConnectionHandlerTest {
  /** Keeps what reaches the end of the pipeline, asks for a read per batch, records errors. */
  private static final class Tail extends ChannelInboundHandlerAdapter {
    final List<ByteBuf> received = new ArrayList<>();
    final List<String> events = new ArrayList<>();

    /** @param msg owned: kept until {@link #bytes} */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      received.add((ByteBuf) msg);
      events.add("read");
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      ctx.read();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      events.add("error " + cause.getMessage());
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      events.add("inactive");
    }

    /** Every byte received, in order; releases what was kept. */
    byte[] bytes() {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (ByteBuf b : received) {
        out.writeBytes(ByteBufUtil.getBytes(b));
        b.release();
      }
      received.clear();
      return out.toByteArray();
    }
  }

  /**
   * A record stage whose records are 1-byte lengths and their bytes, so a test can cut them; a
   * length of 0 is a fatal error.
   */
  private static final class LengthStage implements RecordStage {
    /** The bytes of a record a read cut short. */
    private final ByteArrayOutputStream partial = new ByteArrayOutputStream();
    boolean released;

    /** @param in borrowed: read to its end */
    @Override
    public void open(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> out) {
      while (in.isReadable()) {
        if (partial.size() == 0) {
          int length = in.getUnsignedByte(in.readerIndex());
          if (length == 0) {
            throw new CorruptedFrameException("record length 0");
          }
        }
        partial.write(in.readByte());
        byte[] record = partial.toByteArray();
        if (record.length == 1 + (record[0] & 0xff)) {
          partial.reset();
          ByteBuf plain = ctx.alloc().directBuffer(headroom + record.length - 1);
          plain.writerIndex(headroom).readerIndex(headroom);
          out.accept(ctx, plain.writeBytes(record, 1, record.length - 1));
        }
      }
    }

    @Override
    public void endOfInput() {
      if (partial.size() > 0) {
        throw new CorruptedFrameException("closed after " + partial.size() + " bytes of a record");
      }
    }

    @Override
    public ByteBuf nextReadBuffer() {
      return null;
    }

    @Override
    public int nextReadBytes() {
      return 4096;
    }

    /** @param plaintext owned: written on with a length in front */
    @Override
    public void write(ChannelHandlerContext ctx, ByteBuf plaintext, ChannelPromise promise) {
      ByteBuf record = ctx.alloc().buffer(1 + plaintext.readableBytes());
      record.writeByte(plaintext.readableBytes()).writeBytes(plaintext);
      plaintext.release();
      ctx.write(record, promise);
    }

    @Override
    public void flush(ChannelHandlerContext ctx) {
      ctx.flush();
    }

    @Override
    public void close(ChannelHandlerContext ctx) {}

    @Override
    public void release() {
      released = true;
    }
  }

  private final ReadBudget budget = new ReadBudget(1 << 20);
  private final ConnectionHandler connection = new ConnectionHandler(budget, false, 32768);
  private final ReadCounter counter = new ReadCounter();
  private final Tail tail = new Tail();
  private final EmbeddedChannel ch = new EmbeddedChannel(counter, connection, tail);

  /** A SETTINGS frame with no payload and a DATA frame of {@code payload} on stream 1. */
  private static byte[] frames(byte[] payload) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(new byte[] {0, 0, 0, 4, 0, 0, 0, 0, 0});
    out.writeBytes(new byte[] {0, 0, (byte) payload.length, 0, 1, 0, 0, 0, 1});
    out.writeBytes(payload);
    return out.toByteArray();
  }

  private static ByteBuf direct(byte[] bytes) {
    return PooledByteBufAllocator.DEFAULT.directBuffer(bytes.length).writeBytes(bytes);
  }

  @Test
  void removedWhileARecordsFramesGoOnItReleasesWhatTheReadsLaterRecordsBring() {
    PooledByteBufAllocator pool = new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    ConnectionHandler removed = new ConnectionHandler(budget, false, 32768);
    EmbeddedChannel other = new EmbeddedChannel();
    other.config().setAllocator(pool);
    other.pipeline().addLast(removed, new ChannelInboundHandlerAdapter() {
      /** @param msg owned: released; the first removes the connection handler */
      @Override
      public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ((ByteBuf) msg).release();
        if (ctx.pipeline().context(removed) != null) {
          ctx.pipeline().remove(removed);
        }
      }
    });
    removed.install(new LengthStage(), new FrameSlicer(false, 16384, budget, true));
    ByteBuf read = pool.directBuffer(64);
    // Record 1: a small DATA frame, which joins, and a PING, which hands the join on first.
    read.writeByte(9 + 10 + 9 + 8).writeBytes(new byte[] {0, 0, 10, 0, 0, 0, 0, 0, 1});
    read.writeZero(10).writeBytes(new byte[] {0, 0, 8, 6, 0, 0, 0, 0, 0}).writeZero(8);
    // Record 2: the head of a 16 KiB DATA frame, which the slicer would gather.
    read.writeByte(9 + 100).writeBytes(new byte[] {0, 0x40, 0, 0, 0, 0, 0, 0, 3}).writeZero(100);
    other.writeOneInbound(read);
    other.finishAndReleaseAll();
    assertEquals(0, budget.retainedBytes(), "bytes held once the handler left");
  }

  @Test
  void anInstalledConnectionIsOpenUntilItEndsAndLeavesTheCountOnce() {
    long before = Metric.CONNECTIONS_OPEN.value();
    connection.install(null, new FrameSlicer(false, 16384, budget, true));
    assertEquals(before + 1, Metric.CONNECTIONS_OPEN.value(), "open once installed");
    ch.pipeline().fireChannelInactive();
    assertEquals(before, Metric.CONNECTIONS_OPEN.value(), "ended when inactive");
    assertFalse(ch.finish()); // closes the channel and removes the handler: no second decrement
    assertEquals(before, Metric.CONNECTIONS_OPEN.value(), "left the count once");

    ConnectionHandler never = new ConnectionHandler(budget, false, 32768);
    EmbeddedChannel other = new EmbeddedChannel(never);
    assertFalse(other.finish());
    assertEquals(before, Metric.CONNECTIONS_OPEN.value(), "a handler never installed never counts");
  }

  @Test
  void beforeInstallEverythingPassesAndTheReadPolicyAloneDecidesReads() {
    ch.writeInbound(direct(new byte[] {1, 2, 3}));
    assertArrayEquals(new byte[] {1, 2, 3}, tail.bytes());
    int before = counter.reads;
    ch.pipeline().fireChannelReadComplete();
    assertEquals(before + 1, counter.reads, "one read per batch; the tail's own request swallowed");
    assertFalse(ch.config().isAutoRead());
    assertFalse(ch.finish());
  }

  @Test
  void withASlicerOnlyReadBuffersCarryHeadroomAndWholeFramesGoOn() {
    connection.install(null, new FrameSlicer(false, 16384, budget, true));
    RecvByteBufAllocator.Handle handle = ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    ByteBuf read = handle.allocate(PooledByteBufAllocator.DEFAULT);
    assertEquals(FrameSlicer.HEADROOM_BYTES, read.readerIndex(), "room for a DATA header");
    byte[] stream = frames(new byte[] {7, 7, 7, 7});
    read.writeBytes(stream, 0, 20);
    ch.writeInbound(read);
    ByteBuf rest = handle.allocate(PooledByteBufAllocator.DEFAULT);
    rest.writeBytes(stream, 20, stream.length - 20);
    ch.writeInbound(rest);
    byte[] got = tail.bytes();
    assertEquals(9 + 9 + 4, got.length, "the DATA frame's two small pieces went on together");
    assertThrows(IllegalStateException.class, () -> connection.install(null, null));
    assertFalse(ch.finish());
    assertEquals(0, budget.retainedBytes());
  }

  @Test
  void aRecordStageOpensReadsAndSealsWritesAndSizesReads() {
    LengthStage stage = new LengthStage();
    connection.install(stage, new FrameSlicer(false, 16384, budget, true));
    byte[] stream = frames(new byte[] {5, 6});
    ByteBuf records = direct(new byte[] {(byte) stream.length});
    records.writeBytes(stream);
    // Cut the record: the stage keeps its part, nothing reaches HTTP/2 until it is whole.
    ch.writeInbound(records.retainedSlice(0, 10));
    assertTrue(tail.received.isEmpty());
    ch.writeInbound(records.retainedSlice(10, records.readableBytes() - 10));
    records.release();
    assertArrayEquals(stream, tail.bytes());

    RecvByteBufAllocator.Handle handle = ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    ByteBuf sized = handle.allocate(PooledByteBufAllocator.DEFAULT);
    assertEquals(4096, sized.capacity(), "the stage sizes the reads");
    assertEquals(0, sized.readerIndex());
    sized.release();

    ch.writeOutbound(direct(new byte[] {9, 8}));
    ByteBuf sealed = ch.readOutbound();
    assertArrayEquals(new byte[] {2, 9, 8}, ByteBufUtil.getBytes(sealed));
    sealed.release();
    assertFalse(ch.finish());
    assertTrue(stage.released, "the stage is released with the handler");
  }

  @Test
  void aFatalRecordErrorComesAfterThePlaintextBeforeItAndClosesTheChannel() {
    LengthStage stage = new LengthStage();
    connection.install(stage, null);
    ch.writeInbound(direct(new byte[] {2, 'o', 'k', 0, 1}));
    assertEquals(List.of("read", "error record length 0", "inactive"), tail.events);
    assertArrayEquals(new byte[] {'o', 'k'}, tail.bytes());
    assertFalse(ch.isOpen());
    ch.finishAndReleaseAll();
  }

  @Test
  void aRecordCutByThePeersCloseIsReportedBeforeTheEndOfTheStream() {
    LengthStage stage = new LengthStage();
    connection.install(stage, null);
    ch.writeInbound(direct(new byte[] {3, 'a'}));
    ch.close();
    assertEquals(List.of("error closed after 2 bytes of a record", "inactive"), tail.events);
    ch.finishAndReleaseAll();
  }
}
