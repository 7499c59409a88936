package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.NettySslContextChannelCredentials;
import io.grpc.netty.NettySslContextServerCredentials;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.channel.uring.IoUringBufferRingConfig;
import io.netty.channel.uring.IoUringChannelOption;
import io.netty.channel.uring.IoUringFixedBufferRingAllocator;
import io.netty.channel.uring.IoUringIoHandler;
import io.netty.channel.uring.IoUringIoHandlerConfig;
import io.netty.channel.uring.IoUringServerSocketChannel;
import io.netty.channel.uring.IoUringSocketChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslProvider;
import io.pinless.read.ReadOnReadyHandler;
import io.pinless.testing.TestCertificates;
import java.util.List;
import javax.net.ssl.SSLException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * A server and its clients on loopback for the benchmarks: one event loop thread for the server
 * and one for the clients (this machine has two cores), one transport, either pinless's
 * credentials or the stock grpc-netty ones (plaintext, or TLS over the same context), and given
 * allocators (one for both ends, or one per end) so that their pools can be read.
 */
final class BenchTransport implements AutoCloseable {
  /** The event loops compared. */
  enum Kind {
    NIO,
    EPOLL,
    /** io_uring with a provided-buffer ring of 32 KiB buffers: the kernel picks one per read. */
    IO_URING_RING;

    static Kind parse(String name) {
      return valueOf(name.toUpperCase(Locale.ROOT).replace('-', '_'));
    }

    private IoHandlerFactory ioHandler(ByteBufAllocator alloc) {
      switch (this) {
        case NIO:
          return NioIoHandler.newFactory();
        case EPOLL:
          return EpollIoHandler.newFactory();
        default:
          return IoUringIoHandler.newFactory(
              new IoUringIoHandlerConfig()
                  .setBufferRingConfig(
                      IoUringBufferRingConfig.builder()
                          .bufferGroupId(RING_GROUP)
                          .bufferRingSize((short) 64)
                          .batchSize(16)
                          .allocator(
                              new IoUringFixedBufferRingAllocator(
                                  alloc, io.pinless.read.ReadPolicy.MAX_READ_BYTES))
                          .build()));
      }
    }
  }

  private static final short RING_GROUP = 1;

  final Kind kind;
  final boolean pinless;
  /** With pinless: the client's and the server's handshaker for ALTS; null for plaintext. */
  private final String[] altsHandshakers;
  private final ByteBufAllocator alloc;
  private final ByteBufAllocator clientAlloc;
  private final EventLoopGroup serverGroup;
  private final EventLoopGroup clientGroup;
  final Server server;
  /** The credentials of every client channel (built once, as an application does). */
  private final ChannelCredentials clientCreds;

  /**
   * Starts a server with {@code service}.
   *
   * @param pinless pinless's credentials, else grpc-netty's stock plaintext ones
   */
  BenchTransport(Kind kind, boolean pinless, ByteBufAllocator alloc,
      io.grpc.ServerServiceDefinition service) throws IOException {
    this(kind, pinless ? "pinless" : "stock", alloc, service, null);
  }

  /**
   * Starts a server with {@code service}; with {@code altsHandshakers} (client's, server's), one
   * that runs pinless's ALTS credentials through those handshakers.
   */
  BenchTransport(Kind kind, boolean pinless, ByteBufAllocator alloc,
      io.grpc.ServerServiceDefinition service, String[] altsHandshakers) throws IOException {
    this(kind, pinless ? "pinless" : "stock", alloc, service, altsHandshakers);
  }

  /** The TLS variants: pinless or stock grpc-netty over the same context, JDK or OpenSSL engine. */
  static final List<String> TLS_VARIANTS = List.of(
      "pinless-tls", "stock-tls", "pinless-tls-openssl", "stock-tls-openssl");

  /** The test certificates' contexts, made once. */
  private static final class Contexts {
    static final SslContext JDK_SERVER = server(SslProvider.JDK);
    static final SslContext JDK_CLIENT = client(SslProvider.JDK);
    static final SslContext OPENSSL_SERVER = server(SslProvider.OPENSSL);
    static final SslContext OPENSSL_CLIENT = client(SslProvider.OPENSSL);

    private static SslContext server(SslProvider provider) {
      try {
        return TestCertificates.serverContext(provider, TestCertificates.SERVER, ClientAuth.NONE);
      } catch (SSLException e) {
        throw new IllegalStateException(e);
      }
    }

    private static SslContext client(SslProvider provider) {
      try {
        return TestCertificates.clientContext(provider, null);
      } catch (SSLException e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** Both ends' credentials of one variant. */
  record Credentials(ServerCredentials server, ChannelCredentials channel) {}

  /** The credentials of a plaintext or TLS variant. */
  static Credentials credentials(String variant) {
    boolean pinless = variant.startsWith("pinless");
    if (!TLS_VARIANTS.contains(variant)) {
      return new Credentials(NettyNegotiators.serverCredentials(pinless),
          NettyNegotiators.clientCredentials(pinless));
    }
    boolean openssl = variant.endsWith("openssl");
    SslContext server = openssl ? Contexts.OPENSSL_SERVER : Contexts.JDK_SERVER;
    SslContext client = openssl ? Contexts.OPENSSL_CLIENT : Contexts.JDK_CLIENT;
    long timeout = NettyNegotiators.TLS_HANDSHAKE_TIMEOUT_MILLIS;
    return pinless
        ? new Credentials(NettyNegotiators.tlsServerCredentials(server, timeout),
            NettyNegotiators.tlsClientCredentials(client, timeout))
        : new Credentials(NettySslContextServerCredentials.create(server),
            NettySslContextChannelCredentials.create(client));
  }

  /**
   * Starts a server of {@code variant} (pinless, stock, or a TLS variant) with {@code service};
   * with {@code altsHandshakers} (client's, server's), one that runs pinless's ALTS credentials
   * through those handshakers.
   */
  BenchTransport(Kind kind, String variant, ByteBufAllocator alloc,
      io.grpc.ServerServiceDefinition service, String[] altsHandshakers) throws IOException {
    this(kind, variant, alloc, alloc, service, altsHandshakers);
  }

  /** As above, with the server on {@code alloc} and the clients on {@code clientAlloc}. */
  BenchTransport(Kind kind, String variant, ByteBufAllocator alloc, ByteBufAllocator clientAlloc,
      io.grpc.ServerServiceDefinition service, String[] altsHandshakers) throws IOException {
    this.kind = kind;
    this.pinless = variant.startsWith("pinless");
    this.altsHandshakers = altsHandshakers;
    this.alloc = alloc;
    this.clientAlloc = clientAlloc;
    this.serverGroup = new MultiThreadIoEventLoopGroup(1, kind.ioHandler(alloc));
    this.clientGroup = new MultiThreadIoEventLoopGroup(1, kind.ioHandler(clientAlloc));
    Credentials plainOrTls = altsHandshakers != null ? null : credentials(variant);
    ServerCredentials creds = altsHandshakers != null
        ? PinlessServerCredentials.altsBuilder().handshakerAddress(altsHandshakers[1]).build()
        : plainOrTls.server();
    NettyServerBuilder builder =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), creds)
            .bossEventLoopGroup(serverGroup)
            .workerEventLoopGroup(serverGroup)
            .channelType(
                kind == Kind.NIO ? NioServerSocketChannel.class
                    : kind == Kind.EPOLL ? EpollServerSocketChannel.class
                    : IoUringServerSocketChannel.class)
            .withChildOption(ChannelOption.ALLOCATOR, alloc)
            .directExecutor()
            .maxInboundMessageSize(64 << 20)
            .addService(service);
    if (kind == Kind.IO_URING_RING) {
      builder.withChildOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP);
    }
    server = builder.build().start();
    // One credentials object for every client channel, as an application builds it once.
    clientCreds = altsHandshakers != null
        ? PinlessChannelCredentials.altsBuilder().handshakerAddress(altsHandshakers[0]).build()
        : plainOrTls.channel();
  }

  /** A new client channel to the server (it connects on first use). */
  ManagedChannel newChannel() {
    return newChannel(server.getListenSockets().get(0));
  }

  /** A new client channel to {@code target}, such as a proxy in front of the server. */
  ManagedChannel newChannel(java.net.SocketAddress target) {
    NettyChannelBuilder builder =
        NettyChannelBuilder.forAddress(target, clientCreds)
            .eventLoopGroup(clientGroup)
            .channelType(
                kind == Kind.NIO ? NioSocketChannel.class
                    : kind == Kind.EPOLL ? EpollSocketChannel.class
                    : IoUringSocketChannel.class)
            .withOption(ChannelOption.ALLOCATOR, clientAlloc)
            .directExecutor()
            .maxInboundMessageSize(64 << 20);
    if (kind == Kind.IO_URING_RING) {
      builder.withOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP);
    }
    return builder.build();
  }

  @Override
  public void close() throws InterruptedException {
    server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
  }
}
