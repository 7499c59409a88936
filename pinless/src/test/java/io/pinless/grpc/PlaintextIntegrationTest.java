package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.pinless.testing.FaultProxy;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ConnectivityState;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import io.pinless.Settings;
import io.pinless.http2.Http2FrameSlicer;
import io.pinless.http2.Http2Recording;
import io.pinless.grpc.Loopback.Transport;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Real grpc-java clients and servers on loopback, with the pinless plaintext credentials. */
class PlaintextIntegrationTest {
  private static final int[] SIZES = {0, 1, 16383, 16384, 16385, 1 << 20, 16 << 20};

  /** The server credentials of the pinless end under test. */
  ServerCredentials serverCredentials() {
    return PinlessServerCredentials.insecure();
  }

  /** The channel credentials of the pinless end under test. */
  ChannelCredentials channelCredentials() {
    return PinlessChannelCredentials.insecure();
  }

  private Loopback start(Transport transport) throws Exception {
    assumeTrue(transport.available(), transport + " is not available on this machine");
    return new Loopback(transport, serverCredentials(), channelCredentials());
  }

  @ParameterizedTest
  @EnumSource(Transport.class)
  void unaryAtEverySizeOnEveryTransport(Transport transport) throws Exception {
    long installedBefore = io.pinless.PinlessMetrics.Metric.CONNECTIONS_INSTALLED.value();
    try (Loopback lb = start(transport)) {
      for (int size : SIZES) {
        byte[] req = message(size, size);
        byte[] resp =
            ClientCalls.blockingUnaryCall(lb.channel, TestService.UNARY, CallOptions.DEFAULT, req);
        assertArrayEquals(req, resp, "size " + size);
      }
    }
    assertTrue(io.pinless.PinlessMetrics.Metric.CONNECTIONS_INSTALLED.value() >= installedBefore + 2, "client and server pipelines");
  }

  @Test
  void serverStreamingOfMebibyteMessagesCopiesNoDataIntoGrpcNettysCumulation() throws Exception {
    long unconsumedBefore = io.pinless.PinlessMetrics.Metric.UNCONSUMED_HAND_ONS.value();
    long slicedBefore = io.pinless.PinlessMetrics.Metric.DATA_BYTES_SLICED.value();
    long copiedBefore = io.pinless.PinlessMetrics.Metric.DATA_BYTES_COPIED.value();
    try (Loopback lb = start(Transport.NIO)) {
      Iterator<byte[]> it =
          ClientCalls.blockingServerStreamingCall(
              lb.channel, TestService.SERVER_STREAM, CallOptions.DEFAULT,
              TestService.streamRequest(40, 1 << 20));
      int n = 0;
      while (it.hasNext()) {
        assertArrayEquals(message(1 << 20, n), it.next(), "message " + n);
        n++;
      }
      assertEquals(40, n);
    }
    long sliced = io.pinless.PinlessMetrics.Metric.DATA_BYTES_SLICED.value() - slicedBefore;
    long copied = io.pinless.PinlessMetrics.Metric.DATA_BYTES_COPIED.value() - copiedBefore;
    assertEquals(0, io.pinless.PinlessMetrics.Metric.UNCONSUMED_HAND_ONS.value() - unconsumedBefore,
        "grpc-netty's handler read every buffer to the end: its cumulation never copied");
    assertTrue(sliced + copied >= 40L << 20, "every DATA byte went through the slicer");
    // What is copied: the short DATA frames the sender cut at its flow-control window, the
    // reads that filled under half their buffer, and pieces of cut frames under 4 KiB; bulk
    // frames in well-filled reads are sliced. How much depends on how reads fall: 1-2.5% of the
    // bytes alone, up to 5.1% beside the rest of the suite on Netty 4.1. The bound, 20%, leaves
    // room for a loaded machine; a read path that copied bulk frames would copy nearly all.
    System.out.printf("serverStreaming: copied %d of %d DATA bytes (%.2f%%)%n",
        copied, sliced + copied, 100.0 * copied / (sliced + copied));
    assertTrue(copied * 5 < sliced + copied,
        "copied " + copied + " of " + (sliced + copied) + " DATA bytes (only short frames)");
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 16385, 1 << 20})
  void clientStreaming(int size) throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      CompletableFuture<byte[]> result = new CompletableFuture<>();
      StreamObserver<byte[]> requests =
          ClientCalls.asyncClientStreamingCall(
              lb.channel.newCall(TestService.CLIENT_STREAM, CallOptions.DEFAULT), observer(result));
      int count = size > 100_000 ? 20 : 200;
      for (int i = 0; i < count; i++) {
        requests.onNext(message(size, i));
      }
      requests.onCompleted();
      ByteBuffer summary = ByteBuffer.wrap(result.get(60, TimeUnit.SECONDS));
      assertEquals((long) size * count, summary.getLong());
      assertEquals(count, summary.getInt());
    }
  }

  @Test
  void bidiStreamingEchoesEveryMessageInOrder() throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      List<byte[]> got = new ArrayList<>();
      CompletableFuture<Void> done = new CompletableFuture<>();
      StreamObserver<byte[]> requests =
          ClientCalls.asyncBidiStreamingCall(
              lb.channel.newCall(TestService.BIDI, CallOptions.DEFAULT),
              new StreamObserver<>() {
                @Override
                public void onNext(byte[] value) {
                  got.add(value);
                }

                @Override
                public void onError(Throwable t) {
                  done.completeExceptionally(t);
                }

                @Override
                public void onCompleted() {
                  done.complete(null);
                }
              });
      List<byte[]> sent = new ArrayList<>();
      for (int i = 0; i < 60; i++) {
        byte[] m = message(SIZES[i % SIZES.length] == 16 << 20 ? 3 << 20 : SIZES[i % SIZES.length], i);
        sent.add(m);
        requests.onNext(m);
      }
      requests.onCompleted();
      done.get(120, TimeUnit.SECONDS);
      assertEquals(sent.size(), got.size());
      for (int i = 0; i < sent.size(); i++) {
        assertArrayEquals(sent.get(i), got.get(i), "message " + i);
      }
    }
  }

  @Test
  void thousandConcurrentStreamsOnOneConnection() throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      List<CompletableFuture<byte[]>> calls = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        CompletableFuture<byte[]> f = new CompletableFuture<>();
        ClientCalls.asyncUnaryCall(
            lb.channel.newCall(TestService.UNARY, CallOptions.DEFAULT), message(1024, i), observer(f));
        calls.add(f);
      }
      for (int i = 0; i < calls.size(); i++) {
        assertArrayEquals(message(1024, i), calls.get(i).get(60, TimeUnit.SECONDS));
      }
    }
  }

  /**
   * A call naming another authority goes through, as over grpc-netty's own credentials (which
   * check it against a TLS peer's certificate and, by default, only log a mismatch).
   */
  @Test
  void aCallWithItsOwnAuthorityGoesThrough() throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      CompletableFuture<byte[]> f = new CompletableFuture<>();
      ClientCalls.asyncUnaryCall(
          lb.channel.newCall(TestService.UNARY, CallOptions.DEFAULT.withAuthority("localhost:443")),
          message(100, 1), observer(f));
      assertArrayEquals(message(100, 1), f.get(30, TimeUnit.SECONDS));
    }
  }

  @Test
  void cancelMidStreamThenTheChannelStillWorks() throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      ClientCall<byte[], byte[]> call = lb.channel.newCall(TestService.SERVER_STREAM, CallOptions.DEFAULT);
      Iterator<byte[]> it =
          ClientCalls.blockingServerStreamingCall(call, TestService.streamRequest(10_000, 65536));
      for (int i = 0; i < 3; i++) {
        assertArrayEquals(message(65536, i), it.next());
      }
      call.cancel("enough", null);
      StatusRuntimeException e = assertThrowsStatus(() -> drain(it));
      assertEquals(Status.Code.CANCELLED, e.getStatus().getCode());
      assertArrayEquals(message(10, 1),
          ClientCalls.blockingUnaryCall(lb.channel, TestService.UNARY, CallOptions.DEFAULT, message(10, 1)));
    }
  }

  @Test
  void deadlineMidStream() throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      deadlineMidStream(lb.channel);
    }
  }

  /** The same through a link that holds back every piece towards the client, as a slow machine. */
  @Test
  void deadlineMidStreamOnASlowLink() throws Exception {
    try (Loopback lb = start(Transport.NIO); FaultProxy proxy = new FaultProxy(lb.port())) {
      proxy.delayToClients(400);
      ManagedChannel channel = lb.newChannel(
          new InetSocketAddress("127.0.0.1", proxy.port()), channelCredentials());
      try {
        deadlineMidStream(channel);
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * A stream that only its 300 ms deadline can end: connected (and handshaken) first, so the
   * deadline covers only the stream, and the server echoes and then waits for the client's next
   * message or half-close, which never come. However slow the machine, the call ends with
   * DEADLINE_EXCEEDED; the echo arrives before it or not at all.
   */
  private static void deadlineMidStream(ManagedChannel channel) throws Exception {
    assertArrayEquals(message(5, 5),
        ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT,
            message(5, 5)));
    List<byte[]> received = java.util.Collections.synchronizedList(new ArrayList<>());
    CompletableFuture<Status> closed = new CompletableFuture<>();
    ClientCall<byte[], byte[]> call = channel.newCall(TestService.BIDI,
        CallOptions.DEFAULT.withDeadlineAfter(300, TimeUnit.MILLISECONDS));
    call.start(new ClientCall.Listener<byte[]>() {
      @Override
      public void onMessage(byte[] message) {
        received.add(message);
      }

      @Override
      public void onClose(Status status, Metadata trailers) {
        closed.complete(status);
      }
    }, new Metadata());
    call.request(Integer.MAX_VALUE);
    call.sendMessage(message(65536, 0));
    Status status = closed.get(60, TimeUnit.SECONDS); // a hang guard
    assertEquals(Status.Code.DEADLINE_EXCEEDED, status.getCode(), status.toString());
    assertTrue(received.size() <= 1, received.size() + " echoes of one message");
    for (byte[] echo : received) {
      assertArrayEquals(message(65536, 0), echo);
    }
  }

  @Test
  void serverThatClosesMidStreamEndsTheCallWithAnError() throws Exception {
    Loopback lb = start(Transport.NIO);
    try {
      Iterator<byte[]> it =
          ClientCalls.blockingServerStreamingCall(
              lb.channel, TestService.SERVER_STREAM, CallOptions.DEFAULT,
              TestService.streamRequest(1_000_000, 65536));
      assertArrayEquals(message(65536, 0), it.next());
      lb.server.shutdownNow();
      StatusRuntimeException e = assertThrowsStatus(() -> drain(it));
      assertTrue(
          e.getStatus().getCode() == Status.Code.UNAVAILABLE
              || e.getStatus().getCode() == Status.Code.CANCELLED
              || e.getStatus().getCode() == Status.Code.INTERNAL,
          e.getStatus().toString());
    } finally {
      lb.close();
    }
  }

  /**
   * A response cut into pieces of 1 to 7 bytes, each written alone, and a stall in the middle of
   * it: every byte arrives, in order, once the stall ends.
   */
  @Test
  void aResponseCutIntoTinyPiecesAndStalledArrivesWhole() throws Exception {
    try (Loopback lb = start(Transport.NIO); FaultProxy proxy = new FaultProxy(lb.port())) {
      ManagedChannel channel = lb.newChannel(
          new InetSocketAddress("127.0.0.1", proxy.port()), channelCredentials());
      try {
        assertArrayEquals(message(5, 5),
            ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, message(5, 5)));
        proxy.cutToClients(7);
        proxy.stallAfter(50_000);
        Iterator<byte[]> download = ClientCalls.blockingServerStreamingCall(channel,
            TestService.SERVER_STREAM, CallOptions.DEFAULT, TestService.streamRequest(4, 100_000));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (proxy.stalled() < 1 && System.nanoTime() < deadline) {
          Thread.onSpinWait();
        }
        assertEquals(1, proxy.stalled(), "the proxy holds the rest after 50,000 bytes");
        assertEquals(50_000, proxy.forwardedSinceStall());
        proxy.resume();
        for (int n = 0; n < 4; n++) {
          assertArrayEquals(message(100_000, n), download.next(), "message " + n);
        }
        assertFalse(download.hasNext());
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  @Test
  void aPeersGracefulCloseThroughAProxyIsEndOfStreamAndTheNextCallReconnects() throws Exception {
    try (Loopback lb = start(Transport.NIO); FaultProxy proxy = new FaultProxy(lb.port())) {
      ManagedChannel channel =
          lb.newChannel(new java.net.InetSocketAddress("127.0.0.1", proxy.port()),
              channelCredentials());
      try {
        assertArrayEquals(message(5, 5),
            ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, message(5, 5)));
        assertEquals(ConnectivityState.READY, channel.getState(false));
        CountDownLatch leftReady = new CountDownLatch(1);
        channel.notifyWhenStateChanged(ConnectivityState.READY, leftReady::countDown);
        long start = System.nanoTime();
        proxy.closeAll();
        assertTrue(leftReady.await(30, TimeUnit.SECONDS), "the channel never left READY");
        long millis = (System.nanoTime() - start) / 1_000_000;
        System.out.println("channel left READY " + millis + " ms after the proxy closed");
        assertArrayEquals(message(6, 6),
            ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, message(6, 6)));
        assertTrue(proxy.accepted() >= 2, "the next call reconnected");
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  /** How many connections {@link #thousandConnectionsClosedWhileStreaming} opens. */
  int connectionsClosedWhileStreaming() {
    return 1000;
  }

  @Test
  void thousandConnectionsClosedWhileStreaming() throws Exception {
    try (Loopback lb = start(Transport.NIO)) {
      List<ManagedChannel> channels = new ArrayList<>();
      List<CompletableFuture<Void>> ends = new ArrayList<>();
      List<CountDownLatch> firsts = new ArrayList<>();
      for (int i = 0; i < connectionsClosedWhileStreaming(); i++) {
        ManagedChannel ch = lb.newChannel(lb.server.getListenSockets().get(0),
            channelCredentials());
        channels.add(ch);
        CompletableFuture<Void> end = new CompletableFuture<>();
        CountDownLatch first = new CountDownLatch(1);
        ClientCalls.asyncServerStreamingCall(
            ch.newCall(TestService.SERVER_STREAM, CallOptions.DEFAULT),
            TestService.streamRequest(1_000_000, 4096),
            // Take one message, then leave the rest in flight: each server keeps its stream's
            // flow-control window full, so every connection closes with data on the wire and in
            // its buffers, without 1000 streams racing each other for the two cores.
            new ClientResponseObserver<byte[], byte[]>() {
              @Override
              public void beforeStart(ClientCallStreamObserver<byte[]> requestStream) {
                requestStream.disableAutoRequestWithInitial(1);
              }

              @Override
              public void onNext(byte[] value) {
                first.countDown();
              }

              @Override
              public void onError(Throwable t) {
                end.completeExceptionally(t);
              }

              @Override
              public void onCompleted() {
                end.complete(null);
              }
            });
        ends.add(end);
        firsts.add(first);
      }
      for (CountDownLatch first : firsts) {
        assertTrue(first.await(60, TimeUnit.SECONDS), "every stream is flowing");
      }
      for (ManagedChannel ch : channels) {
        ch.shutdownNow();
      }
      for (CompletableFuture<Void> end : ends) {
        Throwable t = null;
        try {
          end.get(60, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
          t = e.getCause();
        }
        assertTrue(t instanceof StatusRuntimeException, String.valueOf(t));
        Status.Code code = ((StatusRuntimeException) t).getStatus().getCode();
        assertTrue(code == Status.Code.CANCELLED || code == Status.Code.UNAVAILABLE, code.toString());
      }
      for (ManagedChannel ch : channels) {
        assertTrue(ch.awaitTermination(30, TimeUnit.SECONDS));
      }
    }
  }

  /**
   * A pinless client advertises a SETTINGS_MAX_FRAME_SIZE above HTTP/2's 16 KiB, so a stock
   * grpc-netty server sends it larger DATA frames (fewer frames: less work per byte on both ends);
   * a stock client, the control, keeps the default. Read on the wire, through a proxy.
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void aPinlessClientAdvertisesLargerFramesAndAStockServerSendsThem(boolean pinless)
      throws Exception {
    assumeTrue(Settings.http2MaxFrameSize() > 16384, "pinless.http2.maxFrameSize is the default");
    try (Loopback lb = new Loopback(Transport.NIO, InsecureServerCredentials.create(),
            InsecureChannelCredentials.create());
        FaultProxy proxy = new FaultProxy(lb.port(), true)) {
      ManagedChannel channel =
          lb.newChannel(new InetSocketAddress("127.0.0.1", proxy.port()),
              pinless ? PinlessChannelCredentials.insecure() : InsecureChannelCredentials.create());
      try {
        Iterator<byte[]> it =
            ClientCalls.blockingServerStreamingCall(channel, TestService.SERVER_STREAM,
                CallOptions.DEFAULT, TestService.streamRequest(8, 1 << 20));
        for (int n = 0; n < 8; n++) {
          assertArrayEquals(message(1 << 20, n), it.next(), "message " + n);
        }
        assertFalse(it.hasNext());
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      assertFramesUpTo(pinless, largestDataFrame(proxy.fromServers(), 0));
    }
  }

  /** The same the other way: a stock client uploads to a pinless server in larger frames. */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void aPinlessServerAdvertisesLargerFramesAndAStockClientSendsThem(boolean pinless)
      throws Exception {
    assumeTrue(Settings.http2MaxFrameSize() > 16384, "pinless.http2.maxFrameSize is the default");
    try (Loopback lb = new Loopback(Transport.NIO,
            pinless ? PinlessServerCredentials.insecure() : InsecureServerCredentials.create(),
            InsecureChannelCredentials.create());
        FaultProxy proxy = new FaultProxy(lb.port(), true)) {
      ManagedChannel channel =
          lb.newChannel(new InetSocketAddress("127.0.0.1", proxy.port()),
              InsecureChannelCredentials.create());
      try {
        CompletableFuture<byte[]> result = new CompletableFuture<>();
        StreamObserver<byte[]> requests =
            ClientCalls.asyncClientStreamingCall(
                channel.newCall(TestService.CLIENT_STREAM, CallOptions.DEFAULT), observer(result));
        for (int i = 0; i < 8; i++) {
          requests.onNext(message(1 << 20, i));
        }
        requests.onCompleted();
        ByteBuffer summary = ByteBuffer.wrap(result.get(60, TimeUnit.SECONDS));
        assertEquals(8L << 20, summary.getLong());
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      assertFramesUpTo(pinless, largestDataFrame(proxy.fromClients(), 24));
    }
  }

  /**
   * The largest DATA frame a stock sender sent: above 16 KiB and at most what the receiver
   * advertised if it is pinless, else exactly HTTP/2's default (the sender fills its frames).
   */
  private static void assertFramesUpTo(boolean pinlessReceiver, int largest) {
    if (pinlessReceiver) {
      assertTrue(largest > 16384 && largest <= Settings.http2MaxFrameSize(),
          "largest DATA frame to the pinless end: " + largest);
    } else {
      assertEquals(16384, largest, "to a stock end: HTTP/2's default maximum");
    }
  }

  /** The largest DATA payload among the whole HTTP/2 frames of {@code wire} after {@code skip}. */
  private static int largestDataFrame(byte[] wire, int skip) {
    return Http2Recording.wholeFrames(wire, skip).stream()
        .filter(f -> f.type() == 0).mapToInt(Http2Recording.Frame::length).max().orElse(-1);
  }

  @Test
  void rollbackSwitchBuildsTheStockPipeline() throws Exception {
    long before = io.pinless.PinlessMetrics.Metric.CONNECTIONS_INSTALLED.value();
    try (Loopback lb =
        new Loopback(
            Transport.NIO,
            NettyNegotiators.serverCredentials(false),
            NettyNegotiators.clientCredentials(false))) {
      assertArrayEquals(message(100, 1),
          ClientCalls.blockingUnaryCall(lb.channel, TestService.UNARY, CallOptions.DEFAULT, message(100, 1)));
    }
    assertEquals(before, io.pinless.PinlessMetrics.Metric.CONNECTIONS_INSTALLED.value(), "no pinless handler was installed");
  }

  @Test
  void grpcNewChannelBuilderAndServerBuilderForPortAcceptTheCredentials() throws Exception {
    io.grpc.Server server =
        io.grpc.Grpc.newServerBuilderForPort(0, PinlessServerCredentials.insecure())
            .addService(TestService.definition())
            .build()
            .start();
    ManagedChannel channel =
        io.grpc.Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(), PinlessChannelCredentials.insecure())
            .build();
    try {
      assertArrayEquals(message(64, 2),
          ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, message(64, 2)));
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  /** An observer that completes {@code f} with the first value, or fails it. */
  static <T> StreamObserver<T> observer(CompletableFuture<T> f) {
    return new StreamObserver<>() {
      @Override
      public void onNext(T value) {
        f.complete(value);
      }

      @Override
      public void onError(Throwable t) {
        f.completeExceptionally(t);
      }

      @Override
      public void onCompleted() {}
    };
  }

  private static void drain(Iterator<byte[]> it) {
    while (it.hasNext()) {
      it.next();
    }
  }

  private static StatusRuntimeException assertThrowsStatus(Runnable r) {
    try {
      r.run();
    } catch (StatusRuntimeException e) {
      return e;
    }
    throw new AssertionError("expected a StatusRuntimeException");
  }

  static Metadata none() {
    return new Metadata();
  }
}
