package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http2.DefaultHttp2Headers;
import io.netty.handler.codec.http2.DefaultHttp2HeadersEncoder;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.util.AsciiString;
import io.pinless.testing.Chunk;
import io.pinless.testing.NettyTransports;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The read budget end to end: a message within the limits completes whatever its frames pin, and a
 * connection held back because the application keeps zero-copy messages still answers keepalive
 * PINGs and goes on once they are released.
 */
class ReadBudgetIntegrationTest {
  /** 60 s: a hang guard only; every wait ends on an event. */
  private static final long HANG_GUARD_SECONDS = 60;
  private static final String SERVICE = "pinless.test.Budget";

  private static MethodDescriptor<byte[], byte[]> unary() {
    return MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Unary"))
        .setRequestMarshaller(TestService.BYTES)
        .setResponseMarshaller(TestService.BYTES)
        .build();
  }

  /**
   * A 2 KiB message under an 8 KiB budget, sent in padded DATA frames of 10 data bytes and 255 of
   * padding, 57 KB in all: more than one read, and the first read's frames already take more than
   * the budget. gRPC holds the message until it is whole, so holding reads there would keep it from
   * ever completing.
   */
  @Test
  void messageWellUnderTheBudgetCompletesWhateverItsFramesPin() throws Exception {
    BudgetedPlaintext creds = new BudgetedPlaintext(8 << 10);
    CompletableFuture<byte[]> received = new CompletableFuture<>();
    MethodDescriptor<byte[], byte[]> method = unary();
    ServerServiceDefinition service = ServerServiceDefinition.builder(SERVICE)
        .addMethod(method, ServerCalls.asyncUnaryCall((req, out) -> {
          received.complete(req);
          out.onNext(new byte[0]);
          out.onCompleted();
        }))
        .build();
    EventLoopGroup group = NettyTransports.nio(1);
    ExecutorService calls = ServerThreads.newPool();
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
            creds.server())
        .bossEventLoopGroup(group)
        .workerEventLoopGroup(group)
        .channelType(NioServerSocketChannel.class)
        .executor(calls)
        .addService(service)
        .build()
        .start();
    byte[] message = TestService.message(2048, 3);
    try (Socket socket = new Socket("127.0.0.1",
        ((InetSocketAddress) server.getListenSockets().get(0)).getPort())) {
      OutputStream out = socket.getOutputStream();
      out.write(paddedRequest(method.getFullMethodName(), message, 10, 255));
      out.flush();
      assertArrayEquals(message, received.get(HANG_GUARD_SECONDS, TimeUnit.SECONDS));
    } finally {
      ServerThreads.stop(server, calls);
      group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  /**
   * The client preface, an empty SETTINGS, HEADERS for {@code path} on stream 1 and {@code message}
   * as one gRPC message in padded DATA frames of {@code dataBytes} each with {@code padBytes} of
   * padding (at most 255), END_STREAM on the last. Flow control allows it all: under 65,535
   * bytes.
   */
  private static byte[] paddedRequest(String path, byte[] message, int dataBytes, int padBytes)
      throws Exception {
    ByteBuf out = Unpooled.buffer();
    try {
      out.writeBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
      out.writeMedium(0).writeByte(0x4).writeByte(0).writeInt(0);
      Http2Headers headers = new DefaultHttp2Headers()
          .method("POST").scheme("http").path("/" + path).authority("localhost")
          .add(AsciiString.of("content-type"), AsciiString.of("application/grpc"))
          .add(AsciiString.of("te"), AsciiString.of("trailers"));
      ByteBuf block = Unpooled.buffer();
      new DefaultHttp2HeadersEncoder().encodeHeaders(1, headers, block);
      out.writeMedium(block.readableBytes()).writeByte(0x1).writeByte(0x4).writeInt(1);
      out.writeBytes(block);
      block.release();
      ByteBuf body = Unpooled.buffer().writeByte(0).writeInt(message.length).writeBytes(message);
      while (body.isReadable()) {
        int n = Math.min(dataBytes, body.readableBytes());
        boolean last = n == body.readableBytes();
        out.writeMedium(1 + n + padBytes).writeByte(0x0).writeByte(0x8 | (last ? 0x1 : 0))
            .writeInt(1);
        out.writeByte(padBytes).writeBytes(body, n).writeZero(padBytes);
      }
      body.release();
      byte[] bytes = new byte[out.readableBytes()];
      out.readBytes(bytes);
      assertTrue(bytes.length < 65535, "the request keeps to HTTP/2's initial windows");
      return bytes;
    } finally {
      out.release();
    }
  }

  /**
   * A server application keeps zero-copy messages past a 256 KiB budget while the client sends 4
   * MiB. The server holds its peer back, yet still reads and answers the client's keepalive PINGs
   * (10 s, the shortest grpc-java allows, with a 1 s timeout): after two of them the call and the
   * channel are alive. Once the application releases what it holds, every message arrives.
   */
  @Test
  void heldConnectionAnswersKeepaliveAndGoesOnOnceReleased() throws Exception {
    BudgetedPlaintext serverCreds = new BudgetedPlaintext(256 << 10);
    BudgetedPlaintext clientCreds = new BudgetedPlaintext(64L << 20);
    ZeroCopyMarshaller<Chunk> chunks = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
    MethodDescriptor<Chunk, Chunk> method = MethodDescriptor.<Chunk, Chunk>newBuilder()
        .setType(MethodDescriptor.MethodType.CLIENT_STREAMING)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Hold"))
        .setRequestMarshaller(chunks)
        .setResponseMarshaller(ProtoLiteUtils.marshaller(Chunk.getDefaultInstance()))
        .build();
    int messages = 64;
    int messageBytes = 64 << 10;
    Holder holder = new Holder(chunks);
    ServerServiceDefinition service = ServerServiceDefinition.builder(SERVICE)
        .addMethod(method, ServerCalls.asyncClientStreamingCall(holder::call))
        .build();
    EventLoopGroup group = NettyTransports.nio(2);
    ExecutorService calls = ServerThreads.newPool();
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
            serverCreds.server())
        .bossEventLoopGroup(group)
        .workerEventLoopGroup(group)
        .channelType(NioServerSocketChannel.class)
        .permitKeepAliveTime(1, TimeUnit.SECONDS)
        .permitKeepAliveWithoutCalls(true)
        .executor(calls)
        .addService(service)
        .build()
        .start();
    ManagedChannel channel = NettyChannelBuilder.forAddress(
            server.getListenSockets().get(0), clientCreds.client())
        .eventLoopGroup(group)
        .channelType(NioSocketChannel.class)
        .keepAliveTime(10, TimeUnit.SECONDS)
        // A ping goes only once the last was answered: the second shows the first was; a long
        // timeout lets a loaded machine answer late.
        .keepAliveTimeout(10, TimeUnit.SECONDS)
        .keepAliveWithoutCalls(true)
        .build();
    try {
      ClientCall<Chunk, Chunk> call = channel.newCall(method, CallOptions.DEFAULT);
      CompletableFuture<Status> closed = new CompletableFuture<>();
      CompletableFuture<Chunk> answer = new CompletableFuture<>();
      call.start(new ClientCall.Listener<Chunk>() {
        @Override
        public void onMessage(Chunk message) {
          answer.complete(message);
        }

        @Override
        public void onClose(Status status, Metadata trailers) {
          closed.complete(status);
        }
      }, new Metadata());
      call.request(1);
      ByteString data = ByteString.copyFrom(TestService.message(messageBytes, 5));
      for (int i = 0; i < messages; i++) {
        call.sendMessage(Chunk.newBuilder().setOffset(i).setData(data).build());
      }
      CompletableFuture<Void> twoPings = CompletableFuture.runAsync(() -> {
        try {
          serverCreds.pings.acquire(2);
        } catch (InterruptedException e) {
          throw new IllegalStateException(e);
        }
      });
      CompletableFuture.anyOf(twoPings, closed).get(HANG_GUARD_SECONDS, TimeUnit.SECONDS);
      assertFalse(closed.isDone(), () -> "the call ended while held: " + closed.join());
      assertEquals(ConnectivityState.READY, channel.getState(false));
      assertTrue(holder.received.get() < messages,
          "the server held its peer back: " + holder.received.get() + " messages arrived");
      holder.releaseAll();
      call.halfClose();
      assertEquals(messages, answer.get(HANG_GUARD_SECONDS, TimeUnit.SECONDS).getOffset());
      assertEquals(Status.Code.OK, closed.get(HANG_GUARD_SECONDS, TimeUnit.SECONDS).getCode());
    } finally {
      holder.releaseAll();
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      ServerThreads.stop(server, calls);
      group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  /** The server application: keeps every message until told, then releases them as they come. */
  private static final class Holder {
    final AtomicInteger received = new AtomicInteger();
    private final ZeroCopyMarshaller<Chunk> chunks;
    private final List<Chunk> held = new ArrayList<>();
    private boolean releasing;

    Holder(ZeroCopyMarshaller<Chunk> chunks) {
      this.chunks = chunks;
    }

    StreamObserver<Chunk> call(StreamObserver<Chunk> out) {
      return new StreamObserver<Chunk>() {
        @Override
        public void onNext(Chunk chunk) {
          received.incrementAndGet();
          keep(chunk);
        }

        @Override
        public void onError(Throwable t) {
          releaseAll();
        }

        @Override
        public void onCompleted() {
          out.onNext(Chunk.newBuilder().setOffset(received.get()).build());
          out.onCompleted();
        }
      };
    }

    private synchronized void keep(Chunk chunk) {
      if (releasing) {
        chunks.release(chunk);
      } else {
        held.add(chunk);
      }
    }

    synchronized void releaseAll() {
      releasing = true;
      for (Chunk chunk : held) {
        chunks.release(chunk);
      }
      held.clear();
    }
  }
}
