package io.pinless.testing;

import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.PooledByteBufAllocator;
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
import io.netty.channel.uring.IoUring;
import io.netty.channel.uring.IoUringBufferRingConfig;
import io.netty.channel.uring.IoUringChannelOption;
import io.netty.channel.uring.IoUringFixedBufferRingAllocator;
import io.netty.channel.uring.IoUringIoHandler;
import io.netty.channel.uring.IoUringIoHandlerConfig;
import io.netty.channel.uring.IoUringServerSocketChannel;
import io.netty.channel.uring.IoUringSocketChannel;
import io.pinless.connection.RecordFraming;

/**
 * Event loops and channel types for each socket the tests run over, on Netty 4.2 (its
 * {@code IoHandler}s and the io_uring release module). {@code src/netty41} holds the same class
 * for Netty 4.1; the build compiles the one matching the Netty in use.
 */
public final class NettyTransports {
  /** The sockets a user can pick on grpc-netty's builders. */
  public enum Socket {
    NIO,
    EPOLL,
    IO_URING,
    /**
     * io_uring with a provided-buffer ring of {@link #RING_BUFFER_BYTES} buffers: the kernel picks
     * one when data arrives.
     */
    IO_URING_RING,
    EPOLL_UDS
  }

  /** The buffer group of {@link Socket#IO_URING_RING}'s ring. */
  private static final short RING_GROUP = 1;
  /**
   * 2 MiB, not incremental (each read takes a buffer of its own): the ring the README asks for, so
   * TLS records are opened in place from its reads.
   */
  private static final int RING_BUFFER_BYTES = RecordFraming.RING_BUFFER_BYTES;

  private NettyTransports() {}

  /** Whether this machine and Netty offer {@code socket}. */
  public static boolean available(Socket socket) {
    switch (socket) {
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

  /** Whether {@link Socket#IO_URING} is Netty 4.1's incubator transport: it is Netty 4.2's own. */
  public static boolean incubatorIoUring() {
    return false;
  }

  /** An NIO event loop group of {@code threads} threads. */
  public static EventLoopGroup nio(int threads) {
    return group(Socket.NIO, threads);
  }

  /** An event loop group for {@code socket}, its ring (if any) filled from the default pool. */
  public static EventLoopGroup group(Socket socket, int threads) {
    return group(socket, threads, PooledByteBufAllocator.DEFAULT);
  }

  /** An event loop group for {@code socket}, its ring (if any) filled from {@code ringPool}. */
  public static EventLoopGroup group(Socket socket, int threads, PooledByteBufAllocator ringPool) {
    return new MultiThreadIoEventLoopGroup(threads, ioHandler(socket, ringPool));
  }

  private static IoHandlerFactory ioHandler(Socket socket, PooledByteBufAllocator ringPool) {
    switch (socket) {
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
                        .bufferRingSize((short) 16)
                        .batchSize(8)
                        .incremental(false)
                        .allocator(new IoUringFixedBufferRingAllocator(ringPool, RING_BUFFER_BYTES))
                        .build()));
      default:
        return IoUringIoHandler.newFactory();
    }
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
        return IoUringServerSocketChannel.class;
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
        return IoUringSocketChannel.class;
    }
  }

  /** Has the server's connections read from the ring when {@code socket} has one. */
  public static NettyServerBuilder useRing(NettyServerBuilder builder, Socket socket) {
    return socket == Socket.IO_URING_RING
        ? builder.withChildOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP)
        : builder;
  }

  /** Has the channel's connections read from the ring when {@code socket} has one. */
  public static NettyChannelBuilder useRing(NettyChannelBuilder builder, Socket socket) {
    return socket == Socket.IO_URING_RING
        ? builder.withOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP)
        : builder;
  }

  /** Has a client bootstrap's channel read from the ring when {@code socket} has one. */
  public static Bootstrap useRing(Bootstrap bootstrap, Socket socket) {
    return socket == Socket.IO_URING_RING
        ? bootstrap.option(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP)
        : bootstrap;
  }
}
