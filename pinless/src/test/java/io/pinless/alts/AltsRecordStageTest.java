package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY44;
import static io.pinless.alts.RecordChannels.direct;
import static io.pinless.alts.RecordChannels.drainOutbound;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.alts.RecordChannels.Capture;
import io.pinless.alts.RecordChannels.CloseRecorder;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.connection.ConnectionHandler;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ReadBudget;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class AltsRecordStageTest {
  private static final int MAX = 16384;

  private static byte[] random(int n, long seed) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  /** A channel whose one record entry is a connection handler with the stage of the given end. */
  private static EmbeddedChannel end(boolean isClient, CloseRecorder closer, Capture capture) {
    return new EmbeddedChannel(closer, connection(isClient, null), capture);
  }

  /** A connection handler running an ALTS stage of the given end and {@code slicer}. */
  private static ConnectionHandler connection(boolean isClient, FrameSlicer slicer) {
    ConnectionHandler connection = new ConnectionHandler(new ReadBudget(1 << 20), false, 32768);
    connection.install(
        new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, isClient, MAX), slicer);
    return connection;
  }

  @Test
  void bothEndsExchangeRecordsThroughOneEntryEach() {
    Capture clientIn = new Capture();
    Capture serverIn = new Capture();
    EmbeddedChannel client = end(true, new CloseRecorder(), clientIn);
    EmbeddedChannel server = end(false, new CloseRecorder(), serverIn);
    assertEquals(1, client.pipeline().names().stream()
        .filter(n -> client.pipeline().get(n) instanceof ConnectionHandler).count());

    byte[] up = random(3 * MAX + 5, 1);
    byte[] down = random(MAX - 1, 2);
    client.writeOutbound(direct(up));
    server.writeOutbound(direct(down));
    byte[] upFrames = drainOutbound(client);
    byte[] downFrames = drainOutbound(server);
    // Every byte split, to show the decoding half keeps partial records across reads.
    for (int i = 0; i < upFrames.length; i += 1000) {
      server.writeInbound(direct(upFrames, i, Math.min(1000, upFrames.length - i)));
    }
    client.writeInbound(direct(downFrames));

    assertArrayEquals(up, serverIn.bytes());
    assertArrayEquals(down, clientIn.bytes());
    assertTrue(clientIn.errors.isEmpty() && serverIn.errors.isEmpty());
    assertFalse(client.finishAndReleaseAll());
    assertFalse(server.finishAndReleaseAll());
  }

  @Test
  void speaksTheSameRecordsAsTheSeparateHandlers() {
    byte[] message = random(2 * MAX, 3);
    // The codec's client frames, opened by a lone server-side decoder.
    EmbeddedChannel codec = end(true, new CloseRecorder(), new Capture());
    codec.writeOutbound(direct(message));
    Capture fromCodec = new Capture();
    EmbeddedChannel decoder = RecordChannels.decoderChannel(new CloseRecorder(),
        new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, false, MAX), fromCodec);
    decoder.writeInbound(direct(drainOutbound(codec)));
    assertArrayEquals(message, fromCodec.bytes());
    // A lone client-side encoder's frames, opened by the server's codec.
    Capture intoCodec = new Capture();
    EmbeddedChannel server = end(false, new CloseRecorder(), intoCodec);
    server.writeInbound(direct(
        RecordChannels.encode(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, message)));
    assertArrayEquals(message, intoCodec.bytes());
    codec.finishAndReleaseAll();
    decoder.finishAndReleaseAll();
    server.finishAndReleaseAll();
  }

  @Test
  void aForgedRecordIsFatalAndClosesAndDeliversNothingOfIt() {
    Capture capture = new Capture();
    CloseRecorder closer = new CloseRecorder();
    closer.hold = false;
    EmbeddedChannel server = end(false, closer, capture);
    byte[] good = random(100, 4);
    byte[] frames = RecordChannels.encode(
        ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, good, random(100, 5));
    frames[frames.length - 1] ^= 1; // the second record's tag
    server.writeInbound(direct(frames));

    assertArrayEquals(good, capture.bytes(), "the record before the forged one, and no more");
    assertEquals(AltsRecordException.Reason.BAD_TAG, capture.onlyError().reason());
    assertEquals(1, closer.closes);
    assertFalse(server.isOpen());
    server.finishAndReleaseAll();
  }

  @Test
  void removalFailsAndReleasesUnflushedWrites() {
    EmbeddedChannel client = end(true, new CloseRecorder(), new Capture());
    ChannelFuture pending = client.write(direct(random(500, 6)));
    client.pipeline().remove(ConnectionHandler.class);

    assertTrue(pending.isDone());
    assertInstanceOf(ClosedChannelException.class, pending.cause());
    assertEquals(List.of(), drainOutboundList(client));
    client.finishAndReleaseAll();
  }

  /** Takes whole HTTP/2 frames, as grpc-netty's handler does behind the slicer. */
  private static final class Frames extends ChannelInboundHandlerAdapter {
    final ByteArrayOutputStream data = new ByteArrayOutputStream();
    final List<Integer> types = new ArrayList<>();
    int buffers;
    boolean inactive;

    /** @param msg owned: released here */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf buf = (ByteBuf) msg;
      try {
        buffers++;
        while (buf.isReadable()) {
          assertTrue(buf.readableBytes() >= 9, "a whole frame header");
          int length = buf.readUnsignedMedium();
          int type = buf.readUnsignedByte();
          buf.skipBytes(5);
          assertTrue(buf.readableBytes() >= length, "a whole frame of " + length + " bytes");
          types.add(type);
          if (type == 0) {
            data.writeBytes(ByteBufUtil.getBytes(buf, buf.readerIndex(), length));
          }
          buf.skipBytes(length);
        }
      } finally {
        buf.release();
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      inactive = true;
    }
  }

  /** An HTTP/2 frame: 9-byte header, then the payload. */
  private static byte[] frame(int type, int streamId, byte[] payload) {
    ByteBuffer b = ByteBuffer.allocate(9 + payload.length);
    b.put((byte) (payload.length >>> 16)).put((byte) (payload.length >>> 8))
        .put((byte) payload.length).put((byte) type).put((byte) 0).putInt(streamId).put(payload);
    return b.array();
  }

  @Test
  void slicesFramesInsideTheSameEntryAndReleasesWhatTheSlicerHoldsAtTheEnd() {
    Frames frames = new Frames();
    ReadBudget budget = new ReadBudget(1 << 20);
    FrameSlicer slicer = new FrameSlicer(false, 16384, budget, true);
    EmbeddedChannel server = new EmbeddedChannel(connection(false, slicer), frames);
    long slicedBefore = Metric.DATA_BYTES_SLICED.value();
    long copiedBefore = Metric.DATA_BYTES_COPIED.value();

    byte[] payload = random(3 * 16384, 7);
    ByteArrayOutputStream stream = new ByteArrayOutputStream();
    stream.writeBytes(frame(4, 0, new byte[0]));
    for (int i = 0; i < 3; i++) {
      stream.writeBytes(frame(0, 1, java.util.Arrays.copyOfRange(payload, i * 16384, (i + 1) * 16384)));
    }
    // A HEADERS frame of 100 bytes of which only 40 ever arrive.
    stream.writeBytes(java.util.Arrays.copyOf(frame(1, 3, random(100, 8)), 9 + 40));
    byte[] records = RecordChannels.encode(
        ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, stream.toByteArray());
    // One record per read, so DATA frames are cut by reads.
    int reads = 0;
    for (int at = 0; at < records.length; reads++) {
      int frameBytes = 4 + ByteBuffer.wrap(records, at, 4).order(ByteOrder.LITTLE_ENDIAN).getInt();
      server.writeInbound(direct(records, at, frameBytes));
      at += frameBytes;
    }

    assertTrue(reads >= 4, "records cut the frames: " + reads);
    assertArrayEquals(payload, frames.data.toByteArray(), "every DATA byte, in order, once");
    assertEquals(4, frames.types.get(0), "the SETTINGS frame first");
    assertFalse(frames.types.contains(1), "the cut HEADERS frame is held, not handed on");
    long sliced = Metric.DATA_BYTES_SLICED.value() - slicedBefore;
    long copied = Metric.DATA_BYTES_COPIED.value() - copiedBefore;
    // A record cuts each frame: its small last piece joins the head of the next frame of its
    // stream (gRPC would copy two small pieces in a row into the heap); the rest is sliced.
    assertTrue(copied <= 3L * (FrameSlicer.JOIN_BYTES + 2 * 9), "copied " + copied);
    assertTrue(sliced + copied >= payload.length && sliced >= payload.length - 3L * FrameSlicer.JOIN_BYTES,
        "DATA is sliced from the plaintext buffers: " + sliced + " sliced, " + copied + " copied");
    // The end of the stream reaches the slicer (which releases the held part; the leak detector
    // would report it) and then the handler behind.
    assertFalse(server.finishAndReleaseAll());
    assertTrue(frames.inactive);
    budget.releaseAll();
  }

  private static List<byte[]> drainOutboundList(EmbeddedChannel ch) {
    byte[] bytes = drainOutbound(ch);
    return bytes.length == 0 ? List.of() : List.of(bytes);
  }
}
