package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.uring.IoUring;
import io.netty.channel.uring.IoUringBufferRingConfig;
import io.netty.channel.uring.IoUringChannelOption;
import io.netty.channel.uring.IoUringFixedBufferRingAllocator;
import io.netty.channel.uring.IoUringIoHandlerConfig;
import io.netty.channel.uring.IoUringIoHandler;
import io.netty.channel.uring.IoUringServerSocketChannel;
import io.netty.channel.uring.IoUringSocketChannel;
import io.pinless.read.ReadOnReadyHandler;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** A grpc-java server and channel on loopback over one transport, with given credentials. */
final class Loopback implements AutoCloseable {
  /** The event loop kinds a user can pick on the builders. */
  enum Transport {
    NIO,
    EPOLL,
    IO_URING,
    /** io_uring with a provided-buffer ring: the kernel picks a ring buffer when data arrives. */
    IO_URING_RING,
    EPOLL_UDS;

    /** The buffer group of {@link #IO_URING_RING}'s ring. */
    static final short RING_GROUP = 1;

    boolean available() {
      switch (this) {
        case NIO:
          return true;
        case EPOLL:
        case EPOLL_UDS:
          return Epoll.isAvailable();
        case IO_URING_RING:
          return IoUring.isAvailable() && IoUring.isRegisterBufferRingSupported();
        default:
          return IoUring.isAvailable();
      }
    }

    IoHandlerFactory ioHandler() {
      switch (this) {
        case NIO:
          return NioIoHandler.newFactory();
        case EPOLL:
        case EPOLL_UDS:
          return EpollIoHandler.newFactory();
        case IO_URING_RING:
          return IoUringIoHandler.newFactory(
              new IoUringIoHandlerConfig()
                  .setBufferRingConfig(
                      IoUringBufferRingConfig.builder()
                          .bufferGroupId(RING_GROUP)
                          .bufferRingSize((short) 64)
                          .batchSize(16)
                          .allocator(
                              new IoUringFixedBufferRingAllocator(
                                  PooledByteBufAllocator.DEFAULT, io.pinless.read.ReadPolicy.MAX_READ_BYTES))
                          .build()));
        default:
          return IoUringIoHandler.newFactory();
      }
    }

    Class<? extends ServerChannel> serverChannel() {
      switch (this) {
        case NIO:
          return NioServerSocketChannel.class;
        case EPOLL:
          return EpollServerSocketChannel.class;
        case EPOLL_UDS:
          return EpollServerDomainSocketChannel.class;
        default:
          return IoUringServerSocketChannel.class;
      }
    }

    Class<? extends Channel> clientChannel() {
      switch (this) {
        case NIO:
          return NioSocketChannel.class;
        case EPOLL:
          return EpollSocketChannel.class;
        case EPOLL_UDS:
          return EpollDomainSocketChannel.class;
        default:
          return IoUringSocketChannel.class;
      }
    }
  }

  static final int MAX_MESSAGE = 32 << 20;

  final Transport transport;
  final EventLoopGroup group;
  final Server server;
  final ManagedChannel channel;
  final SocketAddress address;
  private final Path udsDir;

  Loopback(Transport transport, ServerCredentials serverCreds, ChannelCredentials channelCreds)
      throws IOException {
    this.transport = transport;
    this.group = new MultiThreadIoEventLoopGroup(2, transport.ioHandler());
    if (transport == Transport.EPOLL_UDS) {
      udsDir = Files.createTempDirectory("pinless-uds");
      address = new DomainSocketAddress(udsDir.resolve("s").toString());
    } else {
      udsDir = null;
      address = new InetSocketAddress("127.0.0.1", 0);
    }
    server =
        withRing(NettyServerBuilder.forAddress(address, serverCreds))
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group)
            .channelType(transport.serverChannel())
            .maxInboundMessageSize(MAX_MESSAGE)
            .addService(TestService.definition())
            .build()
            .start();
    SocketAddress target =
        transport == Transport.EPOLL_UDS ? address : server.getListenSockets().get(0);
    channel = newChannel(target, channelCreds);
  }

  /** Another channel to this server with the same transport. */
  ManagedChannel newChannel(SocketAddress target, ChannelCredentials creds) {
    NettyChannelBuilder builder = NettyChannelBuilder.forAddress(target, creds);
    if (transport == Transport.EPOLL_UDS) {
      // A socket path is no host name: TLS checks the test certificate against localhost.
      builder.overrideAuthority("localhost");
    }
    if (transport == Transport.IO_URING_RING) {
      builder.withOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, Transport.RING_GROUP);
    }
    return builder
        .eventLoopGroup(group)
        .channelType(transport.clientChannel())
        .maxInboundMessageSize(MAX_MESSAGE)
        .build();
  }

  private NettyServerBuilder withRing(NettyServerBuilder builder) {
    if (transport == Transport.IO_URING_RING) {
      builder.withChildOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, Transport.RING_GROUP);
    }
    return builder;
  }

  /** The port of a TCP server. */
  int port() {
    return ((InetSocketAddress) server.getListenSockets().get(0)).getPort();
  }

  @Override
  public void close() throws InterruptedException {
    channel.shutdownNow();
    server.shutdownNow();
    channel.awaitTermination(10, TimeUnit.SECONDS);
    server.awaitTermination(10, TimeUnit.SECONDS);
    group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    if (udsDir != null) {
      udsDir.toFile().listFiles(f -> f.delete());
      udsDir.toFile().delete();
    }
  }
}
