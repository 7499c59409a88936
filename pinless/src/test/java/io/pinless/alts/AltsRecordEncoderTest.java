package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128;
import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY16;
import static io.pinless.alts.RecordChannels.KEY44;
import static io.pinless.alts.RecordChannels.concat;
import static io.pinless.alts.RecordChannels.direct;
import static io.pinless.alts.RecordChannels.drainOutbound;
import static io.pinless.alts.RecordChannels.feed;
import static io.pinless.alts.RecordChannels.pattern;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.UnsupportedMessageTypeException;
import io.pinless.alts.RecordChannels.Capture;
import io.pinless.testing.Hex;
import java.nio.channels.ClosedChannelException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class AltsRecordEncoderTest {
  private static final int MAX = 16384;

  private static EmbeddedChannel client(int max) {
    return new EmbeddedChannel(new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, max));
  }

  /** Decodes {@code frames} with a server decoder and returns the plaintext. */
  private static byte[] decodeAsServer(byte[] frames, int max) {
    return decodeAsServer(frames, max, AesGcm.preferred());
  }

  /** Decodes {@code frames} with a server decoder on {@code aes} and returns the plaintext. */
  private static byte[] decodeAsServer(byte[] frames, int max, AesGcm aes) {
    Capture capture = new Capture();
    EmbeddedChannel ch = new EmbeddedChannel(
        new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, false, max, aes), capture);
    feed(ch, frames, frames.length);
    assertTrue(capture.errors.isEmpty(), capture.errors::toString);
    ch.finishAndReleaseAll();
    return capture.bytes();
  }

  /** The lengths of the frames in {@code frames}, checking each header. */
  private static List<Integer> frameSizes(byte[] frames) {
    List<Integer> sizes = new ArrayList<>();
    ByteBuf b = Unpooled.wrappedBuffer(frames);
    while (b.isReadable()) {
      long length = b.readUnsignedIntLE();
      assertEquals(6, b.readIntLE());
      b.skipBytes((int) length - 4);
      sizes.add((int) length + 4);
    }
    return sizes;
  }

  @Test
  void producesGrpcCoreFramesInBothDirections() {
    JsonObject file = Hex.vectors("grpc-core_alts_frame_protector_test.json");
    byte[] key = Hex.decode(file.get("key").getAsString());
    int cases = 0;
    for (JsonElement e : file.getAsJsonArray("cases")) {
      JsonObject c = e.getAsJsonObject();
      for (boolean isClient : new boolean[] {true, false}) {
        String side = isClient ? "client" : "server";
        EmbeddedChannel ch =
            new EmbeddedChannel(new AltsRecordEncoder(ALTSRP_GCM_AES128, key, isClient, MAX));
        ch.writeOutbound(direct(Hex.decode(c.get(side + "_message").getAsString())));
        assertEquals(c.get(side + "_expected_frame").getAsString(), Hex.encode(drainOutbound(ch)));
        assertFalse(ch.finishAndReleaseAll());
      }
      cases++;
    }
    assertEquals(6, cases);
  }

  @ParameterizedTest
  @ValueSource(ints = {25, 1024, 16384, 131072, 1 << 20})
  void noFrameExceedsTheMaximumFrameSize(int max) {
    int total = Math.min(300_000, max * 3 + 7);
    byte[] message = pattern(total, max);
    EmbeddedChannel ch = client(max);
    ch.writeOutbound(direct(message));
    byte[] frames = drainOutbound(ch);
    List<Integer> sizes = frameSizes(frames);
    for (int i = 0; i < sizes.size(); i++) {
      assertTrue(sizes.get(i) <= max, "frame " + i + " is " + sizes.get(i));
      if (i < sizes.size() - 1) {
        assertEquals(max, sizes.get(i), "every frame but the last is full");
      }
    }
    assertArrayEquals(message, decodeAsServer(frames, max));
    ch.finishAndReleaseAll();
  }

  @Test
  void coalescesWritesUntilFlushIntoFullFrames() {
    EmbeddedChannel ch = client(MAX);
    byte[][] parts = new byte[40][];
    for (int i = 0; i < parts.length; i++) {
      parts[i] = pattern(1000 + i, i);
      ch.write(direct(parts[i]));
    }
    assertTrue(drainOutbound(ch).length == 0, "nothing leaves before flush");
    ch.flush();
    byte[] frames = drainOutbound(ch);
    byte[] expected = concat(parts);
    List<Integer> sizes = frameSizes(frames);
    assertEquals((expected.length + MAX - 25) / (MAX - 24), sizes.size());
    assertArrayEquals(expected, decodeAsServer(frames, MAX));
    ch.finishAndReleaseAll();
  }

  static java.util.stream.Stream<AesGcm> engines() {
    return Providers.all();
  }

  /** Every engine: the JDK's (pieces through update), Conscrypt's Cipher and native calls. */
  @ParameterizedTest
  @org.junit.jupiter.params.provider.MethodSource("engines")
  void sealsCompositeHeapAndDirectBuffersAlike(AesGcm aes) {
    byte[] a = pattern(700, 1);
    byte[] b = pattern(9000, 2);
    byte[] c = pattern(30, 3);
    CompositeByteBuf composite = PooledByteBufAllocator.DEFAULT.compositeDirectBuffer();
    composite.addComponent(true, direct(a));
    composite.addComponent(true, Unpooled.copiedBuffer(b));
    composite.addComponent(true, direct(c));
    ByteBuf heap = Unpooled.copiedBuffer(b);
    EmbeddedChannel ch = new EmbeddedChannel(
        new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, aes));
    ch.write(composite);
    ch.write(heap);
    ch.writeOutbound(direct(c));
    assertEquals(0, composite.refCnt());
    assertEquals(0, heap.refCnt());
    // A heap buffer alone in a frame: sealed from the heap, or from a direct copy with Conscrypt.
    ByteBuf lone = Unpooled.copiedBuffer(b);
    ch.writeOutbound(lone);
    assertEquals(0, lone.refCnt());
    assertArrayEquals(concat(a, b, c, b, c, b), decodeAsServer(drainOutbound(ch), MAX, aes));
    ch.finishAndReleaseAll();
  }

  /** Conscrypt's native calls, counting the seals made through them. */
  private static final class CountedCalls {
    final java.util.concurrent.atomic.AtomicInteger seals =
        new java.util.concurrent.atomic.AtomicInteger();
    final AesGcm aes;

    CountedCalls() throws ReflectiveOperationException {
      ConscryptAead calls = ConscryptAead.loadOrNull();
      assertTrue(calls != null, "Conscrypt's native AEAD calls must load here");
      java.lang.invoke.MethodHandle count = java.lang.invoke.MethodHandles.lookup().findVirtual(
          java.util.concurrent.atomic.AtomicInteger.class, "incrementAndGet",
          java.lang.invoke.MethodType.methodType(int.class)).bindTo(seals);
      java.lang.invoke.MethodHandle seal = java.lang.invoke.MethodHandles.foldArguments(
          calls.seal, java.lang.invoke.MethodHandles.dropReturn(count));
      aes = new AesGcm(CryptoProvider.conscryptOrNull(),
          new ConscryptAead(seal, calls.open, calls.aes128Gcm));
    }
  }

  @Test
  void aHeapWriteIsSealedByTheNativeCallsFromADirectCopy() throws Exception {
    CountedCalls calls = new CountedCalls();
    byte[] bytes = pattern(3 * (MAX - 24), 4);
    EmbeddedChannel ch = new EmbeddedChannel(
        new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, calls.aes));
    ch.writeOutbound(Unpooled.wrappedBuffer(bytes));
    assertEquals(3, calls.seals.get(), "every frame sealed by the native calls");
    assertArrayEquals(bytes, decodeAsServer(drainOutbound(ch), MAX));
    ch.finishAndReleaseAll();
  }

  /**
   * A frame buffer that would end where the plaintext begins (pooled buffers of one size lie side
   * by side) is traded for another: Conscrypt would take the two for overlapping and copy.
   */
  @Test
  void neverSealsIntoAFrameThatEndsWhereThePlaintextBegins() throws Exception {
    CountedCalls calls = new CountedCalls();
    int payload = 1000;
    int frameBytes = payload + 24;
    ByteBuf memory = PooledByteBufAllocator.DEFAULT.directBuffer(2 * frameBytes);
    assertTrue(memory.hasMemoryAddress(), "the guard needs memory addresses");
    ByteBuf before = memory.retainedSlice(0, frameBytes).clear();
    ByteBuf plaintext = memory.retainedSlice(frameBytes, payload).clear();
    plaintext.writeBytes(pattern(payload, 5));
    memory.release();
    List<ByteBuf> handedOut = new ArrayList<>();
    PooledByteBufAllocator alloc = new PooledByteBufAllocator(true) {
      @Override
      protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        ByteBuf b = handedOut.isEmpty() && initialCapacity == frameBytes
            ? before
            : super.newDirectBuffer(initialCapacity, maxCapacity);
        handedOut.add(b);
        return b;
      }
    };
    EmbeddedChannel ch = new EmbeddedChannel(
        new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, calls.aes));
    ch.config().setAllocator(alloc);
    ch.writeOutbound(plaintext);
    ByteBuf frame = ch.readOutbound();
    try {
      assertTrue(handedOut.get(0) == before, "the allocator handed out the adjacent buffer");
      assertTrue(frame != before, "sealed into the buffer that ends at the plaintext");
      assertEquals(0, before.refCnt(), "the adjacent buffer went back");
      assertEquals(1, calls.seals.get());
      assertArrayEquals(pattern(payload, 5),
          decodeAsServer(io.netty.buffer.ByteBufUtil.getBytes(frame), MAX));
    } finally {
      frame.release();
    }
    assertEquals(0, plaintext.refCnt());
    ch.finishAndReleaseAll();
  }

  @Test
  void writesAnEmptyBufferAndCompletesItsPromise() {
    EmbeddedChannel ch = client(MAX);
    ChannelFuture f = ch.writeAndFlush(Unpooled.EMPTY_BUFFER);
    assertTrue(f.isSuccess());
    ChannelFuture g = ch.write(direct(new byte[0]));
    ChannelFuture h = ch.writeAndFlush(direct(pattern(10, 1)));
    assertTrue(g.isSuccess() && h.isSuccess());
    assertArrayEquals(pattern(10, 1), decodeAsServer(drainOutbound(ch), MAX));
    ch.finishAndReleaseAll();
  }

  /** Holds the frames the encoder writes, with their promises, instead of passing them on. */
  private static final class HeldWrites extends ChannelOutboundHandlerAdapter {
    final List<ByteBuf> frames = new ArrayList<>();
    final List<ChannelPromise> promises = new ArrayList<>();

    /** @param msg owned: kept in {@link #frames}, which the test releases */
    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
      frames.add((ByteBuf) msg);
      promises.add(promise);
    }
  }

  @Test
  void aWritesPromiseCompletesWhenTheFrameWithItsLastByteIsWritten() {
    HeldWrites held = new HeldWrites();
    EmbeddedChannel ch =
        new EmbeddedChannel(held, new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, 1024));
    ByteBuf first = direct(pattern(1500, 1)); // ends in frame 2
    ByteBuf second = direct(pattern(10, 2)); // ends in frame 2 too
    ByteBuf third = direct(pattern(600, 3)); // ends in frame 3
    ChannelFuture f1 = ch.write(first);
    ChannelFuture f2 = ch.write(second);
    ChannelFuture f3 = ch.write(third);
    ch.flush();
    assertEquals(3, held.frames.size());
    assertEquals(0, first.refCnt(), "released once sealed, before the write completes");
    assertFalse(f1.isDone() || f2.isDone() || f3.isDone());
    held.promises.get(0).setSuccess();
    assertFalse(f1.isDone(), "its last byte is in frame 2");
    held.promises.get(1).setSuccess();
    assertTrue(f1.isSuccess() && f2.isSuccess());
    assertFalse(f3.isDone());
    IllegalStateException boom = new IllegalStateException("socket broke");
    held.promises.get(2).setFailure(boom);
    assertTrue(f3.cause() == boom);
    held.frames.forEach(ByteBuf::release);
    ch.finishAndReleaseAll();
  }

  /** Completes each frame's write as soon as it is written, keeping the frames. */
  private static final class ImmediateWrites extends ChannelOutboundHandlerAdapter {
    final List<ByteBuf> frames = new ArrayList<>();

    /** @param msg owned: kept in {@link #frames}, which the test releases */
    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
      frames.add((ByteBuf) msg);
      promise.setSuccess();
    }

    byte[] drain() {
      byte[] all = concat(frames.stream().map(f -> {
        byte[] b = new byte[f.readableBytes()];
        f.readBytes(b);
        f.release();
        return b;
      }).toArray(byte[][]::new));
      frames.clear();
      return all;
    }
  }

  @Test
  void holdsNoQueueBetweenFlushesAndTakesWritesMadeWhileItFrames() {
    ImmediateWrites out = new ImmediateWrites();
    AltsRecordEncoder encoder = new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, 1024);
    EmbeddedChannel ch = new EmbeddedChannel(out, encoder);
    assertEquals(0, encoder.queueSlots(), "nothing written yet");
    byte[] w1 = pattern(1000, 1); // frame 1
    byte[] w2 = pattern(1000, 2); // frame 2
    byte[] w3 = pattern(10, 3);
    byte[] w4 = pattern(10, 4);
    byte[] w5 = pattern(5, 5); // written by w2's listener, while the encoder is framing
    ChannelFuture f1 = ch.write(direct(w1));
    ChannelFuture[] late = new ChannelFuture[1];
    ch.write(direct(w2)).addListener(f -> late[0] = ch.write(direct(w5)));
    ChannelFuture f3 = ch.write(direct(w3));
    ChannelFuture f4 = ch.write(direct(w4));
    assertTrue(encoder.queueSlots() > 0);
    ch.flush();
    assertTrue(f1.isSuccess() && f3.isSuccess() && f4.isSuccess());
    assertTrue(late[0] != null && late[0].isSuccess(), "the late write went into the last frame");
    assertEquals(3, out.frames.size());
    assertEquals(0, encoder.queueSlots(), "everything framed: no queue kept");
    assertArrayEquals(concat(w1, w2, w3, w4, w5), decodeAsServer(out.drain(), 1024));
    ch.finishAndReleaseAll();
  }

  @Test
  void counterOverflowFailsTheWriteAndEveryLaterOneAndCloses() {
    EmbeddedChannel ch = new EmbeddedChannel(new AltsRecordEncoder(ALTSRP_GCM_AES128, KEY16, true, MAX));
    Capture errors = new Capture();
    ch.pipeline().addLast(errors);
    AltsRecordEncoder encoder = (AltsRecordEncoder) ch.pipeline().first();
    encoder.counter().set(Hex.decode("feffffffff00000000000000"));
    // Two frames' worth in one flush: the first two records use the last two counters; the
    // third would overflow.
    ByteBuf big = direct(pattern(3 * (MAX - 24), 1));
    ByteBuf after = direct(pattern(5, 2));
    ChannelFuture f = ch.write(big);
    ChannelFuture g = ch.write(after);
    ch.flush();
    assertInstanceOf(AltsRecordException.class, f.cause());
    assertEquals(AltsRecordException.Reason.COUNTER_OVERFLOW, ((AltsRecordException) f.cause()).reason());
    assertTrue(g.cause() == f.cause());
    assertEquals(0, big.refCnt());
    assertEquals(0, after.refCnt());
    assertFalse(ch.isOpen());
    assertEquals(AltsRecordException.Reason.COUNTER_OVERFLOW, errors.onlyError().reason());
    ByteBuf late = direct(new byte[3]);
    ChannelFuture h = ch.writeAndFlush(late);
    assertFalse(h.isSuccess());
    assertEquals(0, late.refCnt());
    assertEquals(2, frameSizes(drainOutbound(ch)).size(), "the two records before it were sent");
    ch.finishAndReleaseAll();
  }

  @Test
  void unflushedWritesFailAndAreReleasedOnClose() {
    EmbeddedChannel ch = client(MAX);
    ByteBuf buf = direct(pattern(100, 1));
    ChannelFuture f = ch.write(buf);
    ch.close();
    assertInstanceOf(ClosedChannelException.class, f.cause());
    assertEquals(0, buf.refCnt());
    ch.finishAndReleaseAll();
  }

  /** Fails every write on the spot, as a channel whose socket broke does. */
  private static final class FailingWrites extends ChannelOutboundHandlerAdapter {
    /** @param msg owned: released here */
    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
      io.netty.util.ReferenceCountUtil.release(msg);
      promise.setFailure(new IllegalStateException("socket broke"));
    }
  }

  @Test
  void aWriteThatFailsAtOnceAndClosesInItsListenerEndsTheFlushCleanly() {
    EmbeddedChannel ch = new EmbeddedChannel(
        new FailingWrites(), new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, 1024));
    ByteBuf first = direct(pattern(500, 1)); // ends in frame 1
    ByteBuf second = direct(pattern(2000, 2)); // starts in frame 1, still pending after it
    ChannelFuture f1 = ch.write(first);
    f1.addListener(f -> ch.close());
    ChannelFuture f2 = ch.write(second);
    ch.flush();
    ch.checkException();
    assertInstanceOf(IllegalStateException.class, f1.cause());
    assertInstanceOf(ClosedChannelException.class, f2.cause());
    assertEquals(0, first.refCnt());
    assertEquals(0, second.refCnt(), "the write the close failed is released");
    assertFalse(ch.isOpen());
    ch.finishAndReleaseAll();
  }

  @Test
  void unflushedWritesFailAndAreReleasedWhenRemoved() {
    EmbeddedChannel ch = client(MAX);
    ByteBuf buf = direct(pattern(100, 1));
    ChannelFuture f = ch.write(buf);
    ch.pipeline().removeFirst();
    assertInstanceOf(ClosedChannelException.class, f.cause());
    assertEquals(0, buf.refCnt());
    ch.finishAndReleaseAll();
  }

  @Test
  void refusesMessagesThatAreNotBuffers() {
    EmbeddedChannel ch = client(MAX);
    ChannelFuture f = ch.writeAndFlush("text");
    assertInstanceOf(UnsupportedMessageTypeException.class, f.cause());
    ch.finishAndReleaseAll();
  }

  @Test
  void rejectsAMaximumFrameSizeOutOfRange() {
    assertThrows(IllegalArgumentException.class,
        () -> new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, 24));
    assertThrows(IllegalArgumentException.class,
        () -> new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, (1 << 20) + 1));
  }
}
