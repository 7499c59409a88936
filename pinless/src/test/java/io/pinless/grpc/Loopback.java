package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.unix.DomainSocketAddress;
import io.pinless.testing.NettyTransports;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
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

    NettyTransports.Socket socket() {
      return NettyTransports.Socket.valueOf(name());
    }

    boolean available() {
      return NettyTransports.available(socket());
    }
  }

  static final int MAX_MESSAGE = 32 << 20;

  final Transport transport;
  final EventLoopGroup group;
  final Server server;
  final ManagedChannel channel;
  final SocketAddress address;
  private final Path udsDir;
  /** The server's application threads, stopped before the event loops. */
  private final ExecutorService serverExecutor = ServerThreads.newPool();

  Loopback(Transport transport, ServerCredentials serverCreds, ChannelCredentials channelCreds)
      throws IOException {
    this.transport = transport;
    this.group = NettyTransports.group(transport.socket(), 2);
    if (transport == Transport.EPOLL_UDS) {
      udsDir = Files.createTempDirectory("pinless-uds");
      address = new DomainSocketAddress(udsDir.resolve("s").toString());
    } else {
      udsDir = null;
      address = new InetSocketAddress("127.0.0.1", 0);
    }
    server =
        NettyTransports.useRing(NettyServerBuilder.forAddress(address, serverCreds), transport.socket())
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group)
            .channelType(NettyTransports.serverChannel(transport.socket()))
            .maxInboundMessageSize(MAX_MESSAGE)
            .executor(serverExecutor)
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
    return NettyTransports.useRing(builder, transport.socket())
        .eventLoopGroup(group)
        .channelType(NettyTransports.clientChannel(transport.socket()))
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
    ServerThreads.stop(server, serverExecutor);
    group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    if (udsDir != null) {
      udsDir.toFile().listFiles(f -> f.delete());
      udsDir.toFile().delete();
    }
  }
}
