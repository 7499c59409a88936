package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.TlsChannelCredentials;
import io.pinless.Settings;
import io.netty.handler.ssl.SslContext;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Client credentials for grpc-java's Netty transport that install the pinless read path. Use them
 * with {@code Grpc.newChannelBuilder(target, creds)} or {@code NettyChannelBuilder.forAddress(host,
 * port, creds)}, with any event loop (NIO, epoll, io_uring) and channel type the builder is given,
 * Unix domain sockets included. With {@code -Dpinless.enabled=false} (or {@code
 * PINLESS_ENABLED=false}) these credentials build grpc-netty's pipeline.
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
 * io.grpc.netty.NettyChannelCredentials": use {@code io.grpc.netty}'s builders or {@code
 * Grpc.newChannelBuilder}, which skips the shaded transport for these credentials.
 */
public final class PinlessChannelCredentials {
  private PinlessChannelCredentials() {}

  /** Plaintext HTTP/2 (h2c) with the pinless read path. */
  public static ChannelCredentials insecure() {
    GrpcNettySupport.check();
    return NettyNegotiators.clientCredentials();
  }

  /**
   * TLS with the pinless read path over {@code context}, a client context as grpc-netty users
   * build it ({@code GrpcSslContexts.forClient()...build()}), with the JDK's engine or OpenSSL's
   * (netty-tcnative). ALPN {@code h2} is required, the server's certificate is checked against
   * the authority (the target's host, or {@code overrideAuthority}), the context's key and
   * certificate are presented when the server asks for one, and the transport attributes carry
   * gRPC's SSL attribute (the server's certificates) and {@code PRIVACY_AND_INTEGRITY}. The
   * handshake's delegated tasks run off the event loop; it fails with UNAVAILABLE after 20 s.
   * With {@code -Dpinless.enabled=false} this call returns grpc-netty's TLS credentials over
   * {@code context}.
   *
   * @throws IllegalArgumentException if {@code context} is a server context or offers no ALPN
   *     {@code h2}
   */
  public static ChannelCredentials tls(SslContext context) {
    GrpcNettySupport.check();
    return NettyNegotiators.tlsClientCredentials(
        context, NettyNegotiators.TLS_HANDSHAKE_TIMEOUT_MILLIS);
  }

  /**
   * grpc's portable credentials with the pinless read path: {@code TlsChannelCredentials} (from
   * {@code TlsChannelCredentials.create()} or its builder) become {@link #tls(SslContext)} over
   * the {@code SslContext} grpc-netty would build from them (OpenSSL's engine when netty-tcnative
   * is present, else the JDK's); {@code InsecureChannelCredentials} become {@link #insecure()}.
   * With {@code -Dpinless.enabled=false} it returns {@code credentials} themselves.
   *
   * @throws IllegalArgumentException for other credentials, TLS features pinless does not take
   *     (it takes mutual TLS and custom key and trust managers), or keys or certificates that do
   *     not load
   */
  public static ChannelCredentials from(ChannelCredentials credentials) {
    if (!Settings.enabled()) {
      return credentials;
    }
    if (credentials instanceof TlsChannelCredentials) {
      return tls(PortableTls.clientContext((TlsChannelCredentials) credentials));
    }
    if (credentials instanceof InsecureChannelCredentials) {
      return insecure();
    }
    throw new IllegalArgumentException("pinless takes grpc's TLS or insecure credentials, not "
        + credentials.getClass().getName());
  }

  /**
   * As {@link #tls(SslContext)}, the handshake failing after {@code handshakeTimeout}, not 20 s.
   * With {@code pinless.enabled} false the timeout does not apply: grpc-netty's TLS sets it.
   *
   * @throws IllegalArgumentException as {@link #tls(SslContext)}, or if the timeout is not
   *     positive
   */
  public static ChannelCredentials tls(SslContext context, long handshakeTimeout, TimeUnit unit) {
    GrpcNettySupport.check();
    return NettyNegotiators.tlsClientCredentials(
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

  /** Builds ALTS channel credentials. */
  public static final class AltsBuilder {
    /** Null until set: the metadata server's, found when the credentials are built. */
    private String handshakerAddress;
    private final List<String> targetServiceAccounts = new ArrayList<>();
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

    /** Accepts servers running as {@code serviceAccount}; with none added, any server. */
    public AltsBuilder addTargetServiceAccount(String serviceAccount) {
      if (serviceAccount == null || serviceAccount.isEmpty()) {
        throw new IllegalArgumentException("serviceAccount must be a non-empty name");
      }
      targetServiceAccounts.add(serviceAccount);
      return this;
    }

    /** How long a handshake may take before the connection fails (default 20 s). */
    public AltsBuilder handshakeTimeout(long timeout, TimeUnit unit) {
      this.handshakeTimeoutMillis = AltsDefaults.checkTimeout(timeout, unit);
      return this;
    }

    /**
     * The credentials, for {@code Grpc.newChannelBuilder} or {@code NettyChannelBuilder}.
     *
     * @throws IllegalArgumentException if {@code pinless.alts.crypto} names no AES-GCM provider,
     *     or names Conscrypt and it does not load, or if no handshaker address is set and
     *     {@code GCE_METADATA_HOST} makes none
     */
    public ChannelCredentials build() {
      GrpcNettySupport.check();
      AltsDefaults.checkCrypto();
      String address =
          handshakerAddress != null ? handshakerAddress : AltsDefaults.handshakerAddress();
      return NettyNegotiators.altsClientCredentials(
          new NettyNegotiators.AltsOptions(
              address, List.copyOf(targetServiceAccounts), handshakeTimeoutMillis));
    }
  }
}
