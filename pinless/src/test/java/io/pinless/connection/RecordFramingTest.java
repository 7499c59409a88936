package io.pinless.connection;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

class RecordFramingTest {
  /** The largest TLS-like record: a 5-byte header and 2^14 + 2048 bytes of body. */
  private static final int LARGEST = 5 + (1 << 14) + 2048;

  private static byte[] record(int body, int seed) {
    byte[] r = new byte[5 + body];
    r[0] = 23;
    r[1] = 3;
    r[2] = 3;
    r[3] = (byte) (body >>> 8);
    r[4] = (byte) body;
    for (int i = 5; i < r.length; i++) {
      r[i] = (byte) (i * 31 + seed);
    }
    return r;
  }

  private static ByteBuf pooled(byte[] bytes, int offset, int length) {
    return PooledByteBufAllocator.DEFAULT.directBuffer(length).writeBytes(bytes, offset, length);
  }

  /** The bound every read keeps: four times what came of the record, or the smallest head. */
  private static int bound(int received) {
    return Math.max(PartialRecord.MIN_HEAD_BYTES, PartialRecord.HEAD_RATIO * received);
  }

  @Test
  void aHeaderClaimingTheLargestRecordThenSingleBytesHoldsAtMostFourTimesWhatCame() {
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(TestRecordLayer.tlsLike());
    EmbeddedChannel ch = new EmbeddedChannel(h);
    byte[] r = record(LARGEST - 5, 1);
    ch.writeInbound(pooled(r, 0, 6));
    assertTrue(h.layer.heldBytes() <= bound(6), "after the header and a byte: " + h.layer.heldBytes());
    for (int i = 6; i < 4000; i++) {
      ch.writeInbound(pooled(r, i, 1));
      int received = i + 1;
      assertTrue(h.layer.heldBytes() <= bound(received),
          received + " bytes received, " + h.layer.heldBytes() + " held");
      // A read that brings nothing: the read loop releases its buffer unread.
      ByteBuf unread = h.layer.nextReadBuffer();
      if (unread != null) {
        unread.release();
      }
      assertTrue(h.layer.heldBytes() <= bound(received), "a read buffer is the read loop's");
    }
    ch.writeInbound(pooled(r, 4000, r.length - 4000));
    assertArrayEquals(Arrays.copyOfRange(r, 5, r.length), h.plaintext.toByteArray());
    assertEquals(0, h.layer.heldBytes());
    assertTrue(h.errors.isEmpty(), h.errors::toString);
    ch.finishAndReleaseAll();
  }

  @Test
  void aLargeRestIsReadStraightIntoARecordGrownToFourTimesWhatCame() {
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(TestRecordLayer.tlsLike());
    EmbeddedChannel ch = new EmbeddedChannel(h);
    byte[] r = record(LARGEST - 5, 2);
    ch.writeInbound(pooled(r, 0, 2000));
    assertTrue(h.layer.heldBytes() <= bound(2000), "" + h.layer.heldBytes());
    ByteBuf into = h.layer.nextReadBuffer();
    assertEquals(2000, into.writerIndex(), "the read goes on behind the head");
    assertEquals(bound(2000), into.capacity(), "grown to four times what came");
    into.writeBytes(r, 2000, into.writableBytes());
    ch.writeInbound(into);
    ByteBuf rest = h.layer.nextReadBuffer();
    assertEquals(LARGEST, rest.capacity(), "a quarter has come: the whole record");
    rest.writeBytes(r, rest.writerIndex(), rest.writableBytes());
    ch.writeInbound(rest);
    assertArrayEquals(Arrays.copyOfRange(r, 5, r.length), h.plaintext.toByteArray());
    assertEquals(0, h.layer.heldBytes());
    ch.finishAndReleaseAll();
  }

  @Test
  void aSmallHeadIsCopiedInFrontOfTheReadSoTheRestIsNotCopied() {
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(TestRecordLayer.tlsLike());
    EmbeddedChannel ch = new EmbeddedChannel(h);
    byte[] r = record(LARGEST - 5, 3);
    ch.writeInbound(pooled(r, 0, 100));
    assertEquals(bound(100), h.layer.heldBytes());
    ByteBuf into = h.layer.nextReadBuffer();
    assertEquals(100, into.writerIndex(), "the head in front");
    assertEquals(LARGEST, into.capacity(), "room for the rest behind it");
    into.writeBytes(r, 100, 10000);
    ch.writeInbound(into);
    assertEquals(LARGEST, h.layer.heldBytes(), "over a quarter: kept where it lies");
    ByteBuf rest = h.layer.nextReadBuffer();
    assertEquals(10100, rest.writerIndex());
    rest.writeBytes(r, 10100, r.length - 10100);
    ch.writeInbound(rest);
    assertArrayEquals(Arrays.copyOfRange(r, 5, r.length), h.plaintext.toByteArray());
    assertEquals(0, h.layer.heldBytes());
    ch.finishAndReleaseAll();
  }

  /** The warnings {@link RecordFraming} logs while {@code run} runs, from a fresh process state. */
  private static List<String> ringWarnings(Runnable run) {
    Logger logger = Logger.getLogger(RecordFraming.class.getName());
    List<String> warnings = new ArrayList<>();
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord record) {
        if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
          warnings.add(new java.util.logging.SimpleFormatter().formatMessage(record));
        }
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    RecordFraming.warnedOfRing.set(false);
    RecordFraming.largestTransportBuffer.set(0);
    logger.addHandler(handler);
    try {
      run.run();
    } finally {
      logger.removeHandler(handler);
      RecordFraming.warnedOfRing.set(false);
      RecordFraming.largestTransportBuffer.set(0);
    }
    return warnings;
  }

  @Test
  void aRingOfSmallBuffersIsWarnedOfOnceAndARingOfTwoMebibytesForTlsRecordsNot() {
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(TestRecordLayer.tlsLike());
    EmbeddedChannel ch = new EmbeddedChannel(h);
    List<String> none = ringWarnings(() -> {
      h.layer.readSizedByTransport(49152);
      ch.writeInbound(pooled(record(LARGEST - 5, 1), 0, LARGEST));
      h.layer.readSizedByTransport(RecordFraming.RING_BUFFER_BYTES);
      // An incremental ring's partly used buffer: the ring's buffers are the largest seen.
      h.layer.readSizedByTransport(49152);
    });
    assertEquals(List.of(), none, "no record before the first read; then a ring of 2 MiB");
    List<String> once = ringWarnings(() -> {
      h.layer.readSizedByTransport(49152);
      h.layer.readSizedByTransport(49152);
    });
    assertEquals(1, once.size(), once::toString);
    assertTrue(once.get(0).contains("records of " + LARGEST + " bytes"), once.get(0));
    assertTrue(once.get(0).contains("ring of 49152-byte buffers"), once.get(0));
    assertTrue(once.get(0).contains("IO_URING_BUFFER_GROUP_ID"), once.get(0));
    ch.finishAndReleaseAll();
  }

  @Test
  void aRingIsWarnedOfForRecordsLargerThanTlsOnesWhateverItsBuffers() {
    TestRecordLayer layer = new TestRecordLayer(4, header -> 4 + (int) header);
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(layer);
    EmbeddedChannel ch = new EmbeddedChannel(h);
    byte[] r = new byte[4 + RecordFraming.RING_RECORD_BYTES + 1];
    r[1] = (byte) ((r.length - 4) >>> 16);
    r[2] = (byte) ((r.length - 4) >>> 8);
    r[3] = (byte) (r.length - 4);
    ch.writeInbound(pooled(r, 0, r.length));
    List<String> once = ringWarnings(() -> layer.readSizedByTransport(8 << 20));
    assertEquals(1, once.size(), once::toString);
    assertTrue(once.get(0).contains("records of " + r.length + " bytes"), once.get(0));
    ch.finishAndReleaseAll();
  }

  @Test
  void decodesRecordsSplitAtEveryByte() {
    byte[] stream = concat(record(0, 0), record(3, 1), record(LARGEST - 5, 2), record(700, 3));
    byte[] expected = concat(Arrays.copyOfRange(record(3, 1), 5, 8),
        Arrays.copyOfRange(record(LARGEST - 5, 2), 5, LARGEST),
        Arrays.copyOfRange(record(700, 3), 5, 705));
    for (int cut = 1; cut < stream.length; cut += 97) {
      TestRecordLayer.Handler h = new TestRecordLayer.Handler(TestRecordLayer.tlsLike());
      EmbeddedChannel ch = new EmbeddedChannel(h);
      ch.writeInbound(pooled(stream, 0, cut));
      ch.writeInbound(pooled(stream, cut, stream.length - cut));
      assertArrayEquals(expected, h.plaintext.toByteArray(), "cut at " + cut);
      assertEquals(0, h.layer.heldBytes());
      ch.finishAndReleaseAll();
    }
  }

  @Test
  void aCloseMidRecordNamesWhatCameAndReleasesIt() {
    TestRecordLayer.Handler h = new TestRecordLayer.Handler(TestRecordLayer.tlsLike());
    EmbeddedChannel ch = new EmbeddedChannel(h);
    byte[] r = record(LARGEST - 5, 1);
    ch.writeInbound(pooled(r, 0, 3));
    ch.writeInbound(pooled(r, 3, 300));
    ch.close();
    assertEquals(1, h.errors.size());
    assertTrue(h.errors.get(0).getMessage().contains("303 of " + LARGEST), h.errors.toString());
    assertEquals(0, h.layer.heldBytes());
    ch.finishAndReleaseAll();
  }

  private static byte[] concat(byte[]... parts) {
    int n = 0;
    for (byte[] p : parts) {
      n += p.length;
    }
    byte[] all = new byte[n];
    int i = 0;
    for (byte[] p : parts) {
      System.arraycopy(p, 0, all, i, p.length);
      i += p.length;
    }
    return all;
  }
}
