package io.pinless.http2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.charset.StandardCharsets;

/**
 * Whatever frames are written, in whatever writes, with holds and releases between them: every
 * connection-level increment is either granted or withheld (never lost or doubled), a hold gives
 * no more than it owes, resets and a server's trailers reach the inbound messages, and a walk
 * never throws.
 */
class ConnectionWindowFuzzTest {
  @FuzzTest
  void everyIncrementIsGrantedOrWithheldOnce(FuzzedDataProvider data) {
    InboundMessages inbound = new InboundMessages(1000);
    ByteBuf open = Unpooled.buffer();
    for (int stream = 1; stream <= 7; stream += 2) {
      open.writeMedium(0).writeByte(0x1).writeByte(0x4).writeInt(stream);
      open.writeMedium(5).writeByte(0).writeByte(0).writeInt(stream).writeByte(0).writeInt(100);
    }
    inbound.read(open);
    open.release();
    ConnectionWindow window = new ConnectionWindow(inbound);
    long increments = ConnectionWindow.INITIAL_WINDOW_BYTES;
    long released = 0;
    boolean[] reset = new boolean[8];
    ByteBuf pending = Unpooled.buffer();
    boolean server = data.consumeBoolean();
    if (!server) {
      pending.writeBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    }
    try {
      int steps = data.consumeInt(0, 60);
      for (int s = 0; s < steps; s++) {
        switch (data.consumeInt(0, 7)) {
          case 0: {
            int inc = data.consumeInt(1, 1 << 20);
            pending.writeMedium(4).writeByte(0x8).writeByte(0).writeInt(0).writeInt(inc);
            increments += inc;
            break;
          }
          case 1: {
            int stream = 1 + 2 * data.consumeInt(0, 3);
            pending.writeMedium(4).writeByte(0x3).writeByte(0).writeInt(stream).writeInt(8);
            reset[stream] = true;
            break;
          }
          case 2: {
            int len = data.consumeInt(0, 100);
            int type = data.pickValue(new int[] {0x0, 0x1, 0x4, 0x6, 0x8, 0x9});
            int stream = type == 0x8 ? 1 + 2 * data.consumeInt(0, 3) : data.consumeInt(0, 9);
            int flags = data.consumeInt(0, 255);
            pending.writeMedium(len).writeByte(type).writeByte(flags).writeInt(stream)
                .writeZero(len);
            if (server && type == 0x1 && (flags & 0x1) != 0 && stream % 2 == 1 && stream < 8) {
              reset[stream] = true; // trailers: the call is over
            }
            break;
          }
          case 3:
            window.hold(data.consumeLong(-10, 1 << 21));
            break;
          case 4:
            window.unhold();
            break;
          case 5:
          case 6: {
            // Writes what is pending: whole, or cut anywhere.
            while (pending.isReadable()) {
              int n = data.consumeBoolean() ? pending.readableBytes()
                  : Math.min(pending.readableBytes(), data.consumeInt(1, 20));
              ByteBuf out = pending.readRetainedSlice(n);
              try {
                window.write(out);
              } finally {
                out.release();
              }
            }
            pending.clear();
            break;
          }
          default: {
            long withheldBefore = window.withheldBytes();
            ByteBuf update = window.release(UnpooledByteBufAllocator.DEFAULT);
            if (update != null) {
              int inc = update.getInt(9);
              assertTrue(inc > 0 && inc <= withheldBefore);
              assertEquals(0, update.getInt(5));
              released += inc;
              update.release();
            }
            break;
          }
        }
        if (!pending.isReadable()) {
          assertEquals(increments, window.granted() + window.withheldBytes(),
              "released " + released);
        }
      }
      if (pending.isReadable()) {
        window.write(pending);
      }
      assertEquals(increments, window.granted() + window.withheldBytes());
      int expected = 0;
      for (int stream = 1; stream <= 7; stream += 2) {
        expected += reset[stream] ? 0 : 1;
      }
      assertEquals(expected, inbound.incompleteMessages());
    } finally {
      pending.release();
    }
  }
}
