package io.pinless.grpc;

import java.util.concurrent.TimeUnit;

/** The defaults and checks the two ALTS credential builders share. */
final class AltsDefaults {
  /** 20 s, as the issue and grpc-alts's own handshake budget. */
  static final long HANDSHAKE_TIMEOUT_MILLIS = 20_000;
  /** The metadata server's handshaker port. */
  private static final int HANDSHAKER_PORT = 8080;

  private AltsDefaults() {}

  /** The metadata server's handshaker, honouring {@code GCE_METADATA_HOST} as grpc-alts does. */
  static String handshakerAddress() {
    String host = System.getenv("GCE_METADATA_HOST");
    return (host == null || host.isEmpty() ? "metadata.google.internal." : host)
        + ":" + HANDSHAKER_PORT;
  }

  static String checkAddress(String hostAndPort) {
    if (hostAndPort == null || hostAndPort.isEmpty()) {
      throw new IllegalArgumentException("handshakerAddress must be host:port");
    }
    return hostAndPort;
  }

  static long checkTimeout(long timeout, TimeUnit unit) {
    long millis = unit.toMillis(timeout);
    if (millis <= 0) {
      throw new IllegalArgumentException("handshake timeout must be positive, got " + timeout + " " + unit);
    }
    return millis;
  }
}
