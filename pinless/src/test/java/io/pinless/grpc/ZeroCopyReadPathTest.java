package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.Detachable;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.pinless.testing.NettyTransports;
import io.pinless.testing.RawHttp2Client;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.Iterator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The stream gRPC hands a client's marshaller for each received message is zero-copy capable on
 * a pinless connection, over plaintext, ALTS and TLS on each engine: known length, detachable, and
 * backed by buffers that each expose an NIO buffer. A 2 MiB message arrives in many pieces, some
 * of them the frame slicer's copies; one heap-only piece would make the whole stream fall back.
 */
class ZeroCopyReadPathTest {
  private static final int MESSAGE_BYTES = 2 << 20;
  private static final int MESSAGES = 4;
  /** Socket buffers that hold a whole flood of tiny frames (this machine allows up to 4 MiB). */
  private static final int FLOOD_SOCKET_BYTES = 2 << 20;

  @RegisterExtension
  static final LocalHandshakers handshakers = new LocalHandshakers();

  /** Reads each message whole and counts the streams that were zero-copy capable. */
  private static final class Checking implements MethodDescriptor.Marshaller<byte[]> {
    final AtomicInteger parsed = new AtomicInteger();
    final AtomicInteger zeroCopy = new AtomicInteger();
    final CountDownLatch received;

    Checking(int messages) {
      received = new CountDownLatch(messages);
    }

    @Override
    public InputStream stream(byte[] value) {
      return TestService.BYTES.stream(value);
    }

    @Override
    public byte[] parse(InputStream stream) {
      parsed.incrementAndGet();
      if (stream instanceof KnownLength && stream instanceof Detachable
          && stream instanceof HasByteBuffer && ((HasByteBuffer) stream).byteBufferSupported()) {
        zeroCopy.incrementAndGet();
      }
      try {
        return stream.readAllBytes();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } finally {
        received.countDown();
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Transport.class)
  void everyReceivedMessageReachesTheMarshallerAsNioBuffers(Transport security) throws Exception {
    ExecutorService calls = ServerThreads.newPool();
    Server server = NettyServerBuilder.forAddress(
            new InetSocketAddress("127.0.0.1", 0), security.server(handshakers.serverAddress()))
        .executor(calls)
        .addService(TestService.definition())
        .build()
        .start();
    ManagedChannel channel = NettyChannelBuilder.forAddress(
            new InetSocketAddress("127.0.0.1", server.getPort()), security.channel(handshakers.clientAddress()))
        .build();
    try {
      Checking responses = new Checking(MESSAGES);
      MethodDescriptor<byte[], byte[]> download =
          TestService.SERVER_STREAM.toBuilder(TestService.BYTES, responses).build();
      Iterator<byte[]> messages = ClientCalls.blockingServerStreamingCall(channel, download,
          CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS),
          TestService.streamRequest(MESSAGES, MESSAGE_BYTES));
      int i = 0;
      while (messages.hasNext()) {
        assertArrayEquals(TestService.message(MESSAGE_BYTES, i++), messages.next());
      }
      assertEquals(MESSAGES, i);
      assertEquals(MESSAGES, responses.parsed.get());
      assertEquals(MESSAGES, responses.zeroCopy.get(),
          "every message's pieces expose NIO buffers, so a marshaller may read them in place");
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      ServerThreads.stop(server, calls);
    }
  }

  /**
   * A client that sends each message in tiny DATA frames, one stream alone or four taking turns:
   * the slicer joins a stream's small frames into copies of at least 1 KiB, so gRPC's deframer
   * never copies a run of them into a heap array and the message still reaches the marshaller as
   * NIO buffers.
   */
  @ParameterizedTest
  @CsvSource({
      "PLAINTEXT, 1, 1, 20000", "PLAINTEXT, 100, 1, 200000", "PLAINTEXT, 1, 4, 5000",
      "PLAINTEXT, 100, 4, 50000", "ALTS, 1, 1, 20000", "ALTS, 100, 4, 50000",
      "TLS_JDK, 1, 1, 20000", "TLS_OPENSSL, 100, 4, 50000"})
  void aMessageSentInTinyFramesReachesTheMarshallerAsNioBuffers(
      Transport security, int frameBytes, int streams, int messageBytes) throws Exception {
    Checking requests = new Checking(streams);
    AtomicReference<byte[]> wrong = new AtomicReference<>();
    MethodDescriptor<byte[], byte[]> upload =
        TestService.CLIENT_STREAM.toBuilder(requests, TestService.BYTES).build();
    ServerServiceDefinition service = ServerServiceDefinition.builder(TestService.SERVICE)
        .addMethod(upload, ServerCalls.asyncClientStreamingCall(response -> new StreamObserver<byte[]>() {
          @Override
          public void onNext(byte[] message) {
            for (int i = 0; i < message.length; i++) {
              if (message[i] != (byte) ((i + 5) * 31 + 7)) {
                wrong.set(message);
              }
            }
          }

          @Override
          public void onError(Throwable t) {}

          @Override
          public void onCompleted() {}
        }))
        .build();
    EventLoopGroup serverLoop = NettyTransports.nio(1);
    ExecutorService calls = ServerThreads.newPool();
    Server server = NettyServerBuilder.forAddress(
            new InetSocketAddress("127.0.0.1", 0), security.server(handshakers.serverAddress()))
        .bossEventLoopGroup(serverLoop)
        .workerEventLoopGroup(serverLoop)
        .channelType(NioServerSocketChannel.class)
        .withChildOption(ChannelOption.SO_RCVBUF, FLOOD_SOCKET_BYTES)
        .executor(calls)
        .addService(service)
        .build()
        .start();
    EventLoopGroup group = NettyTransports.nio(1);
    try {
      RawHttp2Client client = new RawHttp2Client(security.secure(),
          "/" + upload.getFullMethodName(), streams, messageBytes, frameBytes, 16384);
      HostileFraming.connect(new Bootstrap()
              .group(group)
              .option(ChannelOption.SO_SNDBUF, FLOOD_SOCKET_BYTES),
          HostileFraming.Security.valueOf(security.name()), client,
          handshakers.clientAddress(), server.getPort());
      client.ready().get(30, TimeUnit.SECONDS);
      // A flood: the server's loop waits until the client has written every frame into the
      // socket (whose buffers hold them all), so its reads find the socket full. (A sender slower than the reader makes reads that carry under
      // 1 KiB of a stream; their joins go on small, and gRPC copies runs of them.)
      CountDownLatch flooded = new CountDownLatch(1);
      serverLoop.next().execute(() -> {
        try {
          flooded.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      CompletableFuture<Void> read = client.sendUntil(messageBytes);
      try {
        client.written().get(60, TimeUnit.SECONDS);
      } finally {
        flooded.countDown();
      }
      read.get(120, TimeUnit.SECONDS);
      assertTrue(requests.received.await(30, TimeUnit.SECONDS), "every message arrived");
      assertEquals(null, wrong.get(), "messages arrive intact");
      assertEquals(streams, requests.zeroCopy.get(),
          "a message sent in " + frameBytes + "-byte frames reaches the marshaller as NIO buffers");
    } finally {
      group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      ServerThreads.stop(server, calls);
      serverLoop.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }
}
