package io.pinless.alts.handshake;

import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * Runs a {@link LocalHandshakerService} alone, for setups with several processes: each process
 * points its ALTS credentials' {@code handshakerAddress} at one.
 *
 * <pre>
 *   java -cp pinless.jar:... io.pinless.alts.handshake.LocalHandshakerMain [port [service-account]]
 * </pre>
 *
 * <p>It listens in plaintext on the loopback interface only (default port 8080, as the metadata
 * server's handshaker), and prints the address it listens on.
 */
public final class LocalHandshakerMain {
  private LocalHandshakerMain() {}

  /** Starts the service and serves until the process is stopped. */
  public static void main(String[] args) throws IOException, InterruptedException {
    int port;
    try {
      port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    } catch (NumberFormatException e) {
      System.err.println("usage: LocalHandshakerMain [port [service-account]]: '" + args[0]
          + "' is not a port number");
      System.exit(2);
      return;
    }
    String account = args.length > 1 ? args[1] : LocalHandshakerService.DEFAULT_SERVICE_ACCOUNT;
    Server server = start(port, account);
    System.out.println("local ALTS handshaker for " + account + " on " + hostAndPort(server));
    server.awaitTermination();
  }

  /**
   * Serves a {@link LocalHandshakerService} for {@code account} in plaintext on the loopback
   * interface, at {@code port} (0 for any free one).
   */
  public static Server start(int port, String account) throws IOException {
    return NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), port),
            InsecureServerCredentials.create())
        .addService(new LocalHandshakerService(account))
        .build()
        .start();
  }

  /** The {@code host:port} to give ALTS credentials for a handshaker {@link #start}ed here. */
  public static String hostAndPort(Server server) {
    InetSocketAddress address = (InetSocketAddress) server.getListenSockets().get(0);
    return address.getAddress().getHostAddress() + ":" + address.getPort();
  }
}
