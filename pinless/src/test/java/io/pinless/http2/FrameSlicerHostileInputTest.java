package io.pinless.http2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.read.ReadBudget;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Frames a hostile or broken peer sends: what grpc-netty must see of them, and what they may make
 * the slicer hold. The slicer runs on a client's reads with headroom, as on a pinless connection.
 */
class FrameSlicerHostileInputTest {
  private static final int DATA = 0x0;
  private static final int HEADERS = 0x1;
  private static final int PING = 0x6;
  private static final int END_STREAM = 0x1;
  private static final int PADDED = 0x8;

  /** Records each frame handed on as "type flags stream length", then releases it. */
  private static final class Frames extends ChannelInboundHandlerAdapter {
    final List<String> frames = new ArrayList<>();

    /** @param msg owned: read, then released */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf in = (ByteBuf) msg;
      for (int i = in.readerIndex(); i < in.writerIndex(); ) {
        int length = in.getUnsignedMedium(i);
        frames.add(in.getUnsignedByte(i + 3) + " " + in.getUnsignedByte(i + 4) + " "
            + (in.getInt(i + 5) & 0x7fffffff) + " " + length);
        i += FrameHeader.BYTES + length;
      }
      in.release();
    }
  }

  private final PooledByteBufAllocator pool =
      new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
  private final ReadBudget budget = new ReadBudget(Long.MAX_VALUE);
  private final Http2FrameSlicer slicer =
      new Http2FrameSlicer(false, FrameSlicer.DEFAULT_MAX_FRAME_SIZE, budget, true);
  private final Frames out = new Frames();
  private final EmbeddedChannel ch = new EmbeddedChannel();

  FrameSlicerHostileInputTest() {
    ch.config().setAllocator(pool);
    ch.pipeline().addLast(slicer, out);
  }

  @AfterEach
  void tearDown() {
    ch.finishAndReleaseAll();
    assertEquals(0, budget.retainedBytes(), "every buffer handed on was released");
  }

  private static byte[] frame(int type, int flags, int stream, int length, int payloadBytes) {
    ByteArrayOutputStream f = new ByteArrayOutputStream();
    f.writeBytes(new byte[] {(byte) (length >>> 16), (byte) (length >>> 8), (byte) length,
        (byte) type, (byte) flags, 0, 0, 0, (byte) stream});
    f.writeBytes(new byte[payloadBytes]);
    return f.toByteArray();
  }

  private static byte[] frame(int type, int flags, int stream, int length) {
    return frame(type, flags, stream, length, length);
  }

  private static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      all.writeBytes(p);
    }
    return all.toByteArray();
  }

  /** One read of {@code bytes} in a pooled buffer with the slicer's headroom. */
  private void read(byte[] bytes) {
    ByteBuf read = pool.directBuffer(FrameSlicer.HEADROOM_BYTES + bytes.length);
    read.writerIndex(FrameSlicer.HEADROOM_BYTES).readerIndex(FrameSlicer.HEADROOM_BYTES);
    ch.writeOneInbound(read.writeBytes(bytes));
  }

  @Test
  void aZeroLengthPaddedDataFrameGoesOnAsItCameAfterItsStreamsJoin() {
    // PADDED with no pad length byte: grpc-netty refuses it (FRAME_SIZE_ERROR), and its
    // END_STREAM must not end the stream's earlier DATA.
    read(concat(frame(DATA, 0, 1, 10), frame(DATA, PADDED | END_STREAM, 1, 0),
        frame(PING, 0, 0, 8)));
    ch.flushInbound();
    assertEquals(List.of("0 0 1 10", "0 9 1 0", "6 0 0 8"), out.frames);
  }

  @Test
  void dataOnStreamZeroOrAnEvenStreamIsNotOvertakenByLaterData() {
    // Connection errors for grpc-netty: nothing sent after them may reach it first.
    read(concat(frame(DATA, 0, 0, 10), frame(DATA, 0, 2, 10), frame(DATA, 0, 1, 2000)));
    ch.flushInbound();
    assertEquals(List.of("0 0 0 10", "0 0 2 10", "0 0 1 2000"), out.frames);
  }

  @Test
  void aCutDataFrameOnStreamZeroOrAnEvenStreamIsNotOvertakenByLaterData() {
    for (int stream : new int[] {0, 2}) {
      out.frames.clear();
      read(frame(DATA, 0, stream, 100, 50));
      read(concat(new byte[50], frame(DATA, 0, 1, 2000)));
      ch.flushInbound();
      assertEquals("0 0 " + stream + " 100", out.frames.get(0), out.frames.toString());
    }
  }

  @Test
  void noGatheredPieceUnderAGatherGoesOnWhileMoreOfTheFrameIsToCome() {
    // The gathered copy grows with what comes: 2044 bytes, then 4088, then a whole gather.
    read(frame(DATA, 0, 1, 16384, 1022));
    read(new byte[1022]);
    read(new byte[100]);
    read(new byte[1944]);
    for (String f : out.frames) {
      assertTrue(Integer.parseInt(f.split(" ")[3]) >= FrameSlicer.GATHER_BYTES,
          out.frames.toString());
    }
    // A larger piece comes: what is gathered goes on before it.
    read(new byte[16384 - 4088]);
    ch.flushInbound();
    int payload = 0;
    for (String f : out.frames) {
      payload += Integer.parseInt(f.split(" ")[3]);
    }
    assertEquals(16384, payload);
  }

  @Test
  void aFrameHeaderClaimingALargeFrameAllocatesNoMoreThanTwiceWhatCame() {
    // A HEADERS frame claiming 64 KiB of a connection with that maximum, its first byte only.
    Http2FrameSlicer large = new Http2FrameSlicer(false, 1 << 16, budget, true);
    ch.pipeline().replace(slicer, "large", large);
    read(frame(HEADERS, 0, 1, 65535, 1));
    ch.flushInbound();
    assertTrue(budget.retainedBytes() <= 128, budget.retainedBytes() + " bytes held for 10");
    // Twice what came, in the pool's size classes (up to a quarter larger).
    for (int received = 10; received < 4096; ) {
      read(new byte[100]);
      received += 100;
      assertTrue(budget.retainedBytes() <= 5 * received / 2 + 128,
          budget.retainedBytes() + " bytes held for " + received);
    }
    assertTrue(out.frames.isEmpty(), "the frame is not whole");
  }

  @Test
  void aDataFrameHeaderClaimingAFullFrameAllocatesNoMoreThanTwiceWhatCame() {
    read(frame(DATA, 0, 1, 16384, 10));
    ch.flushInbound();
    assertTrue(budget.retainedBytes() <= 512, budget.retainedBytes() + " bytes held for 19");
    int received = 10;
    for (int i = 0; i < 30; i++) {
      read(new byte[50]);
      received += 50;
      assertTrue(budget.retainedBytes() <= 2 * received + 512,
          budget.retainedBytes() + " bytes held for " + received);
    }
    assertTrue(out.frames.isEmpty(), "no piece under 4 KiB goes on alone");
    read(new byte[16384 - received]);
    ch.flushInbound();
    int payload = 0;
    for (String f : out.frames) {
      payload += Integer.parseInt(f.split(" ")[3]);
    }
    assertEquals(16384, payload, "the whole frame went on");
  }

  @Test
  void aChannelEndedWhileAReadIsHandedOnLeavesNothingHeld() {
    ch.pipeline().replace(out, "ending", new ChannelInboundHandlerAdapter() {
      private boolean ended;

      /** @param msg owned: released; the first ends the channel */
      @Override
      public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ((ByteBuf) msg).release();
        if (!ended) {
          // The channel ends while the slicer hands on, as a transport that ends it at once would.
          ended = true;
          ctx.pipeline().fireChannelInactive();
        }
      }
    });
    // The PING hands the join on, the end releases the slicer, and the rest of the read opens
    // a join and gathers a cut frame's head, which the end came too early for.
    read(concat(frame(DATA, 0, 1, 10), frame(PING, 0, 0, 8), frame(DATA, 0, 3, 10),
        frame(DATA, 0, 5, 16384, 100)));
    assertEquals(0, slicer.heldBytes(), "the slicer holds nothing once its channel ended");
    assertEquals(0, budget.retainedBytes());
  }
}
