package io.pinless.read;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.testing.NettyTransports;
import io.pinless.testing.NettyTransports.Socket;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class BufferRingTest {
  @Test
  void aChannelWithoutABufferGroupDoesNotReadFromARing() {
    EmbeddedChannel channel = new EmbeddedChannel();
    assertFalse(BufferRing.readsFrom(channel));
    channel.finishAndReleaseAll();
  }

  @Test
  void anIoUringChannelReadsFromARingOnlyWithItsBufferGroupSet() throws Exception {
    assertFalse(readsFromARing(Socket.IO_URING), "io_uring without a buffer group");
    assertTrue(readsFromARing(Socket.IO_URING_RING), "io_uring with one");
  }

  private static boolean readsFromARing(Socket socket) throws Exception {
    assumeTrue(NettyTransports.available(socket), socket + " is not available on this machine");
    EventLoopGroup group = NettyTransports.group(socket, 1);
    try {
      Bootstrap bootstrap = new Bootstrap().group(group)
          .channel(NettyTransports.clientChannel(socket))
          .handler(new ChannelInboundHandlerAdapter());
      Channel channel = NettyTransports.useRing(bootstrap, socket).register().sync().channel();
      try {
        return BufferRing.readsFrom(channel);
      } finally {
        channel.close().sync();
      }
    } finally {
      group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
    }
  }
}
