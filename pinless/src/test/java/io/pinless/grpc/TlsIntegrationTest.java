package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.pinless.testing.TestCertificates;
import java.io.UncheckedIOException;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;

/**
 * Every plaintext integration test again over pinless TLS on both ends, with the JDK's engine
 * ({@link TlsOpenSslIntegrationTest}: OpenSSL's).
 */
class TlsIntegrationTest extends PlaintextIntegrationTest {
  SslProvider provider() {
    return SslProvider.JDK;
  }

  /**
   * A handshake deadline no machine's speed decides: these tests are about the data path, and a
   * loaded machine can take longer than the default 20 s for hundreds of handshakes at once.
   */
  private static final long HANDSHAKE_MINUTES = 10;

  /**
   * 250: TLS handshakes while hundreds of connections stream take tens of milliseconds each on a
   * 2-core machine; a thousand at once come near the default 20 s handshake deadline (stock
   * grpc-netty with OpenSSL fails the same test at its own deadline).
   */
  @Override
  int connectionsClosedWhileStreaming() {
    return 250;
  }

  @Override
  ServerCredentials serverCredentials() {
    try {
      return PinlessServerCredentials.tls(
          TestCertificates.serverContext(provider(), TestCertificates.SERVER, ClientAuth.NONE),
          HANDSHAKE_MINUTES, TimeUnit.MINUTES);
    } catch (SSLException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  ChannelCredentials channelCredentials() {
    try {
      return PinlessChannelCredentials.tls(TestCertificates.clientContext(provider(), null),
          HANDSHAKE_MINUTES, TimeUnit.MINUTES);
    } catch (SSLException e) {
      throw new UncheckedIOException(e);
    }
  }
}
