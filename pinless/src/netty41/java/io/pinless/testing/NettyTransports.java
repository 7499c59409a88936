package io.pinless.testing;

import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.incubator.channel.uring.IOUring;
import io.netty.incubator.channel.uring.IOUringEventLoopGroup;
import io.netty.incubator.channel.uring.IOUringServerSocketChannel;
import io.netty.incubator.channel.uring.IOUringSocketChannel;

/**
 * Event loops and channel types for each socket the tests run over, on Netty 4.1 (its event loop
 * groups per transport and the incubator's io_uring, which has no provided-buffer ring).
 * {@code src/netty42} holds the same class for Netty 4.2; the build compiles the one matching
 * the Netty in use.
 */
public final class NettyTransports {
  /** The sockets a user can pick on grpc-netty's builders. */
  public enum Socket {
    NIO,
    EPOLL,
    IO_URING,
    /** io_uring with a provided-buffer ring: Netty 4.1's io_uring has none. */
    IO_URING_RING,
    EPOLL_UDS
  }

  private NettyTransports() {}

  /** Whether this machine and Netty offer {@code socket}. */
  public static boolean available(Socket socket) {
    switch (socket) {
      case NIO:
        return true;
      case EPOLL:
      case EPOLL_UDS:
        return Epoll.isAvailable();
      case IO_URING:
        return IOUring.isAvailable();
      default:
        return false;
    }
  }

  /** Whether {@link Socket#IO_URING} is Netty 4.1's incubator transport: it is. */
  public static boolean incubatorIoUring() {
    return true;
  }

  /** An NIO event loop group of {@code threads} threads. */
  public static EventLoopGroup nio(int threads) {
    return group(Socket.NIO, threads);
  }

  /** An event loop group for {@code socket}. */
  public static EventLoopGroup group(Socket socket, int threads) {
    switch (socket) {
      case NIO:
        return new NioEventLoopGroup(threads);
      case EPOLL:
      case EPOLL_UDS:
        return new EpollEventLoopGroup(threads);
      case IO_URING:
        return new IOUringEventLoopGroup(threads);
      default:
        throw new UnsupportedOperationException(socket + " needs Netty 4.2");
    }
  }

  /** As {@link #group(Socket, int)}: Netty 4.1 has no ring to fill from {@code ringPool}. */
  public static EventLoopGroup group(Socket socket, int threads, PooledByteBufAllocator ringPool) {
    return group(socket, threads);
  }

  /** The server channel type of {@code socket}. */
  public static Class<? extends ServerChannel> serverChannel(Socket socket) {
    switch (socket) {
      case NIO:
        return NioServerSocketChannel.class;
      case EPOLL:
        return EpollServerSocketChannel.class;
      case EPOLL_UDS:
        return EpollServerDomainSocketChannel.class;
      default:
        return IOUringServerSocketChannel.class;
    }
  }

  /** The client channel type of {@code socket}. */
  public static Class<? extends Channel> clientChannel(Socket socket) {
    switch (socket) {
      case NIO:
        return NioSocketChannel.class;
      case EPOLL:
        return EpollSocketChannel.class;
      case EPOLL_UDS:
        return EpollDomainSocketChannel.class;
      default:
        return IOUringSocketChannel.class;
    }
  }

  /** Returns {@code builder}: Netty 4.1 has no provided-buffer ring. */
  public static NettyServerBuilder useRing(NettyServerBuilder builder, Socket socket) {
    return builder;
  }

  /** Returns {@code builder}: Netty 4.1 has no provided-buffer ring. */
  public static NettyChannelBuilder useRing(NettyChannelBuilder builder, Socket socket) {
    return builder;
  }

  /** Returns {@code bootstrap}: Netty 4.1 has no provided-buffer ring. */
  public static Bootstrap useRing(Bootstrap bootstrap, Socket socket) {
    return bootstrap;
  }
}
