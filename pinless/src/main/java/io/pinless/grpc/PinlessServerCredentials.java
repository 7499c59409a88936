package io.pinless.grpc;

import io.grpc.ServerCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.TlsServerCredentials;
import io.pinless.Settings;
import io.netty.handler.ssl.SslContext;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Server credentials for grpc-java's Netty transport that install the pinless read path. Use them
 * with {@code NettyServerBuilder.forPort(port, creds)}, {@code NettyServerBuilder.forAddress(addr,
 * creds)} or {@code Grpc.newServerBuilderForPort(port, creds)}. With {@code
 * -Dpinless.enabled=false} (or {@code PINLESS_ENABLED=false}) they build grpc-netty's pipeline.
 *
 * <p>A pinless connection advertises an HTTP/2 SETTINGS_MAX_FRAME_SIZE of 64 KiB (16 KiB is
 * HTTP/2's default and grpc-netty's), so its peer sends DATA in fewer, larger frames; {@code
 * -Dpinless.http2.maxFrameSize} sets it ({@link io.pinless.Settings}).
 *
 * <p>Every factory here throws {@link IllegalStateException}, naming the supported grpc-java range,
 * when the grpc-netty or Netty found lacks a class or member pinless links to.
 *
 * <p>They carry grpc-netty's (unshaded) negotiators. grpc-netty-shaded's builders cannot run
 * them and fail with its own message, "Unsupported credential type:
 * io.grpc.netty.NettyServerCredentials": use {@code io.grpc.netty}'s builders or {@code
 * Grpc.newServerBuilderForPort}, which skips the shaded transport for these credentials.
 */
public final class PinlessServerCredentials {
  private PinlessServerCredentials() {}

  /** Plaintext HTTP/2 (h2c) with the pinless read path. */
  public static ServerCredentials insecure() {
    GrpcNettySupport.check();
    return NettyNegotiators.serverCredentials();
  }

  /**
   * TLS with the pinless read path over {@code context}, a server context as grpc-netty users
   * build it ({@code GrpcSslContexts.forServer(certChain, key)...build()}), with the JDK's engine
   * or OpenSSL's (netty-tcnative). ALPN {@code h2} is required; when the context asks for client
   * certificates ({@code clientAuth}), mutual TLS is enforced. Services see gRPC's SSL
   * transport attribute (the client's certificates) and {@code
   * SecurityLevel.PRIVACY_AND_INTEGRITY}. With {@code -Dpinless.enabled=false} this call
   * returns grpc-netty's TLS credentials over {@code context}.
   *
   * @throws IllegalArgumentException if {@code context} is a client context or offers no ALPN
   *     {@code h2}
   */
  public static ServerCredentials tls(SslContext context) {
    GrpcNettySupport.check();
    return NettyNegotiators.tlsServerCredentials(
        context, NettyNegotiators.TLS_HANDSHAKE_TIMEOUT_MILLIS);
  }

  /**
   * grpc's portable credentials with the pinless read path: {@code TlsServerCredentials} (from
   * {@code TlsServerCredentials.create(certChain, key)} or its builder) become {@link
   * #tls(SslContext)} over the {@code SslContext} grpc-netty would build from them (OpenSSL's
   * engine when netty-tcnative is present, else the JDK's; the client-certificate policy of
   * {@code clientAuth}); {@code InsecureServerCredentials} become {@link #insecure()}. With {@code
   * -Dpinless.enabled=false} it returns {@code credentials} themselves.
   *
   * @throws IllegalArgumentException for other credentials, TLS features pinless does not take
   *     (it takes mutual TLS and custom key and trust managers), or keys or certificates that do
   *     not load
   */
  public static ServerCredentials from(ServerCredentials credentials) {
    if (!Settings.enabled()) {
      return credentials;
    }
    if (credentials instanceof TlsServerCredentials) {
      return tls(PortableTls.serverContext((TlsServerCredentials) credentials));
    }
    if (credentials instanceof InsecureServerCredentials) {
      return insecure();
    }
    throw new IllegalArgumentException("pinless takes grpc's TLS or insecure credentials, not "
        + credentials.getClass().getName());
  }

  /**
   * As {@link #tls(SslContext)}, a handshake failing after {@code handshakeTimeout}, not 20 s.
   * With {@code pinless.enabled} false the timeout does not apply: grpc-netty's TLS sets it.
   *
   * @throws IllegalArgumentException as {@link #tls(SslContext)}, or if the timeout is not
   *     positive
   */
  public static ServerCredentials tls(SslContext context, long handshakeTimeout, TimeUnit unit) {
    GrpcNettySupport.check();
    return NettyNegotiators.tlsServerCredentials(
        context, AltsDefaults.checkTimeout(handshakeTimeout, unit));
  }

  /**
   * ALTS with the pinless read path: the handshake runs asynchronously through a handshaker
   * service, and calls see a {@link PinlessAltsContext} and {@code PRIVACY_AND_INTEGRITY}; or
   * {@code NONE} when the handshaker says the peer is not authenticated (pinless's local
   * handshaker without a deployment key).
   */
  public static AltsBuilder altsBuilder() {
    return new AltsBuilder();
  }

  /** Builds ALTS server credentials. */
  public static final class AltsBuilder {
    /** Null until set: the metadata server's, found when the credentials are built. */
    private String handshakerAddress;
    private long handshakeTimeoutMillis = AltsDefaults.HANDSHAKE_TIMEOUT_MILLIS;

    private AltsBuilder() {}

    /**
     * The handshaker service, {@code host:port} or a gRPC target URI; by default the metadata
     * server's on Google Cloud ({@code metadata.google.internal.:8080}, or {@code
     * $GCE_METADATA_HOST:8080}).
     *
     * @throws IllegalArgumentException if it has no port or a port outside 1 to 65535
     */
    public AltsBuilder handshakerAddress(String hostAndPort) {
      this.handshakerAddress = AltsDefaults.checkAddress(hostAndPort);
      return this;
    }

    /** How long a handshake may take before the connection fails (default 20 s). */
    public AltsBuilder handshakeTimeout(long timeout, TimeUnit unit) {
      this.handshakeTimeoutMillis = AltsDefaults.checkTimeout(timeout, unit);
      return this;
    }

    /**
     * The credentials, for {@code Grpc.newServerBuilderForPort} or {@code NettyServerBuilder}.
     *
     * @throws IllegalArgumentException if {@code pinless.alts.crypto} names no AES-GCM provider,
     *     or names Conscrypt and it does not load, or if no handshaker address is set and
     *     {@code GCE_METADATA_HOST} makes none
     */
    public ServerCredentials build() {
      GrpcNettySupport.check();
      AltsDefaults.checkCrypto();
      String address =
          handshakerAddress != null ? handshakerAddress : AltsDefaults.handshakerAddress();
      return NettyNegotiators.altsServerCredentials(
          new NettyNegotiators.AltsOptions(address, List.of(), handshakeTimeoutMillis));
    }
  }
}
