package io.pinless.grpc;

import io.grpc.Attributes;
import io.grpc.ChannelCredentials;
import io.grpc.InternalChannelz;
import io.grpc.SecurityLevel;
import io.grpc.Status;
import io.grpc.ServerCredentials;
import io.grpc.internal.GrpcAttributes;
import io.grpc.internal.ObjectPool;
import io.grpc.netty.GrpcHttp2ConnectionHandler;
import io.grpc.netty.InternalNettyChannelCredentials;
import io.grpc.netty.InternalNettyServerCredentials;
import io.grpc.netty.InternalProtocolNegotiator;
import io.grpc.netty.InternalProtocolNegotiationEvent;
import io.grpc.netty.InternalProtocolNegotiators;
import io.grpc.netty.NettySslContextChannelCredentials;
import io.grpc.netty.NettySslContextServerCredentials;
import io.grpc.netty.ProtocolNegotiationEvent;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.http2.Http2Settings;
import io.netty.handler.ssl.SslContext;
import io.netty.util.AsciiString;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.Settings;
import io.pinless.alts.handshake.AltsHandshakeHandler;
import io.pinless.alts.handshake.AltsHandshakeResult;
import io.pinless.connection.ConnectionHandler;
import io.pinless.connection.RecordStage;
import io.pinless.http2.FrameSlicer;
import io.pinless.read.ProcessBudget;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadPolicy;
import io.pinless.tls.TlsHandshakeHandler;
import io.pinless.tls.TlsHandshakeResult;
import java.net.URI;
import java.net.URISyntaxException;
import java.security.cert.Certificate;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;

/**
 * The one class that touches grpc-netty's {@code @Internal} negotiator API: it turns the pinless
 * pipeline into {@code ChannelCredentials} and {@code ServerCredentials} the way grpc-alts builds
 * its own. Once a connection is active, the negotiation handler puts a {@link ConnectionHandler}
 * at the head of the pipeline; for ALTS it adds the handshake handler behind it and waits for its
 * result. Then, in one place ({@code install}), it gives the connection handler its record stage
 * and frame slicer, switches grpc-netty's cumulator to {@code COMPOSITE_CUMULATOR} (the slicer
 * hands it whole frames, so it never cumulates), and hands over to grpc-netty.
 *
 * <p>Last it has grpc-netty's encoder send a second SETTINGS frame with the larger
 * SETTINGS_MAX_FRAME_SIZE pinless advertises (grpc-netty has no option for it). grpc-netty's
 * decoder applies it to its frame reader when the peer acknowledges it. The slicer takes the
 * larger size from the start: before the acknowledgement, grpc-netty's reader refuses a whole
 * frame above 16 KiB, while a DATA frame that reads cut reaches it in pieces it accepts.
 */
final class NettyNegotiators {
  /** How an ALTS connection is secured; null fields are not allowed. */
  record AltsOptions(String handshakerAddress, List<String> targetServiceAccounts,
      long handshakeTimeoutMillis) {}

  /** How a TLS connection is secured: the user's context and the handshake's deadline. */
  record TlsOptions(SslContext context, long handshakeTimeoutMillis) {}

  /**
   * How a connection gets its record stage: none (h2c), one made at once by a factory (a record
   * protocol that needs no handshake), or the one an ALTS or TLS handshake keys.
   */
  private record Security(Supplier<? extends RecordStage> stages, AltsOptions alts,
      TlsOptions tls, ProcessBudget budget) {
    static final Security PLAINTEXT = new Security(() -> null, null, null);

    /** Connections that report to the process's budget. */
    Security(Supplier<? extends RecordStage> stages, AltsOptions alts, TlsOptions tls) {
      this(stages, alts, tls, null);
    }

    /** The budget the connections report to: the process's unless one was given; null for none. */
    ProcessBudget processBudget() {
      return budget != null ? budget : ProcessBudget.process();
    }

    boolean handshakes() {
      return alts != null || tls != null;
    }
  }

  /** A TLS handshake's deadline unless the caller sets one: 20 s, as ALTS's. */
  static final long TLS_HANDSHAKE_TIMEOUT_MILLIS = AltsDefaults.HANDSHAKE_TIMEOUT_MILLIS;

  private static final AsciiString HTTP = AsciiString.of("http");
  private static final AsciiString HTTPS = AsciiString.of("https");
  /** The port a plaintext target without one gets, as in grpc-netty. */
  private static final int DEFAULT_PLAINTEXT_PORT = 80;
  /** The port a TLS or ALTS target without one gets, as in grpc-netty and grpc-alts. */
  private static final int DEFAULT_SECURE_PORT = 443;
  /**
   * 32 KiB, near grpc-go's 32.5 KiB: the reads of a connection with a record stage while nothing
   * sizes them (the handshake); after it the stage asks for reads of whole records.
   */
  static final int RECORD_READ_BYTES = 32 * 1024;

  private NettyNegotiators() {}

  /** h2c with the pinless pipeline, or, with {@link Settings#enabled()} false, grpc-netty's. */
  static ChannelCredentials clientCredentials() {
    return clientCredentials(Settings.enabled());
  }

  /** h2c with the pinless pipeline, or, with {@link Settings#enabled()} false, grpc-netty's. */
  static ServerCredentials serverCredentials() {
    return serverCredentials(Settings.enabled());
  }

  /** With {@code enabled} false: grpc-netty's plaintext negotiator. */
  static ChannelCredentials clientCredentials(boolean enabled) {
    if (!enabled) {
      return InternalNettyChannelCredentials.create(new StockClientFactory());
    }
    return InternalNettyChannelCredentials.create(new ClientFactory(Security.PLAINTEXT));
  }

  /** With {@code enabled} false: grpc-netty's plaintext negotiator. */
  static ServerCredentials serverCredentials(boolean enabled) {
    if (!enabled) {
      return InternalNettyServerCredentials.create(InternalProtocolNegotiators.serverPlaintext());
    }
    return InternalNettyServerCredentials.create(new ServerFactory(Security.PLAINTEXT));
  }

  /**
   * A connection whose records a stage made by {@code stages} opens and seals, installed as soon
   * as the connection is active: for a record protocol that needs no handshake.
   */
  static ChannelCredentials clientCredentials(Supplier<? extends RecordStage> stages) {
    return InternalNettyChannelCredentials.create(
        new ClientFactory(new Security(stages, null, null)));
  }

  /** As {@link #clientCredentials(Supplier)}, its connections reporting to {@code budget}. */
  static ChannelCredentials clientCredentials(
      Supplier<? extends RecordStage> stages, ProcessBudget budget) {
    return InternalNettyChannelCredentials.create(
        new ClientFactory(new Security(stages, null, null, budget)));
  }

  /** The server side of {@link #clientCredentials(Supplier)}. */
  static ServerCredentials serverCredentials(Supplier<? extends RecordStage> stages) {
    return InternalNettyServerCredentials.create(
        new ServerFactory(new Security(stages, null, null)));
  }

  /** As {@link #serverCredentials(Supplier)}, its connections reporting to {@code budget}. */
  static ServerCredentials serverCredentials(
      Supplier<? extends RecordStage> stages, ProcessBudget budget) {
    return InternalNettyServerCredentials.create(
        new ServerFactory(new Security(stages, null, null, budget)));
  }

  /** ALTS with the pinless pipeline, whatever the switch says: grpc-netty has no ALTS. */
  static ChannelCredentials altsClientCredentials(AltsOptions alts) {
    return InternalNettyChannelCredentials.create(
        new ClientFactory(new Security(null, alts, null)));
  }

  /** ALTS with the pinless pipeline. */
  static ServerCredentials altsServerCredentials(AltsOptions alts) {
    return InternalNettyServerCredentials.create(
        new ServerFactory(new Security(null, alts, null)));
  }

  /**
   * TLS with the pinless pipeline over {@code context} (a client context), or, with {@link
   * Settings#enabled()} false, grpc-netty's TLS with that context.
   */
  static ChannelCredentials tlsClientCredentials(SslContext context, long handshakeTimeoutMillis) {
    checkTls(context, true);
    if (!Settings.enabled()) {
      return NettySslContextChannelCredentials.create(context);
    }
    return InternalNettyChannelCredentials.create(new ClientFactory(
        new Security(null, null, new TlsOptions(context, handshakeTimeoutMillis))));
  }

  /** The server side of {@link #tlsClientCredentials}. */
  static ServerCredentials tlsServerCredentials(SslContext context, long handshakeTimeoutMillis) {
    checkTls(context, false);
    if (!Settings.enabled()) {
      return NettySslContextServerCredentials.create(context);
    }
    return InternalNettyServerCredentials.create(new ServerFactory(
        new Security(null, null, new TlsOptions(context, handshakeTimeoutMillis))));
  }

  private static void checkTls(SslContext context, boolean client) {
    java.util.Objects.requireNonNull(context, "context");
    if (context.isClient() != client) {
      throw new IllegalArgumentException(
          "a " + (client ? "client" : "server") + " SslContext is needed (GrpcSslContexts.for"
              + (client ? "Client" : "Server") + "())");
    }
    if (!context.applicationProtocolNegotiator().protocols().contains("h2")) {
      throw new IllegalArgumentException(
          "the SslContext does not offer ALPN h2: build it with GrpcSslContexts");
    }
  }

  /**
   * Handshakes whose tasks may wait for a thread of the TLS task pool: 4096, more than a burst of
   * thousands of simultaneous handshakes queues; past it a handshake would only wait towards its
   * deadline, so it is refused at once.
   */
  static final int TLS_TASKS_QUEUED = 4096;

  /**
   * Where TLS engines' delegated tasks (certificate checks, key agreement) run: a few daemon
   * threads shared by every connection, none kept while there is no handshake.
   */
  private static final class TlsTasks {
    static final Executor EXECUTOR = tlsTaskPool(
        Math.max(2, Runtime.getRuntime().availableProcessors()), TLS_TASKS_QUEUED);
  }

  /**
   * A pool of {@code threads} daemon threads with room for {@code queued} waiting handshakes;
   * {@code execute} throws {@link RejectedExecutionException} naming the limit when it is full.
   */
  static ThreadPoolExecutor tlsTaskPool(int threads, int queued) {
    ThreadPoolExecutor pool = new ThreadPoolExecutor(threads, threads, 10, TimeUnit.SECONDS,
        new ArrayBlockingQueue<>(queued), r -> {
          Thread t = new Thread(r, "pinless-tls-task");
          t.setDaemon(true);
          return t;
        }, (task, full) -> {
          throw new RejectedExecutionException(
              "the TLS task pool has " + queued + " handshakes waiting, its limit");
        });
    pool.allowCoreThreadTimeOut(true);
    return pool;
  }

  /**
   * A client engine for {@code authority}: its host for SNI and the host name check (the
   * authority carries any {@code overrideAuthority}).
   */
  private static SSLEngine clientEngine(
      ChannelHandlerContext ctx, SslContext context, String authority) {
    String host = authority;
    int port = -1;
    try {
      URI uri = new URI(null, authority, null, null, null);
      if (uri.getHost() != null) {
        host = uri.getHost();
        port = uri.getPort();
      }
    } catch (URISyntaxException e) {
      // Not host:port: use it as it is.
    }
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    SSLEngine engine = context.newEngine(ctx.alloc(), host, port);
    SSLParameters params = engine.getSSLParameters();
    params.setEndpointIdentificationAlgorithm("HTTPS");
    engine.setSSLParameters(params);
    return engine;
  }

  private static final class StockClientFactory
      implements InternalProtocolNegotiator.ClientFactory {
    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator() {
      return InternalProtocolNegotiators.plaintext();
    }

    @Override
    public int getDefaultPort() {
      return DEFAULT_PLAINTEXT_PORT;
    }
  }

  private static final class ClientFactory implements InternalProtocolNegotiator.ClientFactory {
    private final Security security;

    ClientFactory(Security security) {
      this.security = security;
    }

    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator() {
      return new Negotiator(false, security);
    }

    @Override
    public int getDefaultPort() {
      return security.handshakes() ? DEFAULT_SECURE_PORT : DEFAULT_PLAINTEXT_PORT;
    }
  }

  private static final class ServerFactory implements InternalProtocolNegotiator.ServerFactory {
    private final Security security;

    ServerFactory(Security security) {
      this.security = security;
    }

    @Override
    public InternalProtocolNegotiator.ProtocolNegotiator newNegotiator(
        ObjectPool<? extends Executor> offloadExecutorPool) {
      return new Negotiator(true, security);
    }
  }

  private static final class Negotiator implements InternalProtocolNegotiator.ProtocolNegotiator {
    private final boolean server;
    private final Security security;

    Negotiator(boolean server, Security security) {
      this.server = server;
      this.security = security;
    }

    @Override
    public AsciiString scheme() {
      return security.handshakes() ? HTTPS : HTTP;
    }

    @Override
    public ChannelHandler newHandler(GrpcHttp2ConnectionHandler grpcHandler) {
      ChannelHandler next = InternalProtocolNegotiators.grpcNegotiationHandler(grpcHandler);
      ChannelHandler install = new InstallHandler(next, grpcHandler, server, security);
      return InternalProtocolNegotiators.waitUntilActiveHandler(
          install, grpcHandler.getNegotiationLogger());
    }

    @Override
    public void close() {}
  }

  /**
   * Puts the connection handler in place once the connection is active; for ALTS, waits for the
   * handshake; then installs the stages and hands over to gRPC.
   */
  private static final class InstallHandler
      extends InternalProtocolNegotiators.ProtocolNegotiationHandler {
    private final GrpcHttp2ConnectionHandler grpcHandler;
    private final boolean server;
    private final Security security;
    private ConnectionHandler connection;

    InstallHandler(
        ChannelHandler next, GrpcHttp2ConnectionHandler grpcHandler, boolean server,
        Security security) {
      super(next, "pinless", grpcHandler.getNegotiationLogger());
      this.grpcHandler = grpcHandler;
      this.server = server;
      this.security = security;
    }

    @Override
    protected void protocolNegotiationEventTriggered(ChannelHandlerContext ctx) {
      ProcessBudget process = security.processBudget();
      if (server && process != null && process.refusesConnections()) {
        Metric.CONNECTIONS_REFUSED.add(1);
        ctx.close();
        return;
      }
      AltsOptions alts = security.alts();
      TlsOptions tls = security.tls();
      connection = new ConnectionHandler(
          new ReadBudget(Settings.readBudgetBytes(), process),
          Settings.holdWhileUnwritable(),
          security.handshakes() ? RECORD_READ_BYTES : ReadPolicy.MAX_READ_BYTES);
      ctx.pipeline().addFirst("pinless", connection);
      if (alts != null) {
        ctx.pipeline().addBefore(ctx.name(), "pinless-alts-handshake",
            new AltsHandshakeHandler(!server, alts.handshakerAddress(),
                alts.targetServiceAccounts(), alts.handshakeTimeoutMillis()));
      } else if (tls != null) {
        SSLEngine engine = server
            ? tls.context().newEngine(ctx.alloc())
            : clientEngine(ctx, tls.context(), grpcHandler.getAuthority());
        ctx.pipeline().addBefore(ctx.name(), "pinless-tls-handshake",
            new TlsHandshakeHandler(engine, TlsTasks.EXECUTOR, tls.handshakeTimeoutMillis()));
      } else {
        // Plaintext: a call may name any authority.
        ProtocolNegotiationEvent event = getProtocolNegotiationEvent();
        replaceProtocolNegotiationEvent(InternalProtocolNegotiationEvent.withAttributes(event,
            InternalProtocolNegotiationEvent.getAttributes(event).toBuilder()
                .set(GrpcAttributes.ATTR_AUTHORITY_VERIFIER, authority -> Status.OK)
                .build()));
        install(ctx, security.stages().get());
      }
    }

    @Override
    protected void userEventTriggered0(ChannelHandlerContext ctx, Object evt) throws Exception {
      if (evt instanceof TlsHandshakeResult) {
        TlsHandshakeResult result = (TlsHandshakeResult) evt;
        // The verifier lives as long as the transport: it keeps the peer's leaf and no more.
        Certificate peer = result.peerCertificate();
        ProtocolNegotiationEvent event = getProtocolNegotiationEvent();
        Attributes attrs =
            InternalProtocolNegotiationEvent.getAttributes(event).toBuilder()
                .set(GrpcAttributes.ATTR_SECURITY_LEVEL, SecurityLevel.PRIVACY_AND_INTEGRITY)
                .setAll(result.transportAttributes())
                .set(GrpcAttributes.ATTR_AUTHORITY_VERIFIER,
                    authority -> TlsAuthority.check(peer, authority))
                .build();
        event = InternalProtocolNegotiationEvent.withAttributes(event, attrs);
        event = InternalProtocolNegotiationEvent.withSecurity(event,
            new InternalChannelz.Security(new InternalChannelz.Tls(result.cipherSuite(),
                result.localCertificate(), peer)));
        replaceProtocolNegotiationEvent(event);
        install(ctx, result.takeRecordStage());
        return;
      }
      if (!(evt instanceof AltsHandshakeResult)) {
        super.userEventTriggered0(ctx, evt);
        return;
      }
      AltsHandshakeResult result = (AltsHandshakeResult) evt;
      ProtocolNegotiationEvent event = getProtocolNegotiationEvent();
      Attributes attrs =
          InternalProtocolNegotiationEvent.getAttributes(event).toBuilder()
              .set(GrpcAttributes.ATTR_SECURITY_LEVEL, PinlessAltsContext.securityLevel(result))
              .set(PinlessAltsContext.ATTR, PinlessAltsContext.of(result))
              .build();
      replaceProtocolNegotiationEvent(
          InternalProtocolNegotiationEvent.withAttributes(event, attrs));
      install(ctx, result.takeRecordStage());
    }

    /**
     * Gives the connection handler its stages, has gRPC's handler use the whole frames it is
     * handed as they are, and hands over to gRPC.
     *
     * @param records the record stage, or null for h2c
     */
    private void install(ChannelHandlerContext ctx, RecordStage records) {
      grpcHandler.setCumulator(ByteToMessageDecoder.COMPOSITE_CUMULATOR);
      connection.install(records, new FrameSlicer(server, Settings.http2MaxFrameSize(),
          connection.readPolicy().budget(), true));
      fireProtocolNegotiationEvent(ctx);
      advertiseFrameSize(ctx);
    }

    /** Advertises {@link Settings#http2MaxFrameSize()} unless it is HTTP/2's default. */
    private void advertiseFrameSize(ChannelHandlerContext ctx) {
      int size = Settings.http2MaxFrameSize();
      ChannelHandlerContext grpcCtx = ctx.pipeline().context(grpcHandler);
      if (size == FrameSlicer.DEFAULT_MAX_FRAME_SIZE || grpcCtx == null) {
        return;
      }
      grpcHandler.encoder().writeSettings(
          grpcCtx, new Http2Settings().maxFrameSize(size), grpcCtx.newPromise());
      grpcCtx.flush();
    }
  }
}
