package io.pinless.grpc;

import io.netty.handler.ssl.SslProvider;

/** Every plaintext integration test again over pinless TLS with OpenSSL's engine (netty-tcnative). */
class TlsOpenSslIntegrationTest extends TlsIntegrationTest {
  @Override
  SslProvider provider() {
    return SslProvider.OPENSSL;
  }
}
