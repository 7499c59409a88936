package io.pinless.compare;

import io.grpc.Attributes;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServerTransportFilter;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.alts.AltsServerCredentials;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.NettySslContextChannelCredentials;
import io.grpc.netty.NettySslContextServerCredentials;
import io.netty.buffer.PooledByteBufAllocator;
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
import io.pinless.connection.RecordFraming;
import io.pinless.grpc.PinlessChannelCredentials;
import io.pinless.grpc.PinlessServerCredentials;
import io.pinless.read.ReadPolicy;
import io.pinless.testing.TestCertificates;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslProvider;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What is compared: each variant is a grpc-java server and client set up as a user would, with
 * one event loop thread for the server and one for the clients (this kind of machine has two
 * cores) and the pooled allocator whose pinned bytes are measured.
 */
enum Variant {
  /** pinless's ALTS credentials on grpc-netty. */
  PINLESS_ALTS("pinless-alts", true),
  /** grpc-alts, the stock ALTS (on grpc-netty-shaded, as it ships). */
  STOCK_ALTS("stock-alts", true),
  /** grpc-netty with its stock plaintext credentials. */
  STOCK_PLAINTEXT("stock-plaintext", false),
  /** pinless's plaintext credentials on grpc-netty. */
  PINLESS_PLAINTEXT("pinless-plaintext", false),
  /** pinless's TLS credentials over {@link #TLS_PROVIDER}'s engine. */
  PINLESS_TLS("pinless-tls", false),
  /** grpc-netty's own TLS over the same contexts. */
  STOCK_TLS("stock-tls", false);

  /** The TLS variants' engine: OpenSSL's when netty-tcnative is present, as most servers run. */
  static final SslProvider TLS_PROVIDER =
      OpenSsl.isAvailable() ? SslProvider.OPENSSL : SslProvider.JDK;

  final String name;
  final boolean alts;

  Variant(String name, boolean alts) {
    this.name = name;
    this.alts = alts;
  }

  static Variant byName(String name) {
    for (Variant v : values()) {
      if (v.name.equals(name)) {
        return v;
      }
    }
    return null;
  }

  static List<String> names() {
    List<String> names = new ArrayList<>();
    for (Variant v : values()) {
      names.add(v.name);
    }
    return names;
  }

  /**
   * The client and server of this variant on {@code transport}; {@code handshakers} are the
   * client's and the server's handshaker addresses (used by the ALTS variants).
   */
  Stack open(Transport transport, String[] handshakers) throws IOException {
    return open(transport, handshakers, TestCertificates.SERVER);
  }

  /**
   * The same, with the TLS variants' server presenting {@code serverIdentity} (which must chain
   * to the CA this process's clients trust: a server end in another process gets the client's).
   */
  Stack open(Transport transport, String[] handshakers, TestCertificates.Identity serverIdentity)
      throws IOException {
    switch (this) {
      case PINLESS_ALTS:
        return new NettyStack(transport, ringBufferBytes(),
            PinlessServerCredentials.altsBuilder().handshakerAddress(handshakers[1]).build(),
            PinlessChannelCredentials.altsBuilder().handshakerAddress(handshakers[0]).build());
      case PINLESS_PLAINTEXT:
        return new NettyStack(transport, ringBufferBytes(),
            PinlessServerCredentials.insecure(), PinlessChannelCredentials.insecure());
      case STOCK_PLAINTEXT:
        return new NettyStack(transport, ringBufferBytes(),
            InsecureServerCredentials.create(), InsecureChannelCredentials.create());
      case PINLESS_TLS:
        return new NettyStack(transport, ringBufferBytes(),
            PinlessServerCredentials.tls(serverTlsContext(serverIdentity)),
            PinlessChannelCredentials.tls(clientTlsContext()));
      case STOCK_TLS:
        return new NettyStack(transport, ringBufferBytes(),
            NettySslContextServerCredentials.create(serverTlsContext(serverIdentity)),
            NettySslContextChannelCredentials.create(clientTlsContext()));
      case STOCK_ALTS:
        return new ShadedStack(transport,
            AltsServerCredentials.newBuilder().enableUntrustedAltsForTesting()
                .setHandshakerAddressForTesting(handshakers[1]).build(),
            AltsChannelCredentials.newBuilder().enableUntrustedAltsForTesting()
                .setHandshakerAddressForTesting(handshakers[0]).build());
      default:
        throw new AssertionError(this);
    }
  }

  /**
   * The buffers of this variant's io_uring ring: for ALTS and TLS the README's 2 MiB, so their
   * records are opened in place from its reads; for plaintext the read policy's 48 KiB.
   */
  int ringBufferBytes() {
    return alts || tls() ? RecordFraming.RING_BUFFER_BYTES : ReadPolicy.MAX_READ_BYTES;
  }

  /** Whether this variant runs pinless (whose metrics count its copies). */
  boolean pinless() {
    return name.startsWith("pinless");
  }

  /**
   * Copies a record layer makes of each payload byte it opens: one decrypting copy into the
   * plaintext buffer for ALTS and for TLS on OpenSSL's engine; the JDK's engine works on arrays,
   * so pinless first copies each direct record into a heap buffer (uncounted), then decrypts.
   */
  int cipherCopies() {
    if (alts) {
      return 1;
    }
    return tls() ? (TLS_PROVIDER == SslProvider.OPENSSL ? 1 : 2) : 0;
  }

  /** Whether this variant's connections are TLS. */
  boolean tls() {
    return this == PINLESS_TLS || this == STOCK_TLS;
  }

  /** A server context presenting {@code identity} (the test server's: 127.0.0.1 and localhost). */
  private static SslContext serverTlsContext(TestCertificates.Identity identity) throws IOException {
    return TestCertificates.serverContext(TLS_PROVIDER, identity, ClientAuth.NONE);
  }

  /** A client context trusting this process's test CA. */
  private static SslContext clientTlsContext() throws IOException {
    return TestCertificates.clientContext(TLS_PROVIDER, null);
  }

  /** A running server, the channels made to it, and the memory they pin. */
  interface Stack extends AutoCloseable {
    /** The transport actually used, with a note if it is not the one asked for. */
    String transportUsed();

    /** Starts the server with {@code services} on a loopback port. */
    Server start(ServerServiceDefinition... services) throws IOException;

    /** A new channel (its own connection) to a server of this variant on loopback {@code port}. */
    ManagedChannel newChannel(int port);

    /** The started server's port. */
    int serverPort();

    /** The client event loop (to watch for stalls). */
    ScheduledExecutorService clientLoop();

    /** The server event loop (to watch for stalls). */
    ScheduledExecutorService serverLoop();

    /**
     * Direct bytes live buffers pin in this process's pools of the stack's Netty copy: the
     * clients' allocator and the server's (whichever ends run in this process).
     */
    long pinnedDirectBytes();

    /**
     * Direct memory those pools reserved: the chunks they took from the OS, in use or cached
     * ({@code PooledByteBufAllocatorMetric.usedDirectMemory()}).
     */
    long reservedDirectBytes();

    /** Pooled direct buffers allocated and not released (both ends). */
    long activeDirectBuffers();

    /** The server's connections that became ready and have not terminated. */
    int serverConnections();

    @Override
    void close() throws InterruptedException;
  }

  private static final int MAX_MESSAGE_BYTES = 256 << 20;
  private static final short RING_GROUP = 1;

  /**
   * What both stacks share: the started server, and the one-thread client and server event loops
   * (each group has one loop, so the loop a stall probe watches is the one every channel uses).
   */
  private abstract static class LoopbackStack implements Stack {
    private static final Attributes.Key<Boolean> COUNTED =
        Attributes.Key.create("pinless-compare.counted");
    /** The started server; null before {@link #start}. */
    Server server;
    /** Counts the server's open connections; every stack's server builder adds it. */
    final ServerTransportFilter connectionCounter = new ServerTransportFilter() {
      @Override
      public Attributes transportReady(Attributes attributes) {
        serverConnections.incrementAndGet();
        return attributes.toBuilder().set(COUNTED, Boolean.TRUE).build();
      }

      @Override
      public void transportTerminated(Attributes attributes) {
        // a transport that never became ready may still terminate: count only those that did
        if (attributes != null && attributes.get(COUNTED) != null) {
          serverConnections.decrementAndGet();
        }
      }
    };
    private final AtomicInteger serverConnections = new AtomicInteger();

    @Override
    public int serverConnections() {
      return serverConnections.get();
    }

    private ScheduledExecutorService clientLoop;
    private ScheduledExecutorService serverLoop;

    /** Records the loops of the one-thread groups; called once by the constructor. */
    void loops(ScheduledExecutorService client, ScheduledExecutorService server) {
      this.clientLoop = client;
      this.serverLoop = server;
    }

    @Override
    public int serverPort() {
      return server.getPort();
    }

    @Override
    public ScheduledExecutorService clientLoop() {
      return clientLoop;
    }

    @Override
    public ScheduledExecutorService serverLoop() {
      return serverLoop;
    }

    /** Shuts both event loop groups down and waits for them. */
    abstract void shutdownLoops() throws InterruptedException;

    @Override
    public void close() throws InterruptedException {
      if (server != null) {
        server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      shutdownLoops();
    }
  }

  /** grpc-netty on the project's Netty. */
  private static final class NettyStack extends LoopbackStack {
    private final Transport transport;
    /** The ring's buffer size (io_uring with a ring only). */
    private final int ringBufferBytes;
    private final ServerCredentials serverCreds;
    private final ChannelCredentials channelCreds;
    private final PooledByteBufAllocator alloc = PooledByteBufAllocator.DEFAULT;
    private final PooledByteBufAllocator serverAlloc = new PooledByteBufAllocator(true);
    private final EventLoopGroup serverGroup;
    private final EventLoopGroup clientGroup;

    NettyStack(Transport transport, int ringBufferBytes, ServerCredentials serverCreds,
        ChannelCredentials channelCreds) {
      this.transport = transport;
      this.ringBufferBytes = ringBufferBytes;
      this.serverCreds = serverCreds;
      this.channelCreds = channelCreds;
      this.serverGroup = new MultiThreadIoEventLoopGroup(1, ioHandler(serverAlloc));
      this.clientGroup = new MultiThreadIoEventLoopGroup(1, ioHandler(alloc));
      loops(clientGroup.next(), serverGroup.next());
    }

    private IoHandlerFactory ioHandler(PooledByteBufAllocator alloc) {
      switch (transport) {
        case NIO:
          return NioIoHandler.newFactory();
        case EPOLL:
          return EpollIoHandler.newFactory();
        case IO_URING_NO_RING:
          return IoUringIoHandler.newFactory();
        default:
          // The README's ring for records takes a buffer of its own per read (not incremental).
          boolean records = ringBufferBytes >= RecordFraming.RING_BUFFER_BYTES;
          IoUringBufferRingConfig.Builder ring = IoUringBufferRingConfig.builder()
              .bufferGroupId(RING_GROUP)
              .bufferRingSize((short) (records ? 16 : 64))
              .batchSize(records ? 8 : 16)
              .allocator(new IoUringFixedBufferRingAllocator(alloc, ringBufferBytes));
          if (records) {
            ring.incremental(false);
          }
          return IoUringIoHandler.newFactory(
              new IoUringIoHandlerConfig().setBufferRingConfig(ring.build()));
      }
    }

    @Override
    public String transportUsed() {
      return transport.name;
    }

    @Override
    public Server start(ServerServiceDefinition... services) throws IOException {
      NettyServerBuilder builder =
          NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), serverCreds)
              .bossEventLoopGroup(serverGroup)
              .workerEventLoopGroup(serverGroup)
              .channelType(transport == Transport.NIO ? NioServerSocketChannel.class
                  : transport == Transport.EPOLL ? EpollServerSocketChannel.class
                  : IoUringServerSocketChannel.class)
              .withChildOption(ChannelOption.ALLOCATOR, serverAlloc)
              .directExecutor()
              .maxInboundMessageSize(MAX_MESSAGE_BYTES)
              .addTransportFilter(connectionCounter);
      for (ServerServiceDefinition service : services) {
        builder.addService(service);
      }
      if (transport == Transport.IO_URING) {
        builder.withChildOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP);
      }
      server = builder.build().start();
      return server;
    }

    @Override
    public ManagedChannel newChannel(int port) {
      NettyChannelBuilder builder =
          NettyChannelBuilder.forAddress(new InetSocketAddress("127.0.0.1", port), channelCreds)
              .eventLoopGroup(clientGroup)
              .channelType(transport == Transport.NIO ? NioSocketChannel.class
                  : transport == Transport.EPOLL ? EpollSocketChannel.class
                  : IoUringSocketChannel.class)
              .withOption(ChannelOption.ALLOCATOR, alloc)
              .directExecutor()
              .maxInboundMessageSize(MAX_MESSAGE_BYTES);
      if (transport == Transport.IO_URING) {
        builder.withOption(IoUringChannelOption.IO_URING_BUFFER_GROUP_ID, RING_GROUP);
      }
      return builder.build();
    }

    @Override
    public long pinnedDirectBytes() {
      return alloc.pinnedDirectMemory() + serverAlloc.pinnedDirectMemory();
    }

    @Override
    public long reservedDirectBytes() {
      return alloc.metric().usedDirectMemory() + serverAlloc.metric().usedDirectMemory();
    }

    @Override
    public long activeDirectBuffers() {
      long n = 0;
      for (PooledByteBufAllocator a : new PooledByteBufAllocator[] {alloc, serverAlloc}) {
        for (io.netty.buffer.PoolArenaMetric arena : a.metric().directArenas()) {
          n += arena.numActiveAllocations();
        }
      }
      return n;
    }

    @Override
    void shutdownLoops() throws InterruptedException {
      clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS);
      serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS);
    }
  }

  /**
   * grpc-netty-shaded, which grpc-alts's credentials need, on the same kind of event loops; it
   * carries no io_uring transport, so io_uring runs it on epoll (and says so).
   */
  private static final class ShadedStack extends LoopbackStack {
    private final Transport requested;
    private final Transport transport;
    private final ServerCredentials serverCreds;
    private final ChannelCredentials channelCreds;
    private final io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator alloc =
        io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator.DEFAULT;
    private final io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator serverAlloc =
        new io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator(true);
    private final io.grpc.netty.shaded.io.netty.channel.EventLoopGroup serverGroup;
    private final io.grpc.netty.shaded.io.netty.channel.EventLoopGroup clientGroup;

    ShadedStack(Transport transport, ServerCredentials serverCreds, ChannelCredentials channelCreds) {
      this.requested = transport;
      this.transport = transport.ioUring() ? Transport.EPOLL : transport;
      this.serverCreds = serverCreds;
      this.channelCreds = channelCreds;
      this.serverGroup = newGroup();
      this.clientGroup = newGroup();
      loops(clientGroup.next(), serverGroup.next());
    }

    private io.grpc.netty.shaded.io.netty.channel.EventLoopGroup newGroup() {
      return new io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup(1,
          transport == Transport.NIO
              ? io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler.newFactory()
              : io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler.newFactory());
    }

    @Override
    public String transportUsed() {
      return transport == requested
          ? transport.name : transport.name + " (grpc-netty-shaded has no " + requested.name + ")";
    }

    @Override
    public Server start(ServerServiceDefinition... services) throws IOException {
      var builder = io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder
          .forAddress(new InetSocketAddress("127.0.0.1", 0), serverCreds)
          .bossEventLoopGroup(serverGroup)
          .workerEventLoopGroup(serverGroup)
          .channelType(transport == Transport.NIO
              ? io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel.class
              : io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel.class)
          .withChildOption(io.grpc.netty.shaded.io.netty.channel.ChannelOption.ALLOCATOR, serverAlloc)
          .directExecutor()
          .maxInboundMessageSize(MAX_MESSAGE_BYTES)
          .addTransportFilter(connectionCounter);
      for (ServerServiceDefinition service : services) {
        builder.addService(service);
      }
      server = builder.build().start();
      return server;
    }

    @Override
    public ManagedChannel newChannel(int port) {
      return io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder
          .forAddress(new InetSocketAddress("127.0.0.1", port), channelCreds)
          .eventLoopGroup(clientGroup)
          .channelType(transport == Transport.NIO
              ? io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel.class
              : io.grpc.netty.shaded.io.netty.channel.epoll.EpollSocketChannel.class)
          .withOption(io.grpc.netty.shaded.io.netty.channel.ChannelOption.ALLOCATOR, alloc)
          .directExecutor()
          .maxInboundMessageSize(MAX_MESSAGE_BYTES)
          .build();
    }

    @Override
    public long pinnedDirectBytes() {
      return alloc.pinnedDirectMemory() + serverAlloc.pinnedDirectMemory();
    }

    @Override
    public long reservedDirectBytes() {
      return alloc.metric().usedDirectMemory() + serverAlloc.metric().usedDirectMemory();
    }

    @Override
    public long activeDirectBuffers() {
      long n = 0;
      for (var a : List.of(alloc, serverAlloc)) {
        for (io.grpc.netty.shaded.io.netty.buffer.PoolArenaMetric arena : a.metric().directArenas()) {
          n += arena.numActiveAllocations();
        }
      }
      return n;
    }

    @Override
    void shutdownLoops() throws InterruptedException {
      clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS);
      serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).await(10, TimeUnit.SECONDS);
    }
  }
}
