package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.connection.ConnectionHandler;
import io.pinless.http2.FrameSlicer;
import io.pinless.http2.Http2FrameSlicer;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadOnReadyHandler;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
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
 * The receiving half of an ALTS connection's pinless pipeline without sockets or gRPC: one
 * 16 KiB record of HTTP/2 DATA frames per operation, read, opened and cut into whole frames, to a
 * sink that walks their headers and releases them as grpc-netty would. It compares two
 * arrangements of the same stages, the rest being equal:
 *
 * <ul>
 *   <li>{@code entries}: three pipeline entries, {@link ReadOnReadyHandler}, {@link
 *       AltsRecordDecoder} and {@link Http2FrameSlicer};
 *   <li>{@code connection}: one {@link ConnectionHandler} driving an {@link AltsRecordStage} and a
 *       {@link FrameSlicer} (what pinless's ALTS credentials install).
 * </ul>
 *
 * <pre>
 *   java -jar tools/target/benchmarks.jar AltsReceivePipelineBenchmark -prof gc
 * </pre>
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(value = 3, jvmArgsAppend = {
    "-Djmh.executor=CUSTOM", "-Djmh.executor.class=io.pinless.bench.EventLoopLikeExecutor"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@State(Scope.Thread)
public class AltsReceivePipelineBenchmark {
  private static final int FRAME_SIZE = 16384;
  /** DATA frames in the ring: their bytes end on a record's plaintext and a frame at once. */
  private static final int DATA_FRAMES = 64;

  @Param({"entries", "connection"})
  public String arrangement;

  private EmbeddedChannel channel;
  /** The receiving direction's record counter, rewound when the ring wraps. */
  private AltsCounter counter;
  private ReadBudget budget;
  private final Sink sink = new Sink();
  /** Owned: the sealed records, never written after setup. */
  private ByteBuf ring;
  private int[] recordStarts;
  private int next;
  private byte[] startCounter;

  /** Takes whole frames as grpc-netty's handler would, and releases them. */
  static final class Sink extends ChannelInboundHandlerAdapter {
    Blackhole bh;
    /** DATA payload bytes received in whole frames. */
    long payloadBytes;

    /** @param msg owned: released here */
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf b = (ByteBuf) msg;
      for (int at = b.readerIndex(); at < b.writerIndex(); at += 9 + b.getUnsignedMedium(at)) {
        payloadBytes += b.getUnsignedMedium(at);
      }
      if (bh != null) {
        bh.consume(b.getByte(b.readerIndex()));
      }
      b.release();
    }
  }

  @Setup(Level.Trial)
  public void setUp() throws Exception {
    byte[] key = new byte[AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY.keyLength()];
    new Random(1).nextBytes(key);
    ByteArrayOutputStream plaintext = new ByteArrayOutputStream();
    byte[] payload = new byte[16384];
    new Random(2).nextBytes(payload);
    for (int i = 0; i < DATA_FRAMES; i++) {
      ByteBuffer header = ByteBuffer.allocate(9);
      header.put((byte) 0).putShort((short) payload.length).put((byte) 0).put((byte) 0).putInt(1);
      plaintext.writeBytes(header.array());
      plaintext.writeBytes(payload);
    }
    EmbeddedChannel sealer = new EmbeddedChannel(
        new AltsRecordEncoder(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, true, FRAME_SIZE));
    sealer.writeOutbound(PooledByteBufAllocator.DEFAULT.directBuffer()
        .writeBytes(plaintext.toByteArray()));
    ByteArrayOutputStream sealed = new ByteArrayOutputStream();
    for (ByteBuf f; (f = sealer.readOutbound()) != null; ) {
      byte[] b = new byte[f.readableBytes()];
      f.readBytes(b);
      f.release();
      sealed.writeBytes(b);
    }
    sealer.finishAndReleaseAll();
    byte[] records = sealed.toByteArray();
    int count = 0;
    int[] starts = new int[records.length / 20 + 1];
    for (int at = 0; at < records.length; ) {
      starts[count++] = at;
      at += 4 + ByteBuffer.wrap(records, at, 4).order(ByteOrder.LITTLE_ENDIAN).getInt();
    }
    recordStarts = java.util.Arrays.copyOf(starts, count + 1);
    recordStarts[count] = records.length;
    ring = PooledByteBufAllocator.DEFAULT.directBuffer(records.length).writeBytes(records);

    budget = new ReadBudget(64L << 20);
    channel = new EmbeddedChannel();
    channel.config().setAllocator(PooledByteBufAllocator.DEFAULT);
    if (arrangement.equals("connection")) {
      ConnectionHandler connection = new ConnectionHandler(budget, false, 32 * 1024);
      AltsRecordStage stage =
          new AltsRecordStage(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, false, FRAME_SIZE);
      connection.install(stage, new FrameSlicer(false, FRAME_SIZE, budget, true));
      channel.pipeline().addLast(connection, sink);
      counter = stage.receiveCounter();
    } else if (arrangement.equals("entries")) {
      AltsRecordDecoder decoder =
          new AltsRecordDecoder(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, false, FRAME_SIZE);
      channel.pipeline().addLast(new ReadOnReadyHandler(budget, false, 32 * 1024), decoder,
          new Http2FrameSlicer(false, FRAME_SIZE, budget, true), sink);
      counter = decoder.counter();
    } else {
      throw new IllegalArgumentException(arrangement);
    }
    startCounter = counter.current().clone();
    // One pass through the ring, checked: every plaintext byte handed on as whole frames.
    for (int i = 0; i < recordStarts.length - 1; i++) {
      readOne();
    }
    long expected = (long) DATA_FRAMES * payload.length;
    if (sink.payloadBytes != expected) {
      throw new IllegalStateException(
          "handed on " + sink.payloadBytes + " payload bytes, expected " + expected);
    }
  }

  /** Fires the next record as one read, rewinding the counter when the ring wraps. */
  private void readOne() {
    if (next == recordStarts.length - 1) {
      next = 0;
      counter.set(startCounter);
    }
    int from = recordStarts[next];
    int to = recordStarts[++next];
    channel.pipeline().fireChannelRead(ring.retainedSlice(from, to - from));
    channel.pipeline().fireChannelReadComplete();
  }

  @Benchmark
  public void receiveOneRecord(Blackhole bh) {
    sink.bh = bh;
    readOne();
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    channel.finishAndReleaseAll();
    budget.releaseAll();
    ring.release();
  }
}
