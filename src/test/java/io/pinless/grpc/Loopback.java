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
import io.netty.channel.uring.IoUring;
import io.netty.channel.uring.IoUringIoHandler;
import io.netty.channel.uring.IoUringServerSocketChannel;
import io.netty.channel.uring.IoUringSocketChannel;
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
    EPOLL_UDS;

    boolean available() {
      switch (this) {
        case NIO:
          return true;
        case EPOLL:
        case EPOLL_UDS:
          return Epoll.isAvailable();
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
        NettyServerBuilder.forAddress(address, serverCreds)
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
    return NettyChannelBuilder.forAddress(target, creds)
        .eventLoopGroup(group)
        .channelType(transport.clientChannel())
        .maxInboundMessageSize(MAX_MESSAGE)
        .build();
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
