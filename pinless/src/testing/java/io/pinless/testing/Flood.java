package io.pinless.testing;

import io.grpc.CallOptions;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.grpc.Payload;
import io.pinless.grpc.PayloadMarshaller;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * Many clients uploading large messages to a server whose service keeps each received zero-copy
 * message for a while before releasing it, so the server's received memory grows with the
 * clients' rate unless something bounds it. Each client connection runs its calls one after the
 * other and sends each call's messages as flow control lets it; each call gets back the CRC32 of
 * what the server received. The server has a pool of its own ({@link #serverPinnedBytes}), so
 * what it pins is the server's alone.
 */
public final class Flood implements AutoCloseable {
  static final String SERVICE = "pinless.test.Flood";
  static final MethodDescriptor<Payload, byte[]> UPLOAD =
      MethodDescriptor.<Payload, byte[]>newBuilder()
          .setType(MethodDescriptor.MethodType.CLIENT_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Upload"))
          .setRequestMarshaller(PayloadMarshaller.INSTANCE)
          .setResponseMarshaller(ByteArrays.MARSHALLER)
          .build();

  /**
   * How one call ended: the CRC32 the server returned, or the status it failed with; the bytes
   * it sent.
   */
  public record Outcome(long expectedCrc, long crc, Status status, long bytes) {
    /** True if the call completed and the server received exactly what was sent. */
    public boolean completedWithTheRightBytes() {
      return status.isOk() && crc == expectedCrc;
    }
  }

  /** One client's calls, and how long they took from the first call's start to the last's end. */
  public record Client(List<Outcome> outcomes, long nanos) {
    /** Bytes of the calls that completed, per second. */
    public double throughput() {
      long bytes = outcomes.stream().filter(Outcome::completedWithTheRightBytes)
          .mapToLong(Outcome::bytes).sum();
      return bytes * 1e9 / nanos;
    }

    /** True if any of the client's calls failed. */
    public boolean failed() {
      return outcomes.stream().anyMatch(o -> !o.status().isOk());
    }
  }

  /**
   * Jain's fairness index of the throughputs of the {@code clients} none of whose calls failed:
   * 1 when all moved alike; NaN when there are none.
   */
  public static double fairness(List<Client> clients) {
    double[] x = clients.stream().filter(c -> !c.failed()).mapToDouble(Client::throughput)
        .toArray();
    double sum = 0;
    double squares = 0;
    for (double v : x) {
      sum += v;
      squares += v * v;
    }
    return x.length == 0 ? Double.NaN : sum * sum / (x.length * squares);
  }

  private final EventLoopGroup group;
  /** The server's own pool. */
  private final PooledByteBufAllocator serverPool = new PooledByteBufAllocator(true);
  private final ScheduledExecutorService releases = Executors.newSingleThreadScheduledExecutor();
  private final Server server;
  private final List<ManagedChannel> channels = new ArrayList<>();

  /**
   * A server on loopback with {@code credentials}, its service keeping each message {@code
   * holdMillis} before releasing it, shedding through {@code shedding} unless it is null; client
   * and server share {@code loopThreads} NIO event loops.
   */
  public Flood(ServerCredentials credentials, ServerInterceptor shedding, long holdMillis,
      int loopThreads) throws IOException {
    group = NettyTransports.nio(loopThreads);
    ServerServiceDefinition service = ServerServiceDefinition.builder(SERVICE)
        .addMethod(UPLOAD, ServerCalls.asyncClientStreamingCall(out -> new Keeper(out, holdMillis)))
        .build();
    NettyServerBuilder builder = NettyServerBuilder.forAddress(
            new InetSocketAddress("127.0.0.1", 0), credentials)
        .bossEventLoopGroup(group)
        .workerEventLoopGroup(group)
        .channelType(NioServerSocketChannel.class)
        .withChildOption(ChannelOption.ALLOCATOR, serverPool)
        .permitKeepAliveTime(1, TimeUnit.SECONDS)
        .permitKeepAliveWithoutCalls(true)
        .addService(service);
    if (shedding != null) {
      builder.intercept(shedding);
    }
    server = builder.build().start();
  }

  /** The bytes the server's pool hands to live buffers now. */
  public long serverPinnedBytes() {
    return serverPool.pinnedDirectMemory();
  }

  /** A client connection of its own, with a 1 s keepalive (gRPC may lengthen it). */
  public ManagedChannel connect() {
    ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1",
            ((InetSocketAddress) server.getListenSockets().get(0)).getPort())
        .usePlaintext()
        .eventLoopGroup(group)
        .channelType(NioSocketChannel.class)
        .keepAliveTime(1, TimeUnit.SECONDS)
        .keepAliveWithoutCalls(true)
        .build();
    channels.add(channel);
    return channel;
  }

  /**
   * Connects every channel and waits until all are ready, so that the clients' calls start
   * together: fairness is then measured among flows that compete from their first byte, not
   * skewed by the first connections running alone while the rest connect. {@code guardSeconds}
   * is a hang guard only: every wait ends on a channel's state change.
   */
  public static void awaitReady(List<ManagedChannel> channels, long guardSeconds)
      throws InterruptedException {
    CountDownLatch ready = new CountDownLatch(channels.size());
    for (ManagedChannel c : channels) {
      whenReady(c, ready);
    }
    if (!ready.await(guardSeconds, TimeUnit.SECONDS)) {
      throw new IllegalStateException(ready.getCount() + " channels never became ready");
    }
  }

  private static void whenReady(ManagedChannel channel, CountDownLatch ready) {
    ConnectivityState state = channel.getState(true);
    if (state == ConnectivityState.READY) {
      ready.countDown();
    } else {
      channel.notifyWhenStateChanged(state, () -> whenReady(channel, ready));
    }
  }

  /** The CRC32 of {@code bodies} one after the other: what the server returns for them. */
  public static long crc(List<byte[]> bodies) {
    CRC32 crc = new CRC32();
    bodies.forEach(crc::update);
    return crc.getValue();
  }

  /**
   * Runs {@code calls} uploads of {@code bodies} (whose {@link #crc} is {@code expectedCrc}), one
   * after the other on {@code channel}; the future completes with every call's outcome and the
   * time taken.
   */
  public CompletableFuture<Client> uploads(
      ManagedChannel channel, int calls, List<byte[]> bodies, long expectedCrc) {
    CompletableFuture<List<Outcome>> done = new CompletableFuture<>();
    long start = System.nanoTime();
    upload(channel, calls, bodies, expectedCrc, new ArrayList<>(), done);
    return done.thenApply(all -> new Client(all, System.nanoTime() - start));
  }

  private void upload(ManagedChannel channel, int callsLeft, List<byte[]> bodies, long want,
      List<Outcome> outcomes, CompletableFuture<List<Outcome>> done) {
    if (callsLeft == 0) {
      done.complete(outcomes);
      return;
    }
    long bytes = bodies.stream().mapToLong(b -> b.length).sum();
    ClientCalls.asyncClientStreamingCall(channel.newCall(UPLOAD, CallOptions.DEFAULT),
        new ClientResponseObserver<Payload, byte[]>() {
          private long crc = -1;
          private int sent;

          @Override
          public void beforeStart(ClientCallStreamObserver<Payload> requests) {
            requests.setOnReadyHandler(() -> {
              while (requests.isReady() && sent < bodies.size()) {
                requests.onNext(Payload.wrap(bodies.get(sent++)));
                if (sent == bodies.size()) {
                  requests.onCompleted();
                }
              }
            });
          }

          @Override
          public void onNext(byte[] value) {
            crc = ByteBuffer.wrap(value).getLong();
          }

          @Override
          public void onError(Throwable t) {
            outcomes.add(new Outcome(want, -1, Status.fromThrowable(t), bytes));
            upload(channel, callsLeft - 1, bodies, want, outcomes, done);
          }

          @Override
          public void onCompleted() {
            outcomes.add(new Outcome(want, crc, Status.OK, bytes));
            upload(channel, callsLeft - 1, bodies, want, outcomes, done);
          }
        });
  }

  @Override
  public void close() throws Exception {
    for (ManagedChannel c : channels) {
      c.shutdownNow();
    }
    server.shutdownNow();
    for (ManagedChannel c : channels) {
      c.awaitTermination(10, TimeUnit.SECONDS);
    }
    server.awaitTermination(10, TimeUnit.SECONDS);
    releases.shutdown();
    releases.awaitTermination(10, TimeUnit.SECONDS);
    group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
  }

  /** Sums a call's messages into a CRC32 and releases each one {@code holdMillis} later. */
  private final class Keeper implements StreamObserver<Payload> {
    private final StreamObserver<byte[]> out;
    private final long holdMillis;
    private final CRC32 crc = new CRC32();

    Keeper(StreamObserver<byte[]> out, long holdMillis) {
      this.out = out;
      this.holdMillis = holdMillis;
    }

    @Override
    public void onNext(Payload message) {
      for (ByteBuffer b : message.buffers()) {
        crc.update(b);
      }
      releases.schedule(message::close, holdMillis, TimeUnit.MILLISECONDS);
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {
      out.onNext(ByteBuffer.allocate(Long.BYTES).putLong(crc.getValue()).array());
      out.onCompleted();
    }
  }
}
