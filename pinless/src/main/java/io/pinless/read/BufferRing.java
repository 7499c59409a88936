package io.pinless.read;

import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;

/**
 * Whether a channel reads through an io_uring provided-buffer ring. The kernel then picks each
 * read's buffer and ends the read where data has arrived, so a record a read cuts is copied
 * ({@link io.pinless.connection.RecordFraming}); an end that knows can ask for smaller records.
 */
public final class BufferRing {
  /**
   * Netty 4.2's io_uring option naming a channel's buffer group ({@code
   * IoUringChannelOption.IO_URING_BUFFER_GROUP_ID}, by the name Netty keeps it under): -1, or no
   * such option, for none.
   */
  private static final String GROUP_OPTION =
      "io.netty.channel.uring.IoUringChannelOption#IO_URING_BUFFER_GROUP_ID";

  private BufferRing() {}

  /** True when {@code channel} reads from a provided-buffer ring: its buffer group is set. */
  public static boolean readsFrom(Channel channel) {
    if (!ChannelOption.exists(GROUP_OPTION)) {
      return false;
    }
    Object group = channel.config().getOption(ChannelOption.valueOf(GROUP_OPTION));
    return group instanceof Number && ((Number) group).intValue() >= 0;
  }
}
