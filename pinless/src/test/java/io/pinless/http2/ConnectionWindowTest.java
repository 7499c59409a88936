package io.pinless.http2;

import static io.pinless.http2.InboundMessagesTest.frame;
import static io.pinless.http2.InboundMessagesTest.grpcPrefix;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ConnectionWindowTest {
  private static ByteBuf windowUpdate(int stream, int increment) {
    return frame(Unpooled.buffer(), 0x8, 0, stream, Unpooled.buffer().writeInt(increment));
  }

  private static boolean write(ConnectionWindow w, ByteBuf out) {
    try {
      return w.write(out);
    } finally {
      out.release();
    }
  }

  @Test
  void countsTheConnectionIncrementsItPassesAndWithholdsThemWhileHolding() {
    ConnectionWindow w = new ConnectionWindow(new InboundMessages(1000));
    ByteBuf start = Unpooled.buffer()
        .writeBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    frame(start, 0x4, 0, 0, Unpooled.buffer().writeShort(4).writeInt(1 << 20));
    assertFalse(write(w, start));
    assertFalse(write(w, windowUpdate(0, 1000)));
    assertFalse(write(w, windowUpdate(1, 5000)), "a stream's update is not the connection's");
    assertEquals(65535 + 1000, w.granted());

    w.hold(0);
    assertTrue(write(w, windowUpdate(0, 300)));
    assertFalse(write(w, windowUpdate(3, 300)), "stream updates always pass");
    assertTrue(write(w, windowUpdate(0, 200)));
    assertEquals(500, w.withheldBytes());
    assertNull(w.release(UnpooledByteBufAllocator.DEFAULT), "nothing owed while holding");
    assertEquals(65535 + 1000, w.granted());

    w.unhold();
    ByteBuf update = w.release(UnpooledByteBufAllocator.DEFAULT);
    assertEquals(13, update.readableBytes());
    assertEquals(0, update.getInt(5), "stream 0");
    assertEquals(500, update.getInt(9));
    update.release();
    assertEquals(65535 + 1500, w.granted());
    assertEquals(0, w.withheldBytes());
  }

  @Test
  void aCapWithholdsUpdatesPastItAndCountsTheBytesReceivedSinceAgainstIt() {
    InboundMessages inbound = new InboundMessages(1 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    assertFalse(write(w, settings(0)), "a server's first frame");
    assertFalse(w.capped());
    w.maxCredit(70_000);
    assertTrue(w.capped());
    assertFalse(write(w, windowUpdate(0, 4000)), "65,535 + 4,000 is within 70,000");
    assertTrue(write(w, windowUpdate(0, 1000)), "another 1,000 would pass the cap: withheld");
    ByteBuf partial = w.release(UnpooledByteBufAllocator.DEFAULT);
    assertEquals(465, partial.getInt(9), "the release gives what the cap leaves");
    partial.release();
    assertEquals(70_000, w.credit());

    ByteBuf received = frame(Unpooled.buffer(), 0x1, 0x4, 1, Unpooled.buffer());
    frame(received, 0x0, 0, 1, Unpooled.buffer().writeZero(10_000));
    inbound.read(received);
    received.release();
    assertEquals(60_000, w.credit());
    assertNull(w.release(UnpooledByteBufAllocator.DEFAULT),
        "what arrived since the cap was set counts against it: nothing more may go");

    w.maxCredit(60_535);
    ByteBuf update = w.release(UnpooledByteBufAllocator.DEFAULT);
    assertEquals(535, update.getInt(9), "a new cap leaves room for the rest kept");
    update.release();
    assertEquals(60_535, w.credit());
    assertEquals(0, w.withheldBytes());

    w.maxCredit(Long.MAX_VALUE);
    assertFalse(w.capped());
    assertFalse(write(w, windowUpdate(0, 1 << 20)), "uncapped, every update passes");
  }

  private static ByteBuf settings(int flags, int... idsAndValues) {
    ByteBuf payload = Unpooled.buffer();
    for (int i = 0; i < idsAndValues.length; i += 2) {
      payload.writeShort(idsAndValues[i]).writeInt(idsAndValues[i + 1]);
    }
    return frame(Unpooled.buffer(), 0x4, flags, 0, payload);
  }

  /** Headers and the first 1,000 bytes of a 1 MiB message, received on {@code stream}. */
  private static ByteBuf messageStart(int stream) {
    ByteBuf in = frame(Unpooled.buffer(), 0x1, 0x4, stream, Unpooled.buffer());
    return frame(in, 0x0, 0, stream,
        Unpooled.buffer().writeBytes(grpcPrefix(1 << 20)).writeZero(995));
  }

  private static void read(InboundMessages inbound, ByteBuf in) {
    inbound.read(in);
    in.release();
  }

  /**
   * A server's trailers end the call: gRPC discards what the client sends on the stream after
   * them, so its message under way and its later DATA count toward nothing, until the client
   * ends the stream.
   */
  /** A client's preface and empty SETTINGS, as a server reads them first. */
  private static ByteBuf clientPreface() {
    ByteBuf start = Unpooled.buffer()
        .writeBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    return frame(start, 0x4, 0, 0, Unpooled.buffer());
  }

  @Test
  void aServersTrailersDropTheMessageTheClientStillSends() {
    InboundMessages inbound = new InboundMessages(64 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    read(inbound, clientPreface());
    assertFalse(write(w, settings(0)), "a server's first frame");
    read(inbound, messageStart(1));
    read(inbound, messageStart(3));
    assertEquals(2, inbound.incompleteMessages());
    long both = inbound.pendingFrameBytes();
    assertFalse(write(w, frame(Unpooled.buffer(), 0x1, 0x5, 1, Unpooled.buffer().writeZero(20))),
        "trailers for stream 1 (END_STREAM, END_HEADERS)");
    assertEquals(1, inbound.incompleteMessages(), "stream 1's message is dropped");
    assertEquals(both / 2, inbound.pendingFrameBytes());
    assertEquals((1 << 20) - 995, inbound.remainingBytes(), "only stream 3's rest is to come");
    long data = inbound.dataBytes();
    read(inbound, frame(Unpooled.buffer(), 0x0, 0, 1, Unpooled.buffer().writeZero(16_000)));
    assertEquals(1, inbound.incompleteMessages(), "stream 1's later DATA starts nothing");
    assertEquals(both / 2, inbound.pendingFrameBytes());
    assertEquals(data + 16_000, inbound.dataBytes(), "flow control still counts it");
    read(inbound, frame(Unpooled.buffer(), 0x0, 0x1, 1, Unpooled.buffer().writeZero(10)));
    assertEquals(1, inbound.openStreams(), "stream 3 is open, stream 1 is not");
    read(inbound, frame(Unpooled.buffer(), 0x3, 0, 3, Unpooled.buffer().writeInt(8)));
    assertEquals(0, inbound.incompleteMessages(), "both streams ended");
    assertEquals(0, inbound.openStreams());
  }

  /**
   * The usual order (the client ends its request, then the server's trailers go out) keeps
   * nothing once the call is over, however many calls a connection carries.
   */
  @Test
  void callsTheClientEndsFirstLeaveNothingOnceTheirTrailersGoOut() {
    InboundMessages inbound = new InboundMessages(64 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    read(inbound, clientPreface());
    assertFalse(write(w, settings(0)));
    for (int stream = 1; stream < 2_000; stream += 2) {
      ByteBuf call = frame(Unpooled.buffer(), 0x1, 0x4, stream, Unpooled.buffer());
      read(inbound, frame(call, 0x0, 0x1, stream,
          Unpooled.buffer().writeBytes(grpcPrefix(10)).writeZero(10)));
      assertEquals(0, inbound.openStreams(), "the request ended");
      assertFalse(write(w, frame(Unpooled.buffer(), 0x1, 0x5, stream, Unpooled.buffer())));
      assertEquals(0, inbound.openStreams(), "call " + stream + " is over");
    }
    assertEquals(0, inbound.incompleteMessages());
  }

  /**
   * Trailers sent while a client's DATA frame is half read: the rest of the frame is gRPC's to
   * discard, not the start of a message (its bytes would claim a length nobody sent).
   */
  @Test
  void trailersInTheMiddleOfAFrameDiscardItsRest() {
    InboundMessages inbound = new InboundMessages(64 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    read(inbound, clientPreface());
    assertFalse(write(w, settings(0)));
    ByteBuf call = frame(Unpooled.buffer(), 0x1, 0x4, 1, Unpooled.buffer());
    ByteBuf payload = Unpooled.buffer().writeBytes(grpcPrefix(1 << 20));
    while (payload.readableBytes() < 20_000) {
      payload.writeByte(0).writeInt(0x7fffffff); // every 5 bytes a prefix claiming 2 GiB
    }
    frame(call, 0x0, 0x8, 1, Unpooled.buffer().writeByte(3).writeBytes(payload)
        .writeZero(3)); // padded
    int cut = call.readableBytes() - 12_000;
    read(inbound, call.readRetainedSlice(cut));
    assertEquals(1, inbound.incompleteMessages());
    assertFalse(write(w, frame(Unpooled.buffer(), 0x1, 0x5, 1, Unpooled.buffer())));
    read(inbound, call);
    assertEquals(0, inbound.incompleteMessages(), "the frame's rest starts no message");
    assertEquals(0, inbound.pendingFrameBytes());
    assertEquals(0, inbound.remainingBytes());
    read(inbound, frame(Unpooled.buffer(), 0x0, 0x1, 1, Unpooled.buffer().writeZero(10)));
    assertEquals(0, inbound.openStreams(), "nothing kept");
  }

  /** Once the outbound walk stops, no trailers are seen: calls the client ends leave nothing. */
  @Test
  void aLostWalkKeepsNoClientEnds() {
    InboundMessages inbound = new InboundMessages(64 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    read(inbound, clientPreface());
    assertFalse(write(w, settings(0)));
    w.lost();
    for (int stream = 1; stream < 200; stream += 2) {
      ByteBuf call = frame(Unpooled.buffer(), 0x1, 0x4, stream, Unpooled.buffer());
      read(inbound, frame(call, 0x0, 0x1, stream,
          Unpooled.buffer().writeBytes(grpcPrefix(10)).writeZero(10)));
    }
    assertEquals(0, inbound.openStreams());
  }

  /**
   * DATA in flight when this end resets a stream (a cancelled call) is discarded: read as a
   * message, its bytes would claim a length nobody sent, and nothing would ever end it.
   */
  @Test
  void dataInFlightAfterAResetCountsTowardNothing() {
    InboundMessages inbound = new InboundMessages(64 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    for (int stream = 1; stream < 200; stream += 2) {
      read(inbound, messageStart(stream));
      ByteBuf reset = frame(Unpooled.buffer(), 0x3, 0, stream, Unpooled.buffer().writeInt(8));
      assertFalse(write(w, reset), "this end cancels the call");
      ByteBuf inFlight = Unpooled.buffer();
      while (inFlight.readableBytes() < 16_000) {
        inFlight.writeByte(0).writeInt(1000); // bytes that look like a prefix
      }
      read(inbound, frame(Unpooled.buffer(), 0x0, 0, stream, inFlight));
    }
    assertEquals(0, inbound.incompleteMessages());
    assertEquals(0, inbound.pendingFrameBytes());
    assertEquals(0, inbound.openStreams());
  }

  /** A client's END_STREAM ends its request: the response it receives is still under way. */
  @Test
  void aClientsEndOfStreamKeepsTheResponseUnderWay() {
    InboundMessages inbound = new InboundMessages(64 << 20);
    ConnectionWindow w = new ConnectionWindow(inbound);
    ByteBuf start = Unpooled.buffer()
        .writeBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    assertFalse(write(w, frame(start, 0x4, 0, 0, Unpooled.buffer())));
    read(inbound, messageStart(1));
    assertFalse(write(w, frame(Unpooled.buffer(), 0x1, 0x5, 1, Unpooled.buffer().writeZero(20))),
        "a request without a body: HEADERS with END_STREAM");
    assertEquals(1, inbound.incompleteMessages(), "the response is still under way");
  }

  @Test
  void theSmallestStreamWindowAdvertisedIsReadOffTheSettingsWritten() {
    ConnectionWindow w = new ConnectionWindow(new InboundMessages(1000));
    assertEquals(65535, w.smallestStreamWindow(), "HTTP/2's default before any SETTINGS");
    assertFalse(write(w, settings(0, 0x3, 100, 0x4, 1 << 20)));
    assertEquals(65535, w.smallestStreamWindow(), "a larger window: the default may still apply");
    assertFalse(write(w, settings(0, 0x4, 4096)));
    assertEquals(4096, w.smallestStreamWindow());
    assertFalse(write(w, settings(0x1)), "an ACK");
    assertFalse(write(w, settings(0, 0x4, 1 << 20)));
    assertEquals(4096, w.smallestStreamWindow(), "the smallest stays");

    ConnectionWindow cut = new ConnectionWindow(new InboundMessages(1000));
    ByteBuf whole = settings(0, 0x4, 1 << 20);
    ByteBuf head = whole.readRetainedSlice(12);
    assertFalse(write(cut, head));
    assertFalse(write(cut, whole));
    assertEquals(0, cut.smallestStreamWindow(), "a SETTINGS cut across writes: unknown");

    ConnectionWindow lost = new ConnectionWindow(new InboundMessages(1000));
    lost.lost();
    assertEquals(0, lost.smallestStreamWindow(), "the walk stopped: unknown");
  }

  @Test
  void aHoldGivesTheCreditOwedToMessagesUnderWayAndNoMore() {
    ConnectionWindow w = new ConnectionWindow(new InboundMessages(1000));
    assertFalse(write(w, windowUpdate(0, 1)));
    w.hold(250);
    assertTrue(write(w, windowUpdate(0, 200)));
    ByteBuf first = w.release(UnpooledByteBufAllocator.DEFAULT);
    assertEquals(200, first.getInt(9));
    first.release();
    assertTrue(write(w, windowUpdate(0, 200)));
    ByteBuf second = w.release(UnpooledByteBufAllocator.DEFAULT);
    assertEquals(50, second.getInt(9), "the rest of what is owed");
    second.release();
    assertNull(w.release(UnpooledByteBufAllocator.DEFAULT));
    assertEquals(150, w.withheldBytes());
  }

  @Test
  void walksFramesCutAcrossWritesAtEveryByte() {
    ByteBuf all = Unpooled.buffer();
    frame(all, 0x1, 0x4, 1, Unpooled.buffer().writeZero(20));
    frame(all, 0x8, 0, 0, Unpooled.buffer().writeInt(777));
    frame(all, 0x0, 0, 1, Unpooled.buffer().writeZero(30));
    frame(all, 0x8, 0, 0, Unpooled.buffer().writeInt(23));
    frame(all, 0x3, 0, 5, Unpooled.buffer().writeInt(8));
    for (int cut = 0; cut <= all.readableBytes(); cut++) {
      InboundMessages inbound = new InboundMessages(1000);
      ByteBuf in = frame(Unpooled.buffer(), 0x0, 0, 5, grpcPrefix(100));
      inbound.read(in);
      in.release();
      ConnectionWindow w = new ConnectionWindow(inbound);
      assertFalse(w.write(all.slice(0, cut)));
      assertFalse(w.write(all.slice(cut, all.readableBytes() - cut)));
      assertEquals(65535 + 800, w.granted(), "cut at " + cut);
      assertEquals(0, inbound.incompleteMessages(), "the reset stream is forgotten, cut " + cut);
      assertTrue(w.tracking());
    }
    all.release();
  }

  @Test
  void aWriteThatIsNoBufferStopsTheWalk() {
    ConnectionWindow w = new ConnectionWindow(new InboundMessages(1000));
    w.lost();
    assertFalse(w.tracking());
    w.hold(0);
    assertFalse(write(w, windowUpdate(0, 10)), "nothing is withheld once lost");
  }
}
