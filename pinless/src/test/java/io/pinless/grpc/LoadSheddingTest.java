package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.read.ProcessBudget;
import io.pinless.read.ReadBudget;
import io.pinless.testing.NettyTransports;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A server over its process budget: new calls get {@code RESOURCE_EXHAUSTED} and the service
 * never sees them; far over it, new connections are closed while open ones stay; once memory
 * falls, both come back.
 */
class LoadSheddingTest {
  private static final long LIMIT = 1 << 20;

  private final ProcessBudget budget = new ProcessBudget(LIMIT);
  /** Stands for the connections' held buffers: reports to {@link #budget}. */
  private final ReadBudget pressure = new ReadBudget(Long.MAX_VALUE, budget);
  private final List<ByteBuf> held = new ArrayList<>();
  private final List<ManagedChannel> channels = new ArrayList<>();
  private EventLoopGroup group;
  private Server server;
  private final ExecutorService calls = ServerThreads.newPool();

  @BeforeEach
  void start() throws Exception {
    group = NettyTransports.nio(2);
    server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
            NettyNegotiators.serverCredentials(() -> null, budget))
        .bossEventLoopGroup(group)
        .workerEventLoopGroup(group)
        .channelType(NioServerSocketChannel.class)
        .intercept(LoadShedding.interceptor(budget))
        .executor(calls)
        .addService(TestService.definition())
        .build()
        .start();
  }

  @AfterEach
  void stop() throws Exception {
    relieve();
    for (ManagedChannel c : channels) {
      c.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    ServerThreads.stop(server, calls);
    group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
  }

  @Test
  void overTheBudgetNewCallsAreShedUntilMemoryFalls() throws Exception {
    ManagedChannel channel = connect();
    byte[] message = TestService.message(1000, 1);
    assertArrayEquals(message, call(channel, message), "a call before any pressure");

    press(LIMIT + 1);
    long shedBefore = Metric.STREAMS_SHED.value();
    StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
        () -> call(channel, message));
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode());
    assertTrue(e.getStatus().getDescription().contains("pinless.process.budgetBytes"),
        e.getStatus().toString());
    assertEquals(1, Metric.STREAMS_SHED.value() - shedBefore);

    relieve();
    assertArrayEquals(message, call(channel, message), "calls come back once memory falls");
  }

  @Test
  void farOverTheBudgetNewConnectionsAreClosedAndOpenOnesStay() throws Exception {
    ManagedChannel open = connect();
    byte[] message = TestService.message(1000, 2);
    assertArrayEquals(message, call(open, message));

    press(LIMIT * 5 / 4);
    long refusedBefore = Metric.CONNECTIONS_REFUSED.value();
    StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
        () -> call(connect(), message));
    assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
    assertTrue(Metric.CONNECTIONS_REFUSED.value() - refusedBefore >= 1);
    StatusRuntimeException shed = assertThrows(StatusRuntimeException.class,
        () -> call(open, message));
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, shed.getStatus().getCode(),
        "the open connection stays; its new call is shed");

    relieve();
    assertArrayEquals(message, call(connect(), message), "a new connection once memory falls");
  }

  private ManagedChannel connect() {
    ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1",
            ((InetSocketAddress) server.getListenSockets().get(0)).getPort())
        .usePlaintext()
        .eventLoopGroup(group)
        .channelType(NioSocketChannel.class)
        .build();
    channels.add(channel);
    return channel;
  }

  private static byte[] call(ManagedChannel channel, byte[] message) {
    return ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, message);
  }

  /** Makes the budget hold {@code bytes} more, as connections whose buffers are held would. */
  private void press(long bytes) {
    ByteBuf buf = PooledByteBufAllocator.DEFAULT.directBuffer((int) bytes);
    pressure.track(buf);
    held.add(buf.retainedSlice(0, 1));
    buf.release();
  }

  private void relieve() {
    held.forEach(ByteBuf::release);
    held.clear();
    pressure.sweep();
  }
}
