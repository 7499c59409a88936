package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128;
import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY16;
import static io.pinless.alts.RecordChannels.KEY44;
import static io.pinless.alts.RecordChannels.concat;
import static io.pinless.alts.RecordChannels.direct;
import static io.pinless.alts.RecordChannels.encode;
import static io.pinless.alts.RecordChannels.feed;
import static io.pinless.alts.RecordChannels.pattern;
import static io.pinless.alts.RecordChannels.putIntLE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.PinlessMetrics;
import io.pinless.alts.AltsRecordException.Reason;
import io.pinless.alts.RecordChannels.Capture;
import io.pinless.connection.ConnectionHandler;
import io.pinless.connection.RecordFraming;
import io.pinless.testing.Hex;
import java.util.Arrays;
import javax.crypto.AEADBadTagException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class AltsRecordDecoderTest {
  private static final int MAX = 16384;

  private static final class Run {
    final Capture capture = new Capture();
    final RecordChannels.CloseRecorder closer = new RecordChannels.CloseRecorder();
    final AltsRecordDecoder decoder;
    final EmbeddedChannel ch;

    Run(AltsRecordProtocol protocol, byte[] key, boolean isClient, int max) {
      decoder = new AltsRecordDecoder(protocol, key, isClient, max);
      ch = RecordChannels.decoderChannel(closer, decoder, capture);
    }
  }

  /** A server's decoder: reads what a client encoder sends. */
  private static Run server() {
    return new Run(ALTSRP_GCM_AES128_REKEY, KEY44, false, MAX);
  }

  private static byte[] clientFrames(byte[]... messages) {
    return encode(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, messages);
  }

  @Test
  void decodesGrpcCoreFramesInBothDirectionsAtEverySplit() {
    JsonObject file = Hex.vectors("grpc-core_alts_frame_protector_test.json");
    byte[] key = Hex.decode(file.get("key").getAsString());
    int cases = 0;
    for (JsonElement e : file.getAsJsonArray("cases")) {
      JsonObject c = e.getAsJsonObject();
      checkEverySplit(key, false, hex(c, "client_expected_frame"), hex(c, "client_message"));
      checkEverySplit(key, true, hex(c, "server_expected_frame"), hex(c, "server_message"));
      cases++;
    }
    assertEquals(6, cases);
  }

  private static byte[] hex(JsonObject o, String field) {
    return Hex.decode(o.get(field).getAsString());
  }

  /** Every read size from 1 byte to whole, and every two-read split point. */
  private static void checkEverySplit(byte[] key, boolean isClient, byte[] frame, byte[] message) {
    for (int chunk = 1; chunk <= frame.length; chunk++) {
      Run r = new Run(ALTSRP_GCM_AES128, key, isClient, MAX);
      feed(r.ch, frame, chunk);
      assertArrayEquals(message, r.capture.bytes(), "chunk " + chunk);
      assertTrue(r.capture.errors.isEmpty());
      assertEquals(0, r.decoder.heldBytes());
      assertFalse(r.ch.finishAndReleaseAll());
    }
    for (int split = 1; split < frame.length; split++) {
      Run r = new Run(ALTSRP_GCM_AES128, key, isClient, MAX);
      r.ch.writeInbound(direct(frame, 0, split));
      r.ch.writeInbound(direct(frame, split, frame.length - split));
      assertArrayEquals(message, r.capture.bytes(), "split " + split);
      r.ch.finishAndReleaseAll();
    }
  }

  @Test
  void decodesRecordStreamSplitAtEveryByte() {
    byte[][] messages = {pattern(1, 1), pattern(0, 2), pattern(300, 3), pattern(MAX - 24, 4), pattern(17, 5)};
    byte[] stream = clientFrames(messages);
    byte[] expected = concat(messages);
    for (int chunk = 1; chunk <= stream.length; chunk += chunk < 64 ? 1 : 97) {
      Run r = server();
      feed(r.ch, stream, chunk);
      assertArrayEquals(expected, r.capture.bytes(), "chunk " + chunk);
      assertEquals(0, r.decoder.heldBytes());
      r.ch.finishAndReleaseAll();
    }
    Run whole = server();
    feed(whole.ch, stream, stream.length);
    assertArrayEquals(expected, whole.capture.bytes());
    assertEquals(1, whole.capture.reads, "one plaintext buffer per read");
    whole.ch.finishAndReleaseAll();
  }

  @Test
  void acceptsAFrameOfExactlyTheMaximumSize() {
    byte[] frame = clientFrames(pattern(MAX - 24, 9));
    assertEquals(MAX, frame.length);
    Run r = server();
    feed(r.ch, frame, frame.length);
    assertEquals(MAX - 24, r.capture.bytes().length);
    assertTrue(r.capture.errors.isEmpty());
    r.ch.finishAndReleaseAll();
  }

  @Test
  void partialRecordKeepsOnlyItsOwnBytesAndReleasesTheReadBuffer() {
    byte[] first = clientFrames(pattern(1000, 1), pattern(5000, 2));
    int firstFrame = 1000 + 24;
    // One 64 KiB read: the first record and the first 100 bytes of the second.
    ByteBuf read = Unpooled.directBuffer(65536);
    read.writeBytes(first, 0, firstFrame + 100);
    Run r = server();
    r.ch.writeInbound(read);
    assertEquals(0, read.refCnt(), "the read buffer is released, not pinned by a slice");
    assertEquals(400, r.decoder.heldBytes(), "under a quarter of the record: four times its head");
    r.ch.writeInbound(direct(first, firstFrame + 100, 2000));
    assertEquals(5000 + 24, r.decoder.heldBytes(), "more of it: a buffer of the record's size");
    r.ch.writeInbound(direct(first, firstFrame + 2100, first.length - firstFrame - 2100));
    assertEquals(0, r.decoder.heldBytes(), "idle: nothing held");
    assertArrayEquals(concat(pattern(1000, 1), pattern(5000, 2)), r.capture.bytes());
    r.ch.finishAndReleaseAll();
  }

  @Test
  void aPartialHeaderHoldsNoBuffer() {
    byte[] frame = clientFrames(pattern(10, 1));
    Run r = server();
    r.ch.writeInbound(direct(frame, 0, 5));
    assertEquals(0, r.decoder.heldBytes());
    r.ch.writeInbound(direct(frame, 5, frame.length - 5));
    assertArrayEquals(pattern(10, 1), r.capture.bytes());
    r.ch.finishAndReleaseAll();
  }

  @Test
  void crossesTheRekeyBoundaryAt65536Records() {
    // 70,000 one-byte records: both ends must derive the next key at record 65,536.
    EmbeddedChannel enc = new EmbeddedChannel(new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX));
    Run r = server();
    long total = 0;
    for (int i = 0; i < 70_000; i++) {
      enc.writeOutbound(direct(new byte[] {(byte) i}));
      ByteBuf frame = enc.readOutbound();
      r.ch.writeInbound(frame);
      total++;
    }
    assertTrue(r.capture.errors.isEmpty(), () -> r.capture.errors.toString());
    byte[] got = r.capture.bytes();
    assertEquals(total, got.length);
    for (int i = 0; i < got.length; i++) {
      assertEquals((byte) i, got[i], "record " + i);
    }
    enc.finishAndReleaseAll();
    r.ch.finishAndReleaseAll();
  }

  // ---- bad input: each is fatal, delivers what came before, nothing of the bad record, leaks nothing

  private static Run feedBad(byte[] good, byte[] bad, int chunk) {
    Run r = server();
    feed(r.ch, concat(good, bad), chunk);
    return r;
  }

  private static void assertFatal(Run r, Reason reason, byte[] deliveredBefore, String inMessage) {
    AltsRecordException e = r.capture.onlyError();
    assertEquals(reason, e.reason(), e.getMessage());
    assertTrue(e.getMessage().contains(inMessage), e.getMessage());
    assertArrayEquals(deliveredBefore, r.capture.bytes());
    assertEquals(1, r.closer.closes, "the decoder closes the channel");
    assertEquals(0, r.decoder.heldBytes());
    // Reads that still arrive are dropped and released; the error is not repeated.
    ByteBuf later = direct(clientFrames(pattern(5, 5)));
    r.ch.writeInbound(later);
    assertEquals(0, later.refCnt());
    assertArrayEquals(deliveredBefore, r.capture.bytes());
    r.closer.hold = false;
    r.ch.close();
    assertEquals(1, r.capture.errors.size());
    r.ch.finishAndReleaseAll();
  }

  private static byte[] header(long length, long type) {
    byte[] h = new byte[8];
    putIntLE(h, 0, length);
    putIntLE(h, 4, type);
    return h;
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 3, 8, 1 << 20})
  void rejectsLengthBelowTwenty(int chunk) {
    byte[] good = clientFrames(pattern(50, 1));
    Run r = feedBad(good, concat(header(19, 6), new byte[19]), chunk);
    assertFatal(r, Reason.LENGTH_TOO_SMALL, pattern(50, 1), "record length 19 is below the minimum 20");
  }

  @Test
  void rejectsLengthZero() {
    Run r = feedBad(new byte[0], header(0, 6), 8);
    assertFatal(r, Reason.LENGTH_TOO_SMALL, new byte[0], "record length 0");
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 5, 1 << 20})
  void rejectsAFrameOneByteOverTheMaximumBeforeAllocating(int chunk) {
    byte[] good = clientFrames(pattern(70, 1));
    // 4 + length = MAX + 1; only the header is sent: the error must not wait for the body.
    Run r = feedBad(good, header(MAX - 3, 6), chunk);
    assertFatal(r, Reason.LENGTH_TOO_LARGE, pattern(70, 1),
        "record frame of " + (MAX + 1) + " bytes exceeds the maximum frame size " + MAX);
  }

  @Test
  void rejectsAHostileFourGigabyteLength() {
    Run r = feedBad(new byte[0], header(0xffffffffL, 6), 8);
    assertFatal(r, Reason.LENGTH_TOO_LARGE, new byte[0], "4294967299");
  }

  @ParameterizedTest
  @ValueSource(longs = {0, 5, 7, 0x106, 0x80000006L})
  void rejectsATypeOtherThanSix(long type) {
    byte[] good = clientFrames(pattern(10, 1));
    byte[] bad = clientFrames(pattern(10, 1), pattern(10, 2));
    byte[] second = Arrays.copyOfRange(bad, 34, bad.length);
    putIntLE(second, 4, type);
    Run r = feedBad(good, second, 1 << 20);
    assertFatal(r, Reason.BAD_TYPE, pattern(10, 1), "0x" + Long.toHexString(type));
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 13, 1 << 20})
  void rejectsATagThatDoesNotVerify(int chunk) {
    byte[] stream = clientFrames(pattern(100, 1), pattern(100, 2), pattern(100, 3));
    stream[124 + 8 + 50] ^= 1; // a ciphertext bit of the second record
    Run r = server();
    feed(r.ch, stream, chunk);
    AltsRecordException e = r.capture.onlyError();
    assertEquals(Reason.BAD_TAG, e.reason());
    assertTrue(e.getCause() instanceof AEADBadTagException, String.valueOf(e.getCause()));
    assertFatal(r, Reason.BAD_TAG, pattern(100, 1), "failed authentication");
  }

  @Test
  void rejectsAFlippedTagBit() {
    byte[] stream = clientFrames(pattern(33, 1));
    stream[stream.length - 1] ^= (byte) 0x80;
    Run r = server();
    feed(r.ch, stream, stream.length);
    assertFatal(r, Reason.BAD_TAG, new byte[0], "failed authentication");
  }

  @Test
  void rejectsARecordFromTheWrongDirection() {
    // A server decoder given a frame a server encoder sealed (a reflected record).
    byte[] reflected = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, MAX, pattern(64, 1));
    Run r = server();
    feed(r.ch, reflected, reflected.length);
    assertFatal(r, Reason.BAD_TAG, new byte[0], "wrong direction");
  }

  @Test
  void rejectsARecordOnceTheCounterOverflows() {
    Run r = new Run(ALTSRP_GCM_AES128, KEY16, false, MAX);
    EmbeddedChannel enc = new EmbeddedChannel(new AltsRecordEncoder(ALTSRP_GCM_AES128, KEY16, true, MAX));
    byte[] last = Hex.decode("ffffffffff00000000000000"); // the last of 2^40 counters
    ((AltsRecordEncoder) enc.pipeline().first()).counter().set(last);
    r.decoder.counter().set(last);
    enc.writeOutbound(direct(pattern(20, 1)));
    r.ch.writeInbound((ByteBuf) enc.readOutbound());
    assertArrayEquals(pattern(20, 1), r.capture.bytes());
    // The peer sends one more record (its encoder refuses; forge one under a fresh counter).
    byte[] another = encode(ALTSRP_GCM_AES128, KEY16, true, MAX, pattern(20, 2));
    feed(r.ch, another, another.length);
    assertFatal(r, Reason.COUNTER_OVERFLOW, pattern(20, 1), "overflowed");
    enc.finishAndReleaseAll();
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 3, 8, 60})
  void reportsARecordCutShortByClose(int tailBytes) {
    byte[] stream = clientFrames(pattern(40, 1), pattern(100, 2));
    Run r = server();
    r.closer.hold = false;
    feed(r.ch, Arrays.copyOf(stream, 64 + tailBytes), 1 << 20);
    r.ch.close();
    assertArrayEquals(pattern(40, 1), r.capture.bytes());
    assertTrue(r.capture.inactive);
    if (tailBytes == 0) {
      assertTrue(r.capture.errors.isEmpty(), "a close between records is a clean end");
    } else {
      AltsRecordException e = r.capture.onlyError();
      assertEquals(Reason.TRUNCATED, e.reason());
      assertTrue(e.getMessage().contains("after " + tailBytes + " of"), e.getMessage());
    }
    assertEquals(0, r.decoder.heldBytes());
    r.ch.finishAndReleaseAll();
  }

  @Test
  void removingTheDecoderMidRecordReleasesWhatItHeld() {
    byte[] stream = clientFrames(pattern(500, 1));
    Run r = server();
    r.ch.writeInbound(direct(stream, 0, 100));
    assertEquals(400, r.decoder.heldBytes());
    r.ch.pipeline().remove(r.decoder);
    assertEquals(0, r.decoder.heldBytes());
    r.ch.finishAndReleaseAll();
  }

  @Test
  void passesOtherMessagesThrough() {
    Run r = server();
    Object event = "not a buffer";
    r.ch.writeInbound(event);
    assertEquals(1, r.capture.others.size());
    r.ch.finishAndReleaseAll();
  }

  @Test
  void rejectsAMaximumFrameSizeOutOfRange() {
    assertThrows(IllegalArgumentException.class,
        () -> new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, 24));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, (1 << 20) + 1));
    assertTrue(e.getMessage().contains("1048577"), e.getMessage());
  }

  @Test
  void usesConscryptWhenItIsOnTheClasspath() {
    assertTrue(server().decoder.providerName().startsWith("Conscrypt"));
    assertTrue(server().decoder.providerName().endsWith("(native calls)"), server().decoder.providerName());
  }

  @Test
  void inAConnectionTheRestOfACutRecordIsReadStraightIntoItsBuffer() {
    byte[] message = pattern(40000, 5);
    byte[] stream = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, 65536, message);
    AltsRecordStage decoder = new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 65536);
    ConnectionHandler connection = connection(decoder);
    Capture capture = new Capture();
    EmbeddedChannel ch = new EmbeddedChannel(connection, capture);
    io.netty.channel.RecvByteBufAllocator.Handle handle = readHandle(ch);
    ByteBuf fresh = handle.allocate(ch.alloc());
    assertEquals(0, fresh.readerIndex(), "no record yet: a fresh buffer, sized by the decoder");
    assertEquals(65536, fresh.writableBytes(), "a fresh read holds one frame of the largest size");
    fresh.writeBytes(stream, 0, 10000);
    ch.writeInbound(fresh);
    assertEquals(40000, decoder.heldBytes(), "under a quarter of the record: four times its head");

    ByteBuf into = handle.allocate(ch.alloc());
    assertEquals(40000, decoder.heldBytes(), "no more than four times the head for the read");
    assertEquals(30000, into.writableBytes(), "the read goes into the record, behind its head");
    into.writeBytes(stream, 10000, 20000);
    ch.writeInbound(into);
    assertEquals(0, capture.plaintext.size());
    ByteBuf rest = handle.allocate(ch.alloc());
    assertEquals(stream.length - 30000, rest.writableBytes());
    rest.writeBytes(stream, 30000, stream.length - 30000);
    ch.writeInbound(rest);
    assertArrayEquals(message, capture.plaintext.toByteArray());
    assertEquals(0, decoder.heldBytes());

    ByteBuf after = handle.allocate(ch.alloc());
    assertEquals(0, after.readerIndex(), "between records: fresh");
    assertEquals(Math.max(stream.length, io.pinless.read.ReadPolicy.MAX_READ_BYTES),
        after.writableBytes(), "between records: the last record's size, at least the policy's");
    after.release();
    ch.pipeline().remove(connection);
    ch.finishAndReleaseAll();
  }

  @Test
  void nineBytesOfALargestRecordPinNoMoreThanFourTimesThemOnEveryRead() {
    int max = 128 * 1024;
    AltsRecordStage decoder = new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, max);
    ConnectionHandler connection = connection(decoder);
    EmbeddedChannel ch = new EmbeddedChannel(connection, new Capture());
    io.netty.channel.RecvByteBufAllocator.Handle handle = readHandle(ch);
    byte[] head = concat(header(max - 4, 6), new byte[] {1});
    ByteBuf first = handle.allocate(ch.alloc());
    first.writeBytes(head);
    ch.writeInbound(first);
    for (int received = head.length; received < 2000; received++) {
      assertTrue(decoder.heldBytes() <= Math.max(64, 4 * received),
          received + " bytes received, " + decoder.heldBytes() + " held");
      ByteBuf next = handle.allocate(ch.alloc());
      assertTrue(decoder.heldBytes() <= Math.max(64, 4 * received),
          "sizing the next read: " + decoder.heldBytes() + " held");
      ch.writeInbound(next.writeByte(received));
    }
    ch.pipeline().remove(connection);
    ch.finishAndReleaseAll();
  }

  @Test
  void releasesEveryReadAroundAnOversizedFrameAtSeededRandomSplits() {
    int max = 128 * 1024;
    for (int seed = 0; seed < 200; seed++) {
      java.util.SplittableRandom random = new java.util.SplittableRandom(seed);
      byte[][] messages = new byte[random.nextInt(5)][];
      for (int i = 0; i < messages.length; i++) {
        messages[i] = pattern(random.nextInt(1, random.nextBoolean() ? 200 : max - 24), i);
      }
      byte[] good = encode(ALTSRP_GCM_AES128_REKEY, KEY44, true, max, messages);
      byte[] stream = concat(good, header(max - 3 + random.nextInt(1000), 6),
          new byte[random.nextInt(100)]);
      Run r = new Run(ALTSRP_GCM_AES128_REKEY, KEY44, false, max);
      java.util.List<ByteBuf> reads = new java.util.ArrayList<>();
      for (int i = 0; i < stream.length; ) {
        int n = Math.min(stream.length - i, 1 + random.nextInt(random.nextBoolean() ? 16 : 2 * max));
        ByteBuf read = io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(
            n + random.nextInt(max));
        reads.add(read.writeBytes(stream, i, n));
        r.ch.writeInbound(read);
        i += n;
      }
      String where = "seed " + seed;
      assertEquals(Reason.LENGTH_TOO_LARGE, r.capture.onlyError().reason(), where);
      assertArrayEquals(concat(messages), r.capture.bytes(), where);
      assertEquals(0, r.decoder.heldBytes(), where);
      for (ByteBuf read : reads) {
        assertEquals(0, read.refCnt(), where + ": a read is still retained");
      }
      r.closer.hold = false;
      r.ch.finishAndReleaseAll();
    }
  }

  @Test
  void freshReadsTakeThePeersRecordSizeSoACutRecordStaysWhereItCame() {
    // A grpc-java peer seals each 64 KiB DATA frame it flushes as a record of its own, smaller
    // than the 128 KiB both ends allow.
    int recordBytes = 65579;
    byte[][] messages = new byte[4][];
    for (int i = 0; i < messages.length; i++) {
      messages[i] = pattern(recordBytes - AltsFrames.OVERHEAD_BYTES, 20 + i);
    }
    byte[] stream = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, 128 * 1024, messages);
    assertEquals(4 * recordBytes, stream.length, "one record per flush");
    AltsRecordStage decoder = new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 128 * 1024);
    ConnectionHandler connection = connection(decoder);
    Capture capture = new Capture();
    EmbeddedChannel ch = new EmbeddedChannel(connection, capture);
    io.netty.channel.RecvByteBufAllocator.Handle handle = readHandle(ch);
    long copiedBefore = PinlessMetrics.Metric.RECORD_BYTES_COPIED.value();

    ByteBuf first = handle.allocate(ch.alloc());
    assertEquals(128 * 1024, first.writableBytes(), "no record yet: one of the largest size");
    first.writeBytes(stream, 0, recordBytes);
    ch.writeInbound(first);
    ByteBuf second = handle.allocate(ch.alloc());
    assertEquals(recordBytes, second.writableBytes(), "sized to the record just read");
    second.writeBytes(stream, recordBytes, 30000);
    ch.writeInbound(second);
    assertEquals(recordBytes, decoder.heldBytes(), "the cut record stays in its read buffer");
    ByteBuf rest = handle.allocate(ch.alloc());
    assertEquals(recordBytes - 30000, rest.writableBytes(), "its rest is read in behind its head");
    rest.writeBytes(stream, recordBytes + 30000, recordBytes - 30000);
    ch.writeInbound(rest);
    ByteBuf third = handle.allocate(ch.alloc());
    assertEquals(recordBytes, third.writableBytes());
    third.writeBytes(stream, 2 * recordBytes, recordBytes);
    ch.writeInbound(third);
    ByteBuf fourth = handle.allocate(ch.alloc());
    fourth.writeBytes(stream, 3 * recordBytes, recordBytes);
    ch.writeInbound(fourth);

    byte[] expected = concat(messages);
    assertArrayEquals(expected, capture.plaintext.toByteArray());
    assertEquals(0, PinlessMetrics.Metric.RECORD_BYTES_COPIED.value() - copiedBefore,
        "no record byte copied");
    assertEquals(0, decoder.heldBytes());
    ch.pipeline().remove(connection);
    ch.finishAndReleaseAll();
  }

  @Test
  void aRecordASmallOnePushesPastItsReadStaysInThatReadAndOnlyItsRestIsCopied() {
    // A peer's window update or ping sealed alone, then a flush of records of the largest size.
    byte[] small = pattern(50, 30);
    byte[] large = pattern(128 * 1024 - AltsFrames.OVERHEAD_BYTES, 31);
    byte[] next = pattern(128 * 1024 - AltsFrames.OVERHEAD_BYTES, 32);
    byte[] stream = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, 128 * 1024, small, large, next);
    int smallRecord = small.length + AltsFrames.OVERHEAD_BYTES;
    AltsRecordStage decoder = new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 128 * 1024);
    ConnectionHandler connection = connection(decoder);
    Capture capture = new Capture();
    EmbeddedChannel ch = new EmbeddedChannel(connection, capture);
    io.netty.channel.RecvByteBufAllocator.Handle handle = readHandle(ch);
    long copiedBefore = PinlessMetrics.Metric.RECORD_BYTES_COPIED.value();

    ByteBuf first = handle.allocate(PooledByteBufAllocator.DEFAULT);
    assertEquals(128 * 1024, first.writableBytes(), "one record of the largest size");
    first.writeBytes(stream, 0, 128 * 1024);
    ch.writeInbound(first);
    assertTrue(decoder.heldBytes() > 0, "the large record is cut by the small one before it");
    assertEquals(0, PinlessMetrics.Metric.RECORD_BYTES_COPIED.value() - copiedBefore,
        "its head stays in its read, which grows in place for the rest");
    ByteBuf second = handle.allocate(PooledByteBufAllocator.DEFAULT);
    second.writeBytes(stream, 128 * 1024, stream.length - 128 * 1024);
    ch.writeInbound(second);

    assertArrayEquals(concat(small, large, next), capture.plaintext.toByteArray());
    assertEquals(smallRecord, PinlessMetrics.Metric.RECORD_BYTES_COPIED.value() - copiedBefore,
        "only the rest is copied, behind the head");
    assertEquals(0, decoder.heldBytes());
    ch.pipeline().remove(connection);
    ch.finishAndReleaseAll();
  }

  @ParameterizedTest
  @ValueSource(ints = {2000, 40000})
  void aRecordARestCompletesSharesAnOutputOnlyWhileItStaysSmall(int secondBytes) {
    byte[] first = pattern(30000, 3);
    byte[] second = pattern(secondBytes, 4);
    byte[] stream = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, 128 * 1024, first, second);
    AltsRecordStage decoder =
        new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 128 * 1024);
    ConnectionHandler connection = connection(decoder);
    Capture capture = new Capture();
    EmbeddedChannel ch = new EmbeddedChannel(connection, capture);
    int firstRecord = first.length + AltsFrames.OVERHEAD_BYTES;
    // All of the first record but its last 100 bytes, then those with the whole second record.
    ch.writeInbound(direct(Arrays.copyOfRange(stream, 0, firstRecord - 100)));
    ch.writeInbound(direct(Arrays.copyOfRange(stream, firstRecord - 100, stream.length)));
    assertArrayEquals(concat(first, second), capture.plaintext.toByteArray());
    boolean shared = first.length + second.length <= RecordFraming.MAX_SHARED_OUTPUT_BYTES;
    assertEquals(shared ? 1 : 2, capture.reads,
        shared ? "small together: one buffer" : "large together: a buffer each");
    ch.pipeline().remove(connection);
    ch.finishAndReleaseAll();
  }

  @Test
  void aPeersTinyRecordsStillShareFreshReads() {
    byte[] stream = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, 128 * 1024, pattern(10, 1));
    AltsRecordStage decoder = new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 128 * 1024);
    ConnectionHandler connection = connection(decoder);
    EmbeddedChannel ch = new EmbeddedChannel(connection, new Capture());
    io.netty.channel.RecvByteBufAllocator.Handle handle = readHandle(ch);
    ByteBuf first = handle.allocate(ch.alloc());
    first.writeBytes(stream);
    ch.writeInbound(first);
    ByteBuf next = handle.allocate(ch.alloc());
    assertEquals(io.pinless.read.ReadPolicy.MAX_READ_BYTES, next.writableBytes(),
        "after a tiny record: the read policy's size, not the record's");
    next.release();
    ch.pipeline().remove(connection);
    ch.finishAndReleaseAll();
  }

  /** The read handle of {@code ch}, reset for a read batch: what the read loop sizes reads by. */
  private static io.netty.channel.RecvByteBufAllocator.Handle readHandle(EmbeddedChannel ch) {
    io.netty.channel.RecvByteBufAllocator.Handle handle =
        ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    return handle;
  }

  /** A connection handler whose record stage is {@code stage}, with no frame slicer. */
  private static ConnectionHandler connection(AltsRecordStage stage) {
    ConnectionHandler connection =
        new ConnectionHandler(new io.pinless.read.ReadBudget(Long.MAX_VALUE), false, 48 * 1024);
    connection.install(stage, null);
    return connection;
  }

  @Test
  void aSmallRestOfACutRecordIsReadWithOneWholeFrameBehindIt() {
    AltsRecordStage decoder = new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 16384);
    ConnectionHandler reads = connection(decoder);
    EmbeddedChannel ch = new EmbeddedChannel(reads, new Capture());
    io.netty.channel.RecvByteBufAllocator.Handle handle = readHandle(ch);
    byte[] record = encode(ALTSRP_GCM_AES128_REKEY, KEY44, false, 16384, pattern(5000, 6));
    ch.writeInbound(Unpooled.wrappedBuffer(record, 0, 3000));
    ByteBuf restAndFrame = handle.allocate(ch.alloc());
    assertEquals(record.length - 3000 + 16384, restAndFrame.writableBytes());
    restAndFrame.writeBytes(record, 3000, record.length - 3000);
    ch.writeInbound(restAndFrame);
    assertEquals(0, decoder.heldBytes());
    // A rest as large as the read limit: asked for, capped at 132 KiB.
    ConnectionHandler big = connection(
        new AltsRecordStage(ALTSRP_GCM_AES128_REKEY, KEY44, true, 1 << 20));
    EmbeddedChannel ch2 = new EmbeddedChannel(big, new Capture());
    io.netty.channel.RecvByteBufAllocator.Handle handle2 = readHandle(ch2);
    ByteBuf capped = handle2.allocate(ch2.alloc());
    assertEquals(io.pinless.read.ReadPolicy.LARGEST_TARGET_READ_BYTES, capped.writableBytes());
    capped.release();
    ch.pipeline().remove(reads);
    ch.finishAndReleaseAll();
    ch2.pipeline().remove(big);
    ch2.finishAndReleaseAll();
  }
}
