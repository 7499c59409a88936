package io.pinless.connection;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.util.ReferenceCountUtil;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ReadBudget;
import io.pinless.testing.PoolBytes;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Small DATA frames of a message still under way wait in a join for the next read batch. When this
 * end ends their stream (a reset, a server's trailers) and the peer then sends nothing, no batch
 * comes: the join goes on once the write that ended the stream is done, and the idle connection
 * holds nothing.
 */
class ConnectionHandlerEndedStreamsTest {
  private static final int DATA = 0x0;
  private static final int HEADERS = 0x1;
  private static final int RST_STREAM = 0x3;
  private static final int PING = 0x6;
  private static final int END_STREAM = 0x1;
  private static final int END_HEADERS = 0x4;
  private static final byte[] PREFACE =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

  /** Releases what reaches it, as gRPC does on a stream it ended; counts DATA and batch ends. */
  private static final class Released extends ChannelInboundHandlerAdapter {
    long dataPayload;
    int readCompletes;

    /** @param msg owned: read for its frames, then released */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf frames = (ByteBuf) msg;
      for (int i = frames.readerIndex(); i < frames.writerIndex(); ) {
        int length = frames.getUnsignedMedium(i);
        if (frames.getUnsignedByte(i + 3) == DATA) {
          dataPayload += length;
        }
        i += 9 + length;
      }
      frames.release();
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      readCompletes++;
    }
  }

  private final PooledByteBufAllocator pool =
      new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
  private final ReadBudget budget = new ReadBudget(1 << 20);
  private final ConnectionHandler connection = new ConnectionHandler(budget, false, 32768);
  private final Released released = new Released();
  private final EmbeddedChannel ch = new EmbeddedChannel();

  @AfterEach
  void tearDown() {
    ch.finishAndReleaseAll();
  }

  /** @param out borrowed: the frame is written to it */
  private static ByteBuf frame(ByteBuf out, int type, int flags, int stream, byte[] payload) {
    out.writeMedium(payload.length).writeByte(type).writeByte(flags).writeInt(stream);
    return out.writeBytes(payload);
  }

  /** A pinless end whose peer opened stream 1 and sent 100 bytes of a 1,000-byte message. */
  private void startedMessage(boolean server) {
    ch.config().setAllocator(pool);
    ch.pipeline().addLast(connection, released);
    connection.install(null, new FrameSlicer(server, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget,
        true));
    if (!server) {
      write(Unpooled.wrappedBuffer(PREFACE));
    }
    RecvByteBufAllocator.Handle reads = ch.config().getRecvByteBufAllocator().newHandle();
    reads.reset(ch.config());
    ByteBuf read = reads.allocate(pool);
    if (server) {
      read.writeBytes(PREFACE);
    }
    frame(read, HEADERS, END_HEADERS, 1, new byte[] {(byte) 0x88});
    byte[] start = new byte[100];
    start[3] = 0x03; // gRPC's prefix: uncompressed, 1,000 bytes
    start[4] = (byte) 0xe8;
    frame(read, DATA, 0, 1, start);
    ch.pipeline().fireChannelRead(read);
    ch.pipeline().fireChannelReadComplete();
    assertEquals(0, released.dataPayload, "the message's start waits in a join");
    assertTrue(PoolBytes.liveBytes(pool) > 0);
  }

  /** Writes {@code frames} as the HTTP/2 codec would and drops what reaches the socket. */
  private void write(ByteBuf frames) {
    ch.writeAndFlush(frames);
    for (Object out; (out = ch.readOutbound()) != null; ) {
      ReferenceCountUtil.release(out);
    }
  }

  private void assertHandedOnAndNothingHeld() {
    assertEquals(100, released.dataPayload, "the join went on");
    assertEquals(2, released.readCompletes, "a read-complete went after it, for gRPC to flush");
    assertEquals(0, budget.retainedBytes());
    assertEquals(0, PoolBytes.liveBytes(pool), "pooled bytes the idle connection holds");
  }

  @Test
  void aJoinOfAStreamThisEndResetsGoesOnWithNoReadToCome() {
    startedMessage(false);
    write(frame(Unpooled.buffer(), RST_STREAM, 0, 1, new byte[] {0, 0, 0, 8}));
    ch.runPendingTasks();
    assertHandedOnAndNothingHeld();
  }

  @Test
  void aJoinOfAStreamAServersTrailersEndGoesOnWithNoReadToCome() {
    startedMessage(true);
    write(frame(Unpooled.buffer(), 0x4, 0, 0, new byte[0])); // the server's SETTINGS
    write(frame(Unpooled.buffer(), HEADERS, END_HEADERS | END_STREAM, 1, new byte[] {(byte) 0x88}));
    ch.runPendingTasks();
    assertHandedOnAndNothingHeld();
  }

  @Test
  void aJoinOfAStreamStillUnderWayWaitsWhateverElseIsWritten() {
    startedMessage(false);
    write(frame(Unpooled.buffer(), PING, 0, 0, new byte[8]));
    write(frame(Unpooled.buffer(), RST_STREAM, 0, 3, new byte[] {0, 0, 0, 8}));
    ch.runPendingTasks();
    assertEquals(0, released.dataPayload, "stream 1's message is still under way");
    assertEquals(1, released.readCompletes, "no read-complete but the batch's");
    assertFalse(PoolBytes.liveBytes(pool) == 0);
  }
}
