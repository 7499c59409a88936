package io.pinless.grpc;

import io.pinless.Settings;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Whether the transport providers are on: {@code pinless.provider} set, {@code pinless.enabled}
 * not turned off, and the grpc-netty found having what pinless links to. Anything that fails while
 * finding out turns them off with one log line, so gRPC's service loader never sees a provider
 * throw.
 */
final class ProviderSwitch {
  private static final Logger LOG = Logger.getLogger(ProviderSwitch.class.getName());

  private ProviderSwitch() {}

  /** The switch as {@link Settings} reads it, checked as {@link #available(boolean)} does. */
  static boolean read() {
    try {
      return available(Settings.provider());
    } catch (LinkageError | RuntimeException e) {
      // Settings refuses a malformed value of any pinless setting when it loads.
      LOG.log(Level.WARNING, "pinless transport providers off: the settings do not load", e);
      return false;
    }
  }

  /** {@code on}, unless what the providers use does not load (logged). */
  static boolean available(boolean on) {
    if (!on) {
      return false;
    }
    try {
      NettyBuilders.classes();
      GrpcNettySupport.check();
      return true;
    } catch (LinkageError | RuntimeException e) {
      LOG.log(Level.WARNING, "pinless transport providers off: " + e.getMessage(), e);
      return false;
    }
  }
}
