package io.pinless.alts.handshake;

import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Runs a {@link LocalHandshakerService} alone, for setups with several processes: each process
 * points its ALTS credentials' {@code handshakerAddress} at one.
 *
 * <pre>
 *   java -cp pinless.jar:... io.pinless.alts.handshake.LocalHandshakerMain \
 *       [port [service-account [deployment-key-file]]]
 * </pre>
 *
 * <p>It listens in plaintext on the loopback interface only (default port 8080, as the metadata
 * server's handshaker), and prints the address it listens on. With a deployment key file (at
 * least 16 secret bytes, the same file for every handshaker of the deployment) peers are
 * authenticated by it; without one nothing is.
 */
public final class LocalHandshakerMain {
  private static final String USAGE =
      "usage: LocalHandshakerMain [port [service-account [deployment-key-file]]]";

  private LocalHandshakerMain() {}

  /**
   * Starts the service and serves until the process is stopped.
   *
   * @throws IOException if the deployment key file cannot be read or the port cannot be bound
   * @throws InterruptedException if interrupted while serving
   */
  public static void main(String[] args) throws IOException, InterruptedException {
    int port;
    try {
      port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    } catch (NumberFormatException e) {
      System.err.println(USAGE + ": '" + args[0] + "' is not a port number");
      System.exit(2);
      return;
    }
    String account = args.length > 1 ? args[1] : LocalHandshakerService.DEFAULT_SERVICE_ACCOUNT;
    byte[] key = args.length > 2 ? Files.readAllBytes(Path.of(args[2])) : null;
    Server server;
    try {
      server = start(port, account, key);
    } catch (IllegalArgumentException e) {
      System.err.println(USAGE + ": " + e.getMessage());
      System.exit(2);
      return;
    }
    System.out.println("local ALTS handshaker for " + account + " on " + hostAndPort(server)
        + (key == null ? ", unauthenticated (no deployment key)" : ", with a deployment key"));
    server.awaitTermination();
  }

  /**
   * Serves a {@link LocalHandshakerService} for {@code account} without a deployment key (nothing
   * is authenticated) in plaintext on the loopback interface, at {@code port} (0 for any free one).
   *
   * @throws IOException if the port cannot be bound
   */
  public static Server start(int port, String account) throws IOException {
    return start(port, account, null);
  }

  /**
   * Serves a {@link LocalHandshakerService} for {@code account} that authenticates peers by
   * {@code deploymentKey} (null: none), in plaintext on the loopback interface, at {@code port}
   * (0 for any free one).
   *
   * @throws IllegalArgumentException as {@link LocalHandshakerService#LocalHandshakerService(
   *     String, byte[])}
   * @throws IOException if the port cannot be bound
   */
  public static Server start(int port, String account, byte[] deploymentKey) throws IOException {
    return NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), port),
            InsecureServerCredentials.create())
        .addService(new LocalHandshakerService(account, deploymentKey))
        .build()
        .start();
  }

  /** The {@code host:port} to give ALTS credentials for a handshaker {@link #start}ed here. */
  public static String hostAndPort(Server server) {
    InetSocketAddress address = (InetSocketAddress) server.getListenSockets().get(0);
    return address.getAddress().getHostAddress() + ":" + address.getPort();
  }
}
