package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.Settings;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ReadPolicy;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkService;
import io.pinless.testing.NettyTransports;
import io.pinless.testing.PoolBytes;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The byte path end to end: a server streams 2 MiB {@link Chunk}s, and the client parses them with
 * {@link ZeroCopyMarshaller}. On a pinless connection every chunk's {@code data} is a view of the
 * client's pooled buffers; between the socket and the application, payload bytes are copied only
 * by the cipher (ALTS, TLS) and by the read path's small-frame copies, counted. Stock grpc-netty
 * with {@link ProtoLiteUtils} copies every byte into the heap, for reference.
 */
class ZeroCopyDownloadTest {
  private static final int CHUNK_BYTES = 2 << 20;
  /** 8 MiB: the largest connection window grpc-java's flow-control tuning sets. */
  private static final long LARGEST_GRPC_WINDOW = 8 << 20;
  private static final int CHUNKS = 8;

  @RegisterExtension
  static final LocalHandshakers handshakers = new LocalHandshakers();

  /** A server of {@link ChunkService} and a channel to it whose reads come from {@code pool}. */
  private static final class Download implements AutoCloseable {
    final Server server;
    final ManagedChannel channel;
    /** The client channel's one event loop, where its read budget sweeps on a timer. */
    final EventLoopGroup clientLoop = NettyTransports.nio(1);

    Download(ServerCredentials serverCredentials, ChannelCredentials channelCredentials,
        PooledByteBufAllocator pool) throws Exception {
      server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), serverCredentials)
          .addService(ChunkService.service())
          .build()
          .start();
      channel = NettyChannelBuilder.forAddress(
              new InetSocketAddress("127.0.0.1", server.getPort()), channelCredentials)
          .eventLoopGroup(clientLoop)
          .channelType(NioSocketChannel.class)
          .withOption(ChannelOption.ALLOCATOR, pool)
          .maxInboundMessageSize(4 * CHUNK_BYTES)
          .build();
    }

    /**
     * Returns once the client's read budget has swept since the call: a sweep is due at most the
     * longest the sweep timer waits from now, its timer hands it to the client's loop within a
     * tick of that, and a task on that loop due at twice the longest wait runs after it. A sweep
     * releases what downstream released before it.
     */
    void afterBudgetSweeps() throws Exception {
      clientLoop.next().schedule(() -> null, 2 * ReadPolicy.MAX_SWEEP_MILLIS, TimeUnit.MILLISECONDS)
          .get(30, TimeUnit.SECONDS);
    }

    Iterator<Chunk> download(io.grpc.MethodDescriptor.Marshaller<Chunk> marshaller, int chunks) {
      return ClientCalls.blockingServerStreamingCall(channel, ChunkService.download(marshaller),
          CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS),
          ChunkService.request(chunks, CHUNK_BYTES));
    }

    @Override
    public void close() throws InterruptedException {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      clientLoop.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  /** A pool of its own, without thread caches: what it hands out is what is live. */
  private static PooledByteBufAllocator pool() {
    return new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
  }

  @ParameterizedTest
  @EnumSource(Transport.class)
  void chunksReachTheApplicationAsViewsOfPooledBuffersCopiedOnlyByTheCipher(Transport transport)
      throws Exception {
    PooledByteBufAllocator pool = pool();
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    List<Chunk> held = new ArrayList<>();
    try (Download d = new Download(
        transport.server(handshakers.serverAddress()),
        transport.channel(handshakers.clientAddress()), pool);
        // A failed assertion leaves chunks held: released here, they are not reported as leaks.
        AutoCloseable unreleased =
            () -> held.stream().filter(chunks::isZeroCopy).forEach(chunks::release)) {
      long dataCopied = Metric.DATA_BYTES_COPIED.value();
      long recordCopied = Metric.RECORD_BYTES_COPIED.value();
      long messageCopied = Metric.MESSAGE_BYTES_COPIED.value();
      long aliased = Metric.MESSAGE_BYTES_ALIASED.value();
      Iterator<Chunk> download = d.download(chunks, CHUNKS);
      while (download.hasNext()) {
        Chunk chunk = download.next();
        held.add(chunk);
        assertTrue(ChunkService.matches(chunk), "chunk " + chunk.getOffset() + " intact");
        assertTrue(chunks.isZeroCopy(chunk), "chunk " + held.size() + " aliases its buffers");
        for (ByteBuffer piece : chunk.getData().asReadOnlyByteBufferList()) {
          assertTrue(piece.isDirect(), "data is a view of direct memory, not a heap copy");
        }
      }
      assertEquals(CHUNKS, held.size());
      long payload = (long) CHUNKS * CHUNK_BYTES;
      long transportCopies = Metric.DATA_BYTES_COPIED.value() - dataCopied
          + Metric.RECORD_BYTES_COPIED.value() - recordCopied;
      long marshallerCopies = Metric.MESSAGE_BYTES_COPIED.value() - messageCopied;
      // Every byte: the cipher's; with the JDK's engine also the record's heap copy its
      // AES-GCM works on, decrypted in place and copied out (TlsRecordStage).
      int cipher = transport == Transport.TLS_JDK ? 2 : transport.secure() ? 1 : 0;
      double copies = cipher + (double) (transportCopies + marshallerCopies) / payload;
      System.out.printf(Locale.ROOT, "zero-copy download %s: %.4f copies per payload byte"
          + " (cipher %d, read path %d bytes, marshaller %d bytes of %d)%n",
          transport, copies, cipher, transportCopies, marshallerCopies, payload);
      assertTrue(Metric.MESSAGE_BYTES_ALIASED.value() - aliased + marshallerCopies >= payload,
          "the marshaller accounts for every payload byte");
      // Small frames, sparse reads and records cut by reads copy a share that depends on how
      // reads fall (ALTS: 4-11% of the payload here); a path that copied everything would be 100%.
      assertTrue(transportCopies <= payload / 5,
          "the read path copies at most 20%: " + transportCopies);
      // Only pieces under 128 bytes (a message's head at the end of a frame) are staged.
      assertTrue(marshallerCopies <= CHUNKS * 1024L,
          "the marshaller copies only tiny pieces: " + marshallerCopies);

      // The views are the pool's memory: held, the chunks keep it live, at most 4 times their
      // size once the read budget has let go of what nobody holds.
      assertTrue(PoolBytes.liveBytes(pool) >= payload, "the held chunks live in the pool");
      long pinned = PoolBytes.liveBytesOnceSwept(pool, bytes -> bytes <= 4 * payload);
      assertTrue(pinned <= 4 * payload,
          "held chunks pin " + pinned + " pooled bytes for " + payload);

      for (Chunk chunk : held) {
        try (ZeroCopyMarshaller.Lease lease = chunks.lease(chunk)) {
          assertTrue(chunks.isZeroCopy(chunk));
        }
        assertFalse(chunks.isZeroCopy(chunk));
      }
      IllegalStateException twice =
          assertThrows(IllegalStateException.class, () -> chunks.release(held.get(0)));
      assertTrue(twice.getMessage().contains("released twice"), twice.getMessage());
      long left = PoolBytes.liveBytesOnceSwept(pool, bytes -> bytes < payload / 4);
      assertTrue(left < payload / 4, "released, the chunks give back their memory: " + left);
    }
  }

  /** For reference: stock grpc-netty with ProtoLiteUtils hands the application heap copies. */
  @Test
  void stockGrpcNettyWithProtoLiteUtilsCopiesEveryChunkToTheHeap() throws Exception {
    try (Download d = new Download(io.grpc.InsecureServerCredentials.create(),
        InsecureChannelCredentials.create(), pool())) {
      Iterator<Chunk> download =
          d.download(ProtoLiteUtils.marshaller(Chunk.getDefaultInstance()), 4);
      int n = 0;
      while (download.hasNext()) {
        Chunk chunk = download.next();
        assertTrue(ChunkService.matches(chunk));
        for (ByteBuffer piece : chunk.getData().asReadOnlyByteBufferList()) {
          assertFalse(piece.isDirect(), "ProtoLiteUtils parses from a heap copy");
        }
        n++;
      }
      assertEquals(4, n);
    }
  }

  /**
   * The read budget counts what the application holds: an application that keeps every chunk
   * and releases none holds the server back at the budget (the client withholds connection
   * credit and keeps reading), instead of growing memory; once it releases, the download
   * completes. Past the budget the client holds at most what the chunk under way may pin, the
   * credit it needs, and the connection window the server held (grpc-java's window grows to at
   * most {@link #LARGEST_GRPC_WINDOW}).
   */
  @Test
  void anApplicationHoldingChunksHoldsTheServerBackAtTheBudget() throws Exception {
    long budget = Settings.readBudgetBytes();
    int count = (int) (budget / CHUNK_BYTES) + 16;
    PooledByteBufAllocator pool = pool();
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    // What the call delivers, in order: chunks, then END once it has ended.
    BlockingQueue<Object> arrivals = new LinkedBlockingQueue<>();
    Object end = new Object();
    CountDownLatch nearBudget = new CountDownLatch((int) (budget / CHUNK_BYTES) - 2);
    AtomicInteger received = new AtomicInteger();
    AtomicInteger wrong = new AtomicInteger();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    try (Download d = new Download(PinlessServerCredentials.insecure(),
        PinlessChannelCredentials.insecure(), pool)) {
      long readsHeld = Metric.READS_HELD.value();
      ClientCall<io.pinless.testing.ChunkRequest, Chunk> call = d.channel.newCall(
          ChunkService.download(chunks), CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS));
      ClientCalls.asyncServerStreamingCall(call, ChunkService.request(count, CHUNK_BYTES),
          new StreamObserver<Chunk>() {
            @Override
            public void onNext(Chunk chunk) {
              if (!ChunkService.matches(chunk)) {
                wrong.incrementAndGet();
              }
              received.incrementAndGet();
              arrivals.add(chunk);
              nearBudget.countDown();
            }

            @Override
            public void onError(Throwable t) {
              failed.set(t);
              arrivals.add(end);
            }

            @Override
            public void onCompleted() {
              arrivals.add(end);
            }
          });
      assertTrue(nearBudget.await(30, TimeUnit.SECONDS), "chunks up to near the budget arrive");
      // Once what the application holds passes the budget, the connection withholds its
      // connection window updates; it reads on, so the server can send only the window it holds.
      d.afterBudgetSweeps();
      assertEquals(readsHeld, Metric.READS_HELD.value(), "reads go on: flow control holds");
      assertFalse(arrivals.contains(end), "the download waits for the application");
      long past = (FrameSlicer.PIN_RATIO + 1L) * CHUNK_BYTES + LARGEST_GRPC_WINDOW;
      long heldBytes = (long) received.get() * CHUNK_BYTES;
      assertTrue(heldBytes <= budget + past,
          "held " + heldBytes + " bytes in chunks against a budget of " + budget);
      long near = budget + past + 2L * CHUNK_BYTES;
      long pooled = PoolBytes.liveBytesOnceSwept(pool, bytes -> bytes <= near);
      assertTrue(pooled <= near, "pooled memory stays near the budget: " + pooled);

      // The application catches up: it releases what it holds, and each chunk as it comes.
      for (Object next = arrivals.poll(30, TimeUnit.SECONDS); next != end;
          next = arrivals.poll(30, TimeUnit.SECONDS)) {
        assertTrue(next != null, "the download goes on once chunks are released");
        chunks.release((Chunk) next);
      }
      assertEquals(null, failed.get());
      assertEquals(count, received.get());
      assertEquals(0, wrong.get());
    }
  }
}
