package io.pinless.grpc;

import io.pinless.testing.Handshakers;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The local ALTS handshakers, client's and server's, started once for a test class: register it
 * as a static field with {@code @RegisterExtension}.
 */
final class LocalHandshakers implements BeforeAllCallback, AfterAllCallback {
  private HostileFraming.Handshaker handshakers;

  @Override
  public void beforeAll(ExtensionContext context) throws Exception {
    handshakers = HostileFraming.Handshaker.start();
  }

  @Override
  public void afterAll(ExtensionContext context) throws Exception {
    handshakers.close();
  }

  /** The server's handshaker, as a target for its credentials. */
  String serverAddress() {
    return Handshakers.address(handshakers.server());
  }

  /** The client's handshaker, as a target for its credentials. */
  String clientAddress() {
    return Handshakers.address(handshakers.client());
  }
}
