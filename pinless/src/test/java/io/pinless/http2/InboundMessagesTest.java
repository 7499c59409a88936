package io.pinless.http2;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class InboundMessagesTest {
  static final int DATA = 0x0;
  static final int HEADERS = 0x1;
  static final int RST_STREAM = 0x3;
  static final int END_STREAM = 0x1;
  static final int PADDED = 0x8;

  static ByteBuf frame(ByteBuf out, int type, int flags, int stream, ByteBuf payload) {
    out.writeMedium(payload.readableBytes()).writeByte(type).writeByte(flags).writeInt(stream);
    out.writeBytes(payload);
    payload.release();
    return out;
  }

  /** A buffer with the HEADERS that open {@code streams}: DATA counts only on open streams. */
  static ByteBuf opened(int... streams) {
    ByteBuf in = Unpooled.buffer();
    for (int stream : streams) {
      frame(in, 0x1, 0x4, stream, Unpooled.wrappedBuffer(new byte[7]));
    }
    return in;
  }

  static ByteBuf grpcPrefix(int length) {
    return Unpooled.buffer().writeByte(0).writeInt(length);
  }

  /** Feeds {@code bytes} to a fresh reader cut at {@code cut}, and to one whole; both agree. */
  private static InboundMessages readSplit(ByteBuf bytes, long max) {
    InboundMessages whole = new InboundMessages(max);
    whole.read(bytes);
    for (int cut = 0; cut <= bytes.readableBytes(); cut++) {
      InboundMessages split = new InboundMessages(max);
      split.read(bytes.slice(0, cut));
      split.read(bytes.slice(cut, bytes.readableBytes() - cut));
      assertEquals(whole.dataBytes(), split.dataBytes(), "cut at " + cut);
      assertEquals(whole.pendingFrameBytes(), split.pendingFrameBytes(), "cut at " + cut);
      assertEquals(whole.remainingBytes(), split.remainingBytes(), "cut at " + cut);
      assertEquals(whole.incompleteMessages(), split.incompleteMessages(), "cut at " + cut);
    }
    return whole;
  }

  @Test
  void aMessageCutAcrossFramesIsPendingUntilItsLastByteAtEverySplit() {
    ByteBuf in = Unpooled.buffer();
    in.writeBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    frame(in, HEADERS, 0x4, 1, Unpooled.wrappedBuffer(new byte[7]));
    // The prefix is cut between the frames: 3 bytes, then 2 and 40 message bytes of 100.
    frame(in, DATA, 0, 1, Unpooled.wrappedBuffer(new byte[] {0, 0, 0}));
    frame(in, DATA, 0, 1, Unpooled.buffer().writeByte(0).writeByte(100).writeZero(40));
    InboundMessages m = readSplit(in, 1000);
    assertEquals(3 + 42, m.dataBytes());
    assertEquals(1, m.incompleteMessages());
    assertEquals(60, m.remainingBytes());
    assertEquals(9 + 3 + 9 + 42, m.pendingFrameBytes(), "both frames carry it");

    frame(in.clear(), DATA, 0, 1, Unpooled.buffer().writeZero(60).writeBytes(grpcPrefix(0)));
    m.read(in);
    assertEquals(0, m.incompleteMessages(), "done, and an empty message right after");
    assertEquals(0, m.pendingFrameBytes());
    assertEquals(0, m.remainingBytes());
    in.release();
  }

  @Test
  void coverAllCoversTheMessagesWhoseLengthIsKnownAndNoneStartedAfter() {
    ByteBuf in = opened(1, 3, 5);
    frame(in, DATA, 0, 1, grpcPrefix(100).writeZero(10));
    frame(in, DATA, 0, 3, Unpooled.wrappedBuffer(new byte[] {0, 0}));
    InboundMessages m = new InboundMessages(1000);
    m.read(in);
    assertEquals(90 + 3, m.remainingBytes());
    assertEquals(0, m.coveredBytes(), "nothing covered yet");
    m.coverAll();
    assertEquals(90, m.coveredBytes(), "stream 3's prefix is cut: it claims nothing yet");

    frame(in.clear(), DATA, 0, 1, Unpooled.buffer().writeZero(90).writeBytes(grpcPrefix(50)));
    frame(in, DATA, 0, 3, Unpooled.buffer().writeZero(2).writeByte(40).writeZero(20));
    m.read(in);
    assertEquals(50 + 20, m.remainingBytes());
    assertEquals(0, m.coveredBytes(), "stream 1's next message started after the cover");
    m.coverAll();
    assertEquals(70, m.coveredBytes());
    in.release();
  }

  @Test
  void paddingCountsForFlowControlAndPinsButIsNoMessageByte() {
    ByteBuf in = opened(1, 3, 5);
    ByteBuf payload = Unpooled.buffer().writeByte(200).writeBytes(grpcPrefix(50)).writeZero(10)
        .writeZero(200);
    frame(in, DATA, PADDED, 3, payload);
    InboundMessages m = readSplit(in, 1000);
    assertEquals(1 + 15 + 200, m.dataBytes());
    assertEquals(40, m.remainingBytes());
    assertEquals(9 + 1 + 15 + 200, m.pendingFrameBytes(), "the whole frame carries it");
    in.release();
  }

  @Test
  void endStreamAndResetsInEitherDirectionDropAStreamsMessage() {
    ByteBuf in = opened(1, 3, 5);
    frame(in, DATA, 0, 1, grpcPrefix(100));
    frame(in, DATA, 0, 3, grpcPrefix(100));
    frame(in, DATA, 0, 5, grpcPrefix(100));
    InboundMessages m = readSplit(in, 1000);
    assertEquals(3, m.incompleteMessages());
    frame(in.clear(), DATA, END_STREAM, 1, Unpooled.buffer().writeZero(10));
    frame(in, RST_STREAM, 0, 3, Unpooled.buffer().writeInt(8));
    m.read(in);
    assertEquals(1, m.incompleteMessages());
    m.forget(5);
    assertEquals(0, m.incompleteMessages());
    assertEquals(0, m.pendingFrameBytes());
    in.release();
  }

  @Test
  void trailersEndingAStreamMidMessageDropItsMessage() {
    // A peer that ends a stream with HEADERS (trailers) while its message is incomplete: the
    // claimed 900 bytes never come and must not stay owed for the life of the connection.
    ByteBuf in = opened(1, 3, 5);
    frame(in, DATA, 0, 1, grpcPrefix(900).writeZero(10));
    frame(in, HEADERS, END_STREAM | 0x4, 1, Unpooled.wrappedBuffer(new byte[7]));
    frame(in, DATA, 0, 3, grpcPrefix(100));
    InboundMessages m = readSplit(in, 1000);
    assertEquals(1, m.incompleteMessages(), "only stream 3's message is under way");
    assertEquals(100, m.remainingBytes());
    assertEquals(9 + 5, m.pendingFrameBytes());
    in.release();
  }

  @Test
  void aMessageOverTheLimitCountsTowardNothing() {
    ByteBuf in = opened(1, 3, 5);
    frame(in, DATA, 0, 1, grpcPrefix(1001).writeZero(100));
    frame(in, DATA, 0, 3, grpcPrefix(1000).writeZero(100));
    InboundMessages m = readSplit(in, 1000);
    assertEquals(2, m.incompleteMessages());
    assertEquals(900, m.remainingBytes(), "only the message within the limit");
    assertEquals(9 + 105, m.pendingFrameBytes());
    in.release();
  }

  @Test
  void paddingLongerThanItsFrameIsSkipped() {
    ByteBuf in = opened(1, 3, 5);
    frame(in, DATA, PADDED, 1, Unpooled.buffer().writeByte(9).writeZero(3));
    frame(in, DATA, 0, 3, grpcPrefix(10));
    InboundMessages m = readSplit(in, 1000);
    assertEquals(4 + 5, m.dataBytes());
    assertEquals(1, m.incompleteMessages());
    assertEquals(10, m.remainingBytes());
    in.release();
  }
}
