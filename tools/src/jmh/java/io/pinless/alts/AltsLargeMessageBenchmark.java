package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.security.Provider;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;
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

/**
 * One large message through the ALTS record layer and back, against the bare cipher doing the same
 * records: the codec's cost beyond the cipher.
 *
 * <pre>
 *   mvn -Ptools,jmh -DskipTests package &amp;&amp; java -jar tools/target/benchmarks.jar AltsLargeMessageBenchmark
 * </pre>
 *
 * <p>Each operation starts from the message in a direct buffer (filled at setup) and ends with
 * its plaintext back in direct buffers:
 *
 * <ul>
 *   <li>{@code pinless}: a duplicate of the message written and flushed through an {@link
 *       AltsRecordEncoder}; each frame it writes goes straight into an {@link AltsRecordDecoder},
 *       whose plaintext is counted and released.
 *   <li>{@code pinlessFromHeap}: the same from a heap buffer wrapping the message's bytes.
 *   <li>{@code cipher}: per record, the message's next piece sealed by one reused {@link Cipher}
 *       AES/GCM/NoPadding from the provider pinless uses into a direct buffer, then opened into a
 *       second: the JCA path, no framing, no key derivation.
 *   <li>{@code nativeCalls}: the same through Conscrypt's one-shot native calls ({@link
 *       ConscryptAead}), which pinless's records go through when Conscrypt loads.
 *   <li>{@code nativeCallsPooled}: the native calls sealing into a pooled frame buffer and
 *       opening into a pooled plaintext buffer per record, as a pipeline must (the other bare rows
 *       reuse three buffers the CPU's cache keeps).
 *   <li>{@code cipherFromHeap} and {@code nativeCallsFromHeap}: the same, each record's plaintext
 *       first copied from the message's array into a direct buffer (the limit for {@code
 *       pinlessFromHeap}).
 * </ul>
 *
 * <p>Workers are fast-thread-local threads, as event loops are (see {@link
 * io.pinless.bench.EventLoopLikeExecutor}).
 *
 * <p>{@link #main} runs the rows in turn in one JVM instead (rounds of a few operations each, the
 * order rotating), and prints each round's ratio of a bare row's time to pinless's (pinless's
 * speed as a share of the bare cipher's) with a confidence interval, and a control of the native
 * row against itself:
 *
 * <pre>
 *   java -cp tools/target/benchmarks.jar io.pinless.alts.AltsLargeMessageBenchmark [rounds] [ops]
 * </pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 2, jvmArgsAppend = {
    "-Djmh.executor=CUSTOM", "-Djmh.executor.class=io.pinless.bench.EventLoopLikeExecutor"})
@Warmup(iterations = 5, time = 2)
@Measurement(iterations = 5, time = 2)
@State(Scope.Thread)
public class AltsLargeMessageBenchmark {
  private static final AltsRecordProtocol PROTOCOL = AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
  private static final int TAG_BITS = AesGcm.TAG_BYTES * 8;

  /** The message in bytes. */
  @Param({"104857600"})
  public int messageBytes;

  /** A whole frame in bytes, header and tag included. */
  @Param({"16384"})
  public int frameSize;

  byte[] message;
  /** Owned: the message, never written after setup. */
  ByteBuf direct;
  EmbeddedChannel sender;
  EmbeddedChannel receiver;
  final Relay relay = new Relay();
  final Sink sink = new Sink();

  Cipher cipher;
  SecretKeySpec key;
  byte[] rawKey;
  ConscryptAead calls;
  ByteBuffer plain;
  /** One record's plaintext, copied from the array by the rows that start from the heap. */
  ByteBuffer scratch;
  ByteBuffer sealed;
  ByteBuffer opened;
  final byte[] nonce = new byte[12];
  long counter;

  @Setup(Level.Trial)
  public void setUp() throws GeneralSecurityException {
    message = new byte[messageBytes];
    new Random(100).nextBytes(message);
    direct = PooledByteBufAllocator.DEFAULT.directBuffer(messageBytes).writeBytes(message);
    receiver = new EmbeddedChannel(new AltsRecordDecoder(PROTOCOL, key(), false, frameSize), sink);
    receiver.config().setAllocator(PooledByteBufAllocator.DEFAULT);
    relay.receiver = receiver;
    sender = new EmbeddedChannel(relay, new AltsRecordEncoder(PROTOCOL, key(), true, frameSize));
    sender.config().setAllocator(PooledByteBufAllocator.DEFAULT);

    Provider provider = CryptoProvider.preferred();
    cipher = provider == null
        ? Cipher.getInstance("AES/GCM/NoPadding")
        : Cipher.getInstance("AES/GCM/NoPadding", provider);
    rawKey = Arrays.copyOf(key(), 16);
    key = new SecretKeySpec(rawKey, "AES");
    calls = ConscryptAead.loadOrNull();
    int payload = frameSize - AltsFrames.OVERHEAD_BYTES;
    plain = direct.nioBuffer();
    scratch = ByteBuffer.allocateDirect(payload);
    sealed = ByteBuffer.allocateDirect(payload + AesGcm.TAG_BYTES);
    opened = ByteBuffer.allocateDirect(payload);

    sink.received = 0;
    pinless();
    pinlessFromHeap();
    if (sink.received != 2L * messageBytes) {
      throw new IllegalStateException("pinless delivered " + sink.received + " bytes");
    }
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    sender.finishAndReleaseAll();
    receiver.finishAndReleaseAll();
    direct.release();
  }

  @Benchmark
  public long pinless() {
    long before = sink.received;
    sender.pipeline().writeAndFlush(direct.retainedDuplicate(), sender.voidPromise());
    return sink.received - before;
  }

  @Benchmark
  public long pinlessFromHeap() {
    long before = sink.received;
    sender.pipeline().writeAndFlush(Unpooled.wrappedBuffer(message), sender.voidPromise());
    return sink.received - before;
  }

  @Benchmark
  public long cipher() throws GeneralSecurityException {
    return bare(false, false);
  }

  @Benchmark
  public long cipherFromHeap() throws GeneralSecurityException {
    return bare(true, false);
  }

  @Benchmark
  public long nativeCalls() throws GeneralSecurityException {
    return bare(false, true);
  }

  @Benchmark
  public long nativeCallsFromHeap() throws GeneralSecurityException {
    return bare(true, true);
  }

  @Benchmark
  public long nativeCallsPooled() throws GeneralSecurityException {
    long done = 0;
    int payload = frameSize - AltsFrames.OVERHEAD_BYTES;
    for (int at = 0; at < messageBytes; at += payload) {
      int n = Math.min(payload, messageBytes - at);
      plain.limit(at + n).position(at);
      ByteBuf frame = PooledByteBufAllocator.DEFAULT.directBuffer(n + AltsFrames.OVERHEAD_BYTES);
      ByteBuf out = PooledByteBufAllocator.DEFAULT.directBuffer(n + AltsRecordDecoder.HEADROOM_BYTES);
      try {
        byte[] iv = nextNonce();
        ByteBuffer sealedView = frame.nioBuffer(8, n + AesGcm.TAG_BYTES);
        calls.seal(rawKey, iv, plain, sealedView);
        done += calls.open(rawKey, iv, sealedView, out.nioBuffer(AltsRecordDecoder.HEADROOM_BYTES, n), null);
      } finally {
        frame.release();
        out.release();
      }
    }
    return done;
  }

  /**
   * Seals and opens the message record by record on the reused direct buffers, from the direct
   * message or, {@code fromHeap}, from each record's bytes copied out of the array first; through
   * the native calls or the {@code Cipher}. Returns the plaintext bytes opened.
   */
  private long bare(boolean fromHeap, boolean nativeCalls) throws GeneralSecurityException {
    long done = 0;
    int payload = frameSize - AltsFrames.OVERHEAD_BYTES;
    for (int at = 0; at < messageBytes; at += payload) {
      int n = Math.min(payload, messageBytes - at);
      ByteBuffer in;
      if (fromHeap) {
        in = scratch.clear();
        in.put(message, at, n).flip();
      } else {
        in = plain.limit(at + n).position(at);
      }
      sealed.clear();
      opened.clear();
      byte[] iv = nextNonce();
      if (nativeCalls) {
        sealed.limit(calls.seal(rawKey, iv, in, sealed));
        done += calls.open(rawKey, iv, sealed, opened, null);
      } else {
        cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, iv));
        cipher.doFinal(in, sealed);
        sealed.flip();
        cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(TAG_BITS, iv));
        done += cipher.doFinal(sealed, opened);
      }
    }
    return done;
  }

  private byte[] nextNonce() {
    long n = counter++;
    for (int i = 0; i < 8; i++) {
      nonce[i] = (byte) (n >>> (8 * i));
    }
    return nonce;
  }

  /** Hands every frame the encoder writes straight to the receiver's decoder. */
  static final class Relay extends ChannelDuplexHandler {
    EmbeddedChannel receiver;

    /** @param msg owned: handed to the receiver's pipeline */
    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
      receiver.pipeline().fireChannelRead(msg);
      promise.trySuccess();
    }

    @Override
    public void flush(ChannelHandlerContext ctx) {}
  }

  /** Counts and releases the plaintext the decoder fires. */
  static final class Sink extends ChannelDuplexHandler {
    long received;

    /** @param msg owned: released here */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf b = (ByteBuf) msg;
      received += b.readableBytes();
      b.release();
    }
  }

  /** The 44-byte REKEY key both ends share; a fresh copy each call. */
  static byte[] key() {
    byte[] key = new byte[PROTOCOL.keyLength()];
    new Random(44).nextBytes(key);
    return key;
  }

  /** The rows {@link #main} takes turns with, by name. */
  private interface Row {
    long run() throws GeneralSecurityException;
  }

  /** Interleaved rounds; see the class comment. Arguments: rounds (default 20), ops (5). */
  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 20;
    int ops = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    Throwable[] failure = new Throwable[1];
    Thread t = new io.netty.util.concurrent.FastThreadLocalThread(() -> {
      try {
        interleave(rounds, ops);
      } catch (Throwable e) {
        failure[0] = e;
      }
    });
    t.start();
    t.join();
    if (failure[0] != null) {
      throw new IllegalStateException(failure[0]);
    }
  }

  private static void interleave(int rounds, int ops) throws Exception {
    AltsLargeMessageBenchmark b = new AltsLargeMessageBenchmark();
    b.messageBytes = 100 << 20;
    b.frameSize = 16384;
    b.setUp();
    String[] names = {"pinless", "pinlessFromHeap", "nativeCalls", "nativeCalls2",
        "nativeCallsFromHeap", "cipher", "cipherFromHeap", "nativeCallsPooled"};
    Row[] rows = {b::pinless, b::pinlessFromHeap, b::nativeCalls, b::nativeCalls,
        b::nativeCallsFromHeap, b::cipher, b::cipherFromHeap, b::nativeCallsPooled};
    double[][] millis = new double[rows.length][rounds];
    int warmup = 3;
    for (int round = -warmup; round < rounds; round++) {
      for (int k = 0; k < rows.length; k++) {
        int r = Math.floorMod(k + round, rows.length);
        long start = System.nanoTime();
        for (int i = 0; i < ops; i++) {
          if (rows[r].run() != b.messageBytes) {
            throw new IllegalStateException(names[r] + " did not carry the whole message");
          }
        }
        if (round >= 0) {
          millis[r][round] = (System.nanoTime() - start) / 1e6 / ops;
        }
      }
    }
    b.tearDown();
    for (int r = 0; r < rows.length; r++) {
      double[] sorted = millis[r].clone();
      Arrays.sort(sorted);
      System.out.printf(java.util.Locale.ROOT, "%s: median %.1f ms per 100 MiB each way%n",
          names[r], sorted[rounds / 2]);
    }
    ratio("control: nativeCalls / nativeCalls2", millis[3], millis[2]);
    ratio("pinless / nativeCalls", millis[2], millis[0]);
    ratio("pinless / cipher", millis[5], millis[0]);
    ratio("pinlessFromHeap / nativeCallsFromHeap", millis[4], millis[1]);
    ratio("pinlessFromHeap / cipherFromHeap", millis[6], millis[1]);
    ratio("pinless / nativeCallsPooled", millis[7], millis[0]);
    ratio("nativeCallsPooled / nativeCalls", millis[2], millis[7]);
  }

  /** Speed of the row timed {@code slower} as a share of the row timed {@code base}, per round. */
  private static void ratio(String name, double[] base, double[] slower) {
    double[] r = new double[base.length];
    for (int i = 0; i < r.length; i++) {
      r[i] = base[i] / slower[i];
    }
    io.pinless.grpc.Interleaved.summarize(name, r);
  }
}
