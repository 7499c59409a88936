package io.pinless.grpc;

import io.pinless.alts.CryptoProvider;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/** The defaults and checks the two ALTS credential builders share. */
final class AltsDefaults {
  /** 20 s, as the issue and grpc-alts's own handshake budget. */
  static final long HANDSHAKE_TIMEOUT_MILLIS = 20_000;
  /** The metadata server's handshaker port. */
  private static final int HANDSHAKER_PORT = 8080;
  /** The largest TCP port. */
  private static final int MAX_PORT = 65535;
  /** A gRPC target with a scheme ({@code dns:///host:port}, {@code unix:/path}), taken as is. */
  private static final Pattern TARGET_URI = Pattern.compile("[A-Za-z][A-Za-z0-9+.-]*:/");

  private AltsDefaults() {}

  /** The environment variable that names the metadata server's host. */
  private static final String METADATA_HOST_ENV = "GCE_METADATA_HOST";

  /**
   * The metadata server's handshaker, honouring {@code GCE_METADATA_HOST} as grpc-alts does.
   *
   * @throws IllegalArgumentException naming the variable, when its host and port 8080 make no
   *     address (it has a port of its own, say)
   */
  static String handshakerAddress() {
    return handshakerAddress(System.getenv(METADATA_HOST_ENV));
  }

  /** The handshaker on port 8080 of {@code metadataHost}; null or empty: the metadata server. */
  static String handshakerAddress(String metadataHost) {
    String address = (metadataHost == null || metadataHost.isEmpty()
        ? "metadata.google.internal." : metadataHost) + ":" + HANDSHAKER_PORT;
    String problem = addressProblem(address);
    if (problem != null) {
      throw new IllegalArgumentException(METADATA_HOST_ENV + "='" + metadataHost
          + "' makes the default handshakerAddress '" + address + "', which " + problem
          + ": give a host without a port, or set handshakerAddress");
    }
    return address;
  }

  /**
   * {@code hostAndPort} if it names a handshaker: {@code host:port} (an IPv6 host in brackets)
   * with a port from 1 to 65535, or a gRPC target URI ({@code dns:///host:port}, {@code
   * unix:/path}).
   *
   * @throws IllegalArgumentException naming the setting and the value, when it names none
   */
  static String checkAddress(String hostAndPort) {
    if (hostAndPort != null && TARGET_URI.matcher(hostAndPort).lookingAt()) {
      return hostAndPort;
    }
    String problem = addressProblem(hostAndPort);
    if (problem != null) {
      throw new IllegalArgumentException("handshakerAddress '" + hostAndPort + "' " + problem
          + ": give host:port (such as localhost:8080) or a target URI (dns:///host:port)");
    }
    return hostAndPort;
  }

  /** What is wrong with {@code hostAndPort} as {@code host:port}; null when nothing is. */
  private static String addressProblem(String hostAndPort) {
    if (hostAndPort == null || hostAndPort.isBlank()) {
      return "is empty";
    }
    int colon;
    if (hostAndPort.startsWith("[")) {
      int close = hostAndPort.indexOf(']');
      if (close < 0) {
        return "has no ] after its IPv6 host";
      }
      colon = close + 1;
      if (colon == hostAndPort.length() || hostAndPort.charAt(colon) != ':') {
        return "has no port";
      }
    } else {
      colon = hostAndPort.lastIndexOf(':');
      if (colon < 0) {
        return "has no port";
      }
      if (hostAndPort.lastIndexOf(':', colon - 1) >= 0) {
        return "has an IPv6 host without brackets";
      }
    }
    if (colon == 0) {
      return "has no host";
    }
    String port = hostAndPort.substring(colon + 1);
    if (!port.matches("[0-9]{1,5}")
        || Integer.parseInt(port) < 1 || Integer.parseInt(port) > MAX_PORT) {
      return "has port '" + port + "', not a number from 1 to " + MAX_PORT;
    }
    return null;
  }

  /**
   * Refuses a {@code pinless.alts.crypto} setting that names no provider, or Conscrypt when it
   * does not load.
   *
   * @throws IllegalArgumentException naming the setting and the value
   */
  static void checkCrypto() {
    CryptoProvider.checkSetting();
  }

  static long checkTimeout(long timeout, TimeUnit unit) {
    long millis = unit.toMillis(timeout);
    if (millis <= 0) {
      throw new IllegalArgumentException(
          "handshake timeout must be positive, got " + timeout + " " + unit);
    }
    return millis;
  }
}
