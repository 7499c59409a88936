package io.pinless.testing;

import io.grpc.Server;
import io.pinless.alts.handshake.LocalHandshakerMain;
import java.io.IOException;
import java.util.concurrent.TimeUnit;

/** Test support: local handshaker services on loopback, and gRPC servers' addresses. */
public final class Handshakers {
  private Handshakers() {}

  /** A local handshaker for {@code account}, served on a loopback port. */
  public static Server start(String account) throws IOException {
    return LocalHandshakerMain.start(0, account);
  }

  /** {@code host:port} of a server on loopback. */
  public static String address(Server server) {
    return LocalHandshakerMain.hostAndPort(server);
  }

  /** Stops servers, each within ten seconds. */
  public static void stop(Server... servers) throws InterruptedException {
    for (Server s : servers) {
      s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }
}
