package io.pinless.alts;

import io.grpc.alts.internal.AltsTsiFrameProtector;
import io.grpc.alts.internal.StockProtectors;
import io.grpc.alts.internal.TsiFrameProtector;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.GeneralSecurityException;
import java.security.Provider;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Throughput of the ALTS record layer, one frame per operation, pinless against the stock peer and
 * against the bare cipher.
 *
 * <pre>
 *   mvn -Ptools,jmh -DskipTests package &amp;&amp; java -jar tools/target/benchmarks.jar AltsRecordCodecBenchmark -prof gc
 * </pre>
 *
 * <p>{@code frameSize} is a whole frame, {@code 4 + length}: the plaintext of each operation is
 * {@code frameSize - 24} bytes (8 header bytes and a 16-byte tag). Bytes per second = ops/s times
 * that plaintext; the {@code :plaintextBytes} rows (an {@link AuxCounters} counter) report it
 * directly, in "ops/s" that are plaintext bytes per second. With {@code -prof gc},
 * {@code gc.alloc.rate.norm} is the heap each frame costs.
 *
 * <ul>
 *   <li>{@code pinlessDecode}: one frame, a retained slice of a pre-sealed ring, fired into the
 *       pipeline of an {@link EmbeddedChannel} holding an {@link AltsRecordDecoder} and a sink
 *       that consumes and releases the plaintext.
 *   <li>{@code pinlessEncode}: one plaintext (a retained duplicate of a pooled direct buffer)
 *       written and flushed through the pipeline of an {@link EmbeddedChannel} holding an {@link
 *       AltsRecordEncoder} in front of a sink that consumes and releases the frame.
 *   <li>{@code stockDecode} / {@code stockEncode}: the peer compared with, grpc-alts 1.85.1's own
 *       {@code AltsTsiFrameProtector} over its REKEY {@code AltsChannelCrypter}, called directly
 *       ({@code unprotect} / {@code protectFlush}) with grpc-netty-shaded's pooled direct buffers.
 *       It is what {@code TsiFrameHandler} runs for every read and flush.
 *   <li>{@code cipherDecrypt} / {@code cipherEncrypt}: the limit, one reused {@link Cipher}
 *       AES/GCM/NoPadding from the provider pinless uses ({@link CryptoProvider#preferred()}), one
 *       {@code init} and one {@code doFinal(ByteBuffer, ByteBuffer)} per frame's worth of bytes on
 *       direct buffers, no framing, no key derivation. Encryption takes a fresh nonce per call;
 *       decryption opens the same sealed record under the same nonce every time. This is the
 *       limit of the JCA path; pinless's records do not go through a {@code Cipher}.
 *   <li>{@code nativeDecrypt} / {@code nativeEncrypt}: the same on Conscrypt's one-shot native
 *       calls ({@link ConscryptAead}), which pinless's records go through when Conscrypt loads: the
 *       limit of what pinless does (needs Conscrypt).
 * </ul>
 *
 * <p>Threads. Every row runs on JMH workers that are fast-thread-local threads of both Netty
 * copies ({@link io.pinless.bench.EventLoopLikeExecutor}), as event loops are: on a plain thread
 * Netty 4.2's pooled allocator neither caches nor recycles buffer objects, which charged each row
 * a few hundred bytes per frame that no event loop allocates.
 *
 * <p>Method. Both decoders read the same ring of frames ({@value #RING_BYTES} bytes' worth, sealed
 * once by an {@link AltsRecordEncoder} at setup and checked to open to the right plaintext). A
 * frame's nonce is its record number, so when the ring wraps the receiving counter is set back to
 * its start: pinless through {@link AltsCounter#set}, stock through {@link
 * StockProtectors.RewindableReceiver#rewind}; a 12-byte copy every ring, and no key derivation (a
 * ring holds fewer than 2^16 records). The senders' counters just run on, rekeying every 2^16
 * records as on a real connection. Both sides use a pooled direct allocator; both pick Conscrypt
 * when it loads (grpc-alts on its own), unless {@code -Dpinless.alts.crypto=jdk} moves pinless and
 * the cipher rows to the JDK. The pinless rows include one pipeline dispatch each way (the
 * handler sits in an {@link EmbeddedChannel} whose pipeline is called directly, with a sink
 * behind it); the stock rows are direct calls with no pipeline at all.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(value = 1, jvmArgsAppend = {
    // workers with fast thread-locals, as event loops are (see EventLoopLikeExecutor)
    "-Djmh.executor=CUSTOM", "-Djmh.executor.class=io.pinless.bench.EventLoopLikeExecutor"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class AltsRecordCodecBenchmark {
  /** How many bytes of frames the decoders cycle through (at least one frame). */
  static final int RING_BYTES = 1 << 20;

  private static final AltsRecordProtocol PROTOCOL = AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
  private static final int TAG_BITS = AesGcm.TAG_BYTES * 8;
  private static final io.grpc.netty.shaded.io.netty.buffer.ByteBufAllocator SHADED_ALLOC =
      io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator.DEFAULT;

  /** The frame size shared by every state. */
  @State(Scope.Thread)
  public abstract static class Sized {
    /** A whole frame in bytes, header and tag included. */
    @Param({"1024", "16384", "131072"})
    public int frameSize;

    /** The plaintext one frame carries. */
    int plaintextBytes() {
      return frameSize - AltsFrames.OVERHEAD_BYTES;
    }
  }

  /** Plaintext bytes processed, reported per second next to each method's ops/s. */
  @State(Scope.Thread)
  @AuxCounters(AuxCounters.Type.OPERATIONS)
  public static class Bytes {
    /** Plaintext bytes sealed or opened in this iteration. */
    public long plaintextBytes;

    @Setup(Level.Iteration)
    public void reset() {
      plaintextBytes = 0;
    }
  }

  /** An {@link AltsRecordDecoder} in an {@link EmbeddedChannel}, and the ring it opens. */
  @State(Scope.Thread)
  public static class PinlessDecode extends Sized {
    EmbeddedChannel channel;
    /** Consumes and releases the plaintext the decoder fires (after setup). */
    final Sink sink = new Sink();
    AltsRecordDecoder decoder;
    /** Owned: the sealed ring, never written after setup. */
    ByteBuf ring;
    int frames;
    int next;
    byte[] startCounter;

    @Setup(Level.Trial)
    public void setUp() {
      Ring sealed = Ring.seal(frameSize);
      frames = sealed.frames;
      ring = PooledByteBufAllocator.DEFAULT.directBuffer(sealed.bytes.length);
      ring.writeBytes(sealed.bytes);
      decoder = new AltsRecordDecoder(PROTOCOL, key(), false, frameSize);
      channel = new EmbeddedChannel(decoder);
      channel.config().setAllocator(PooledByteBufAllocator.DEFAULT);
      startCounter = decoder.counter().current().clone();
      next = 0;
      for (int i = 0; i < frames; i++) {
        channel.writeInbound(nextFrame());
        ByteBuf plain = channel.readInbound();
        try {
          sealed.check(i, ByteBufUtil.getBytes(plain));
        } finally {
          plain.release();
        }
      }
      // Measured calls go straight through the pipeline to a sink, without EmbeddedChannel's
      // queues, so the rows compare the handler with the stock protector's direct calls.
      channel.pipeline().addLast(sink);
    }

    /**
     * The next frame of the ring, rewinding the decoder's counter when the ring wraps.
     *
     * @return owned by the caller: a retained slice of the ring
     */
    ByteBuf nextFrame() {
      if (next == frames) {
        next = 0;
        decoder.counter().set(startCounter);
      }
      return ring.retainedSlice(next++ * frameSize, frameSize);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      channel.finishAndReleaseAll();
      checkOnlyOwner(ring.refCnt(), "pinless ring");
      ring.release();
    }
  }

  /** An {@link AltsRecordEncoder} in an {@link EmbeddedChannel}, and one frame of plaintext. */
  @State(Scope.Thread)
  public static class PinlessEncode extends Sized {
    EmbeddedChannel channel;
    /** Consumes and releases the frames the encoder writes (after setup). */
    final Sink sink = new Sink();
    /** Owned: the plaintext, written only at setup. */
    ByteBuf plain;

    @Setup(Level.Trial)
    public void setUp() {
      byte[] bytes = plaintext(plaintextBytes(), 3);
      plain = PooledByteBufAllocator.DEFAULT.directBuffer(bytes.length).writeBytes(bytes);
      channel = new EmbeddedChannel(new AltsRecordEncoder(PROTOCOL, key(), true, frameSize));
      channel.config().setAllocator(PooledByteBufAllocator.DEFAULT);
      channel.writeOutbound(plain.retainedDuplicate());
      checkSize("pinless frames per write", channel.outboundMessages().size(), 1);
      ByteBuf frame = channel.readOutbound();
      try {
        checkSize("pinless frame bytes", frame.readableBytes(), frameSize);
      } finally {
        frame.release();
      }
      channel.pipeline().addFirst(sink);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      channel.finishAndReleaseAll();
      checkOnlyOwner(plain.refCnt(), "pinless plaintext");
      plain.release();
    }
  }

  /** One bare AES-GCM {@link Cipher} and direct buffers of one frame's sizes. */
  @State(Scope.Thread)
  public static class BareCipher extends Sized {
    Cipher cipher;
    SecretKeySpec key;
    /** Conscrypt's native calls (what pinless's records go through), or null without them. */
    ConscryptAead calls;
    byte[] rawKey;
    ByteBuffer plain;
    ByteBuffer sealed;
    ByteBuffer sealOut;
    ByteBuffer openOut;
    /** The nonce {@link #sealed} was sealed under. */
    byte[] sealedNonce;
    /** The next encryption nonce: a counter in its low 8 bytes, never repeated. */
    final byte[] nonce = new byte[12];
    final ByteBuffer nonceView = ByteBuffer.wrap(nonce).order(ByteOrder.LITTLE_ENDIAN);
    long counter;

    @Setup(Level.Trial)
    public void setUp() throws GeneralSecurityException {
      Provider provider = CryptoProvider.preferred();
      cipher =
          provider == null
              ? Cipher.getInstance("AES/GCM/NoPadding")
              : Cipher.getInstance("AES/GCM/NoPadding", provider);
      rawKey = Arrays.copyOf(key(), 16);
      key = new SecretKeySpec(rawKey, "AES");
      calls = ConscryptAead.loadOrNull();
      int n = plaintextBytes();
      plain = ByteBuffer.allocateDirect(n).put(plaintext(n, 5));
      sealed = ByteBuffer.allocateDirect(n + AesGcm.TAG_BYTES);
      sealOut = ByteBuffer.allocateDirect(n + AesGcm.TAG_BYTES);
      openOut = ByteBuffer.allocateDirect(n);
      sealedNonce = nextNonce().clone();
      cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, sealedNonce));
      plain.flip();
      cipher.doFinal(plain, sealed);
      sealed.flip();
      cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, sealedNonce));
      cipher.doFinal(sealed, openOut);
      plain.flip();
      openOut.flip();
      if (!openOut.equals(plain)) {
        throw new IllegalStateException("bare cipher round trip differs");
      }
    }

    /** Steps the nonce counter; the returned array is live. */
    byte[] nextNonce() {
      nonceView.putLong(0, counter++);
      return nonce;
    }
  }

  /** grpc-alts's sealing end and one frame of plaintext in grpc-netty-shaded buffers. */
  @State(Scope.Thread)
  public static class StockEncode extends Sized {
    AltsTsiFrameProtector protector;
    /** Owned: the plaintext, written only at setup. */
    io.grpc.netty.shaded.io.netty.buffer.ByteBuf plain;
    final List<io.grpc.netty.shaded.io.netty.buffer.ByteBuf> in = new ArrayList<>(1);
    /** The frame {@link #sink} was last handed; owned until taken. */
    io.grpc.netty.shaded.io.netty.buffer.ByteBuf frame;
    final TsiFrameProtector.Consumer<io.grpc.netty.shaded.io.netty.buffer.ByteBuf> sink =
        f -> {
          if (frame != null) {
            f.release();
            throw new IllegalStateException("more than one frame per flush");
          }
          frame = f;
        };

    @Setup(Level.Trial)
    public void setUp() throws GeneralSecurityException {
      byte[] bytes = plaintext(plaintextBytes(), 3);
      plain = SHADED_ALLOC.directBuffer(bytes.length).writeBytes(bytes);
      protector = StockProtectors.protector(key(), true, frameSize, SHADED_ALLOC);
      io.grpc.netty.shaded.io.netty.buffer.ByteBuf first = seal();
      try {
        checkSize("stock frame bytes", first.readableBytes(), frameSize);
      } finally {
        first.release();
      }
    }

    /**
     * Seals one frame of the plaintext.
     *
     * @return owned by the caller, who must release it
     */
    io.grpc.netty.shaded.io.netty.buffer.ByteBuf seal() throws GeneralSecurityException {
      in.add(plain.retainedDuplicate());
      try {
        protector.protectFlush(in, sink, SHADED_ALLOC);
      } finally {
        in.clear();
      }
      io.grpc.netty.shaded.io.netty.buffer.ByteBuf out = frame;
      frame = null;
      return out;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      protector.destroy();
      checkOnlyOwner(plain.refCnt(), "stock plaintext");
      plain.release();
    }
  }

  /** grpc-alts's opening end and the same ring as pinless, in grpc-netty-shaded buffers. */
  @State(Scope.Thread)
  public static class StockDecode extends Sized {
    StockProtectors.RewindableReceiver receiver;
    AltsTsiFrameProtector protector;
    /** Owned: the sealed ring, never written after setup. */
    io.grpc.netty.shaded.io.netty.buffer.ByteBuf ring;
    final List<Object> out = new ArrayList<>(1);
    int frames;
    int next;

    @Setup(Level.Trial)
    public void setUp() throws GeneralSecurityException {
      Ring sealed = Ring.seal(frameSize);
      frames = sealed.frames;
      ring = SHADED_ALLOC.directBuffer(sealed.bytes.length).writeBytes(sealed.bytes);
      receiver = StockProtectors.receiver(key(), false, frameSize, SHADED_ALLOC);
      protector = receiver.protector();
      next = 0;
      for (int i = 0; i < frames; i++) {
        io.grpc.netty.shaded.io.netty.buffer.ByteBuf plain = open();
        try {
          byte[] bytes = new byte[plain.readableBytes()];
          plain.readBytes(bytes);
          sealed.check(i, bytes);
        } finally {
          plain.release();
        }
      }
    }

    /**
     * Opens the next frame of the ring, rewinding the receiver's counter when the ring wraps.
     *
     * @return owned by the caller, who must release it
     */
    io.grpc.netty.shaded.io.netty.buffer.ByteBuf open() throws GeneralSecurityException {
      if (next == frames) {
        next = 0;
        receiver.rewind();
      }
      io.grpc.netty.shaded.io.netty.buffer.ByteBuf frame =
          ring.retainedSlice(next++ * frameSize, frameSize);
      try {
        // Borrows the frame (keeps a retained slice of it), as under a ByteToMessageDecoder.
        protector.unprotect(frame, out, SHADED_ALLOC);
      } finally {
        frame.release();
      }
      if (out.size() != 1) {
        for (Object o : out) {
          ((io.grpc.netty.shaded.io.netty.buffer.ByteBuf) o).release();
        }
        out.clear();
        throw new IllegalStateException("expected one plaintext buffer per frame");
      }
      Object plain = out.get(0);
      out.clear();
      return (io.grpc.netty.shaded.io.netty.buffer.ByteBuf) plain;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      receiver.destroy();
      checkOnlyOwner(ring.refCnt(), "stock ring");
      ring.release();
    }
  }

  @Benchmark
  public void pinlessDecode(PinlessDecode s, Bytes bytes, Blackhole bh) {
    s.sink.bh = bh;
    s.channel.pipeline().fireChannelRead(s.nextFrame());
    bytes.plaintextBytes += s.plaintextBytes();
  }

  @Benchmark
  public void pinlessEncode(PinlessEncode s, Bytes bytes, Blackhole bh) {
    s.sink.bh = bh;
    s.channel.pipeline().write(s.plain.retainedDuplicate(), s.channel.voidPromise());
    s.channel.pipeline().flush();
    bytes.plaintextBytes += s.plaintextBytes();
  }

  /** Takes what a handler fires or writes, hands it to the Blackhole and releases it. */
  static final class Sink extends io.netty.channel.ChannelDuplexHandler {
    Blackhole bh;

    /** @param msg owned: released here */
    @Override
    public void channelRead(io.netty.channel.ChannelHandlerContext ctx, Object msg) {
      ByteBuf b = (ByteBuf) msg;
      bh.consume(b.getByte(b.readerIndex()));
      b.release();
    }

    /** @param msg owned: released here */
    @Override
    public void write(
        io.netty.channel.ChannelHandlerContext ctx,
        Object msg,
        io.netty.channel.ChannelPromise promise) {
      ByteBuf b = (ByteBuf) msg;
      bh.consume(b.getByte(b.readerIndex()));
      b.release();
      promise.trySuccess();
    }

    @Override
    public void flush(io.netty.channel.ChannelHandlerContext ctx) {}
  }

  @Benchmark
  public void stockDecode(StockDecode s, Bytes bytes, Blackhole bh)
      throws GeneralSecurityException {
    consumeShaded(s.open(), bh);
    bytes.plaintextBytes += s.plaintextBytes();
  }

  @Benchmark
  public void stockEncode(StockEncode s, Bytes bytes, Blackhole bh)
      throws GeneralSecurityException {
    consumeShaded(s.seal(), bh);
    bytes.plaintextBytes += s.plaintextBytes();
  }

  @Benchmark
  public int cipherDecrypt(BareCipher s, Bytes bytes) throws GeneralSecurityException {
    s.cipher.init(Cipher.DECRYPT_MODE, s.key, new GCMParameterSpec(TAG_BITS, s.sealedNonce));
    s.sealed.rewind();
    s.openOut.clear();
    int n = s.cipher.doFinal(s.sealed, s.openOut);
    bytes.plaintextBytes += s.plaintextBytes();
    return n + s.openOut.get(0);
  }

  @Benchmark
  public int cipherEncrypt(BareCipher s, Bytes bytes) throws GeneralSecurityException {
    s.cipher.init(Cipher.ENCRYPT_MODE, s.key, new GCMParameterSpec(TAG_BITS, s.nextNonce()));
    s.plain.rewind();
    s.sealOut.clear();
    int n = s.cipher.doFinal(s.plain, s.sealOut);
    bytes.plaintextBytes += s.plaintextBytes();
    return n + s.sealOut.get(0);
  }

  @Benchmark
  public int nativeDecrypt(BareCipher s, Bytes bytes) throws GeneralSecurityException {
    s.sealed.rewind();
    s.openOut.clear();
    int n = s.calls.open(s.rawKey, s.sealedNonce, s.sealed, s.openOut, null);
    bytes.plaintextBytes += s.plaintextBytes();
    return n + s.openOut.get(0);
  }

  @Benchmark
  public int nativeEncrypt(BareCipher s, Bytes bytes) throws GeneralSecurityException {
    s.plain.rewind();
    s.sealOut.clear();
    int n = s.calls.seal(s.rawKey, s.nextNonce(), s.plain, s.sealOut);
    bytes.plaintextBytes += s.plaintextBytes();
    return n + s.sealOut.get(0);
  }

  /**
   * Feeds a buffer's length and last byte to the blackhole.
   *
   * @param buf owned: released here
   */
  private static void consume(ByteBuf buf, Blackhole bh) {
    try {
      bh.consume(buf.readableBytes());
      bh.consume(buf.getByte(buf.writerIndex() - 1));
    } finally {
      buf.release();
    }
  }

  /**
   * Feeds a shaded buffer's length and last byte to the blackhole.
   *
   * @param buf owned: released here
   */
  private static void consumeShaded(
      io.grpc.netty.shaded.io.netty.buffer.ByteBuf buf, Blackhole bh) {
    try {
      bh.consume(buf.readableBytes());
      bh.consume(buf.getByte(buf.writerIndex() - 1));
    } finally {
      buf.release();
    }
  }

  /** Frames sealed once by a client-side {@link AltsRecordEncoder}, and their plaintext. */
  static final class Ring {
    final int frameSize;
    final int frames;
    final byte[] plaintext;
    final byte[] bytes;

    private Ring(int frameSize, int frames, byte[] plaintext, byte[] bytes) {
      this.frameSize = frameSize;
      this.frames = frames;
      this.plaintext = plaintext;
      this.bytes = bytes;
    }

    /** Seals {@link #RING_BYTES} bytes' worth of frames of exactly {@code frameSize} bytes. */
    static Ring seal(int frameSize) {
      int frames = Math.max(1, RING_BYTES / frameSize);
      if (frames >= 1 << 16) {
        throw new IllegalStateException("a ring must hold fewer than 2^16 records");
      }
      int payload = frameSize - AltsFrames.OVERHEAD_BYTES;
      byte[] plaintext = plaintext(frames * payload, 7);
      byte[] sealed = new byte[frames * frameSize];
      EmbeddedChannel channel =
          new EmbeddedChannel(new AltsRecordEncoder(PROTOCOL, key(), true, frameSize));
      try {
        channel.writeOutbound(PooledByteBufAllocator.DEFAULT.directBuffer().writeBytes(plaintext));
        checkSize("ring frames", channel.outboundMessages().size(), frames);
        for (int offset = 0; offset < sealed.length; offset += frameSize) {
          ByteBuf frame = channel.readOutbound();
          try {
            checkSize("ring frame bytes", frame.readableBytes(), frameSize);
            frame.readBytes(sealed, offset, frameSize);
          } finally {
            frame.release();
          }
        }
      } finally {
        channel.finishAndReleaseAll();
      }
      return new Ring(frameSize, frames, plaintext, sealed);
    }

    /** Throws unless {@code opened} is the plaintext of frame {@code index}. */
    void check(int index, byte[] opened) {
      int payload = frameSize - AltsFrames.OVERHEAD_BYTES;
      byte[] expected = Arrays.copyOfRange(plaintext, index * payload, (index + 1) * payload);
      if (!Arrays.equals(expected, opened)) {
        throw new IllegalStateException("frame " + index + " opened to the wrong plaintext");
      }
    }
  }

  /** The 44-byte REKEY key every end shares; a fresh copy each call. */
  static byte[] key() {
    byte[] key = new byte[PROTOCOL.keyLength()];
    new Random(44).nextBytes(key);
    return key;
  }

  static byte[] plaintext(int length, long seed) {
    byte[] bytes = new byte[length];
    new Random(seed).nextBytes(bytes);
    return bytes;
  }

  private static void checkSize(String what, int actual, int expected) {
    if (actual != expected) {
      throw new IllegalStateException(what + ": expected " + expected + ", got " + actual);
    }
  }

  private static void checkOnlyOwner(int refCnt, String what) {
    if (refCnt != 1) {
      throw new IllegalStateException(what + " has " + (refCnt - 1) + " unreleased slice(s)");
    }
  }
}
