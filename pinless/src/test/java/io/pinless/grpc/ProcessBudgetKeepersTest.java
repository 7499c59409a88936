package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.read.ProcessBudget;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkService;
import io.pinless.testing.NettyTransports;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Downloads whose application keeps each connection's last two chunks until the next one comes,
 * together holding past half a process budget: every download completes. A connection whose
 * share leaves it nothing borrows the start of its next message; without it, its peer could send
 * nothing, and the application would wait for good.
 */
class ProcessBudgetKeepersTest {
  /** 60 s: a hang guard only; the test waits on the downloads' ends. */
  private static final long HANG_GUARD_SECONDS = 60;
  private static final long BUDGET_BYTES = 8L << 20;
  private static final int CONNECTIONS = 8;
  private static final int CHUNKS = 24;
  private static final int CHUNK_BYTES = 256 * 1024;
  private static final int KEPT = 2;

  @Test
  void downloadsKeepingTheirLastChunksAllComplete() throws Exception {
    ProcessBudget budget = new ProcessBudget(BUDGET_BYTES);
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
        InsecureServerCredentials.create()).addService(ChunkService.service()).build().start();
    EventLoopGroup loops = NettyTransports.nio(2);
    List<ManagedChannel> channels = new ArrayList<>();
    List<ArrayDeque<Chunk>> kept = new ArrayList<>();
    AtomicInteger received = new AtomicInteger();
    AtomicInteger wrong = new AtomicInteger();
    Queue<Status> failures = new ConcurrentLinkedQueue<>();
    CountDownLatch ended = new CountDownLatch(CONNECTIONS);
    try {
      for (int i = 0; i < CONNECTIONS; i++) {
        channels.add(NettyChannelBuilder.forAddress(
                new InetSocketAddress("127.0.0.1", server.getPort()),
                NettyNegotiators.clientCredentials(() -> null, budget))
            .eventLoopGroup(loops).channelType(NioSocketChannel.class).build());
        kept.add(new ArrayDeque<>());
      }
      for (int i = 0; i < CONNECTIONS; i++) {
        ArrayDeque<Chunk> mine = kept.get(i);
        ClientCalls.asyncServerStreamingCall(
            channels.get(i).newCall(ChunkService.download(chunks),
                CallOptions.DEFAULT.withDeadlineAfter(HANG_GUARD_SECONDS, TimeUnit.SECONDS)),
            ChunkService.request(CHUNKS, CHUNK_BYTES), new StreamObserver<Chunk>() {
              @Override
              public void onNext(Chunk chunk) {
                if (!ChunkService.matches(chunk)) {
                  wrong.incrementAndGet();
                }
                received.incrementAndGet();
                synchronized (mine) {
                  mine.add(chunk);
                  while (mine.size() > KEPT) {
                    chunks.release(mine.poll());
                  }
                }
              }

              @Override
              public void onError(Throwable t) {
                failures.add(Status.fromThrowable(t));
                ended.countDown();
              }

              @Override
              public void onCompleted() {
                ended.countDown();
              }
            });
      }
      assertTrue(ended.await(2 * HANG_GUARD_SECONDS, TimeUnit.SECONDS), "the downloads ended");
      assertTrue(failures.isEmpty(), "every download completed: " + failures);
      assertEquals(CONNECTIONS * CHUNKS, received.get());
      assertEquals(0, wrong.get(), "every chunk's bytes are right");
      assertTrue(budget.peakBytes() > BUDGET_BYTES / 2,
          "the application held past half the budget: " + budget.peakBytes());
    } finally {
      for (ManagedChannel channel : channels) {
        channel.shutdownNow().awaitTermination(HANG_GUARD_SECONDS, TimeUnit.SECONDS);
      }
      server.shutdownNow().awaitTermination(HANG_GUARD_SECONDS, TimeUnit.SECONDS);
      for (ArrayDeque<Chunk> mine : kept) {
        synchronized (mine) {
          mine.forEach(chunks::release);
          mine.clear();
        }
      }
      loops.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }
}
