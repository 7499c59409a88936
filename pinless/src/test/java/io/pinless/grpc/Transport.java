package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.pinless.testing.TestCertificates;

/** pinless's transports, as credentials for a test's server and channel. */
enum Transport {
  PLAINTEXT, ALTS, TLS_JDK, TLS_OPENSSL;

  /** Whether the transport encrypts: one decrypting copy of every received byte. */
  boolean secure() {
    return this != PLAINTEXT;
  }

  /** @param handshaker the server's ALTS handshaker address (used for ALTS only) */
  ServerCredentials server(String handshaker) throws Exception {
    switch (this) {
      case PLAINTEXT:
        return PinlessServerCredentials.insecure();
      case ALTS:
        return PinlessServerCredentials.altsBuilder().handshakerAddress(handshaker).build();
      default:
        return PinlessServerCredentials.tls(TestCertificates.serverContext(
            provider(), TestCertificates.SERVER, ClientAuth.NONE));
    }
  }

  /** @param handshaker the client's ALTS handshaker address (used for ALTS only) */
  ChannelCredentials channel(String handshaker) throws Exception {
    switch (this) {
      case PLAINTEXT:
        return PinlessChannelCredentials.insecure();
      case ALTS:
        return PinlessChannelCredentials.altsBuilder().handshakerAddress(handshaker).build();
      default:
        return PinlessChannelCredentials.tls(TestCertificates.clientContext(provider(), null));
    }
  }

  private SslProvider provider() {
    return this == TLS_JDK ? SslProvider.JDK : SslProvider.OPENSSL;
  }
}
