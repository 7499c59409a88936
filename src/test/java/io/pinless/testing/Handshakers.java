package io.pinless.testing;

import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.pinless.alts.handshake.LocalHandshakerService;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/** Test support: local handshaker services on loopback, and gRPC servers' addresses. */
public final class Handshakers {
  private Handshakers() {}

  /** A {@link LocalHandshakerService} for {@code account}, served on a loopback port. */
  public static Server start(String account) throws IOException {
    return NettyServerBuilder.forAddress(
            new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
            InsecureServerCredentials.create())
        .addService(new LocalHandshakerService(account))
        .build()
        .start();
  }

  /** {@code 127.0.0.1:port} of a server on loopback. */
  public static String address(Server server) {
    return "127.0.0.1:" + ((InetSocketAddress) server.getListenSockets().get(0)).getPort();
  }

  /** Stops servers, each within ten seconds. */
  public static void stop(Server... servers) throws InterruptedException {
    for (Server s : servers) {
      s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }
}
