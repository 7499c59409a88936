package io.pinless.http2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Message progress read at any split of the bytes equals a plain reference over whole frames of
 * random streams opened by HEADERS (gRPC messages cut anywhere, padding, END_STREAM, resets), and
 * raw bytes at any split give the same counts as whole and never throw.
 */
class InboundMessagesFuzzTest {
  private static final long LIMIT = 200;
  private static final int[] STREAMS = {1, 3, 5};

  /** One stream's messages as the reference sees them. */
  private static final class Ref {
    /** Body bytes (prefixes and messages) of the current message read so far. */
    int prefixBytes;
    long length;
    long left;

    boolean incomplete() {
      return prefixBytes > 0 && (prefixBytes < 5 || left > 0);
    }

    long remaining() {
      return left + 5 - prefixBytes;
    }
  }

  @FuzzTest
  void progressEqualsAReferenceAtAnySplit(FuzzedDataProvider data) {
    boolean raw = data.consumeBoolean();
    ByteBuf wire = Unpooled.buffer();
    Map<Integer, Ref> refs = new HashMap<>();
    long dataBytes = 0;
    try {
      if (raw) {
        wire.writeBytes(data.consumeBytes(4096));
      } else {
        dataBytes = frames(data, wire, refs);
      }
      InboundMessages whole = new InboundMessages(LIMIT);
      whole.read(wire);
      InboundMessages split = new InboundMessages(LIMIT);
      int pos = 0;
      while (pos < wire.writerIndex()) {
        int n = Math.min(wire.writerIndex() - pos, data.consumeInt(1, 64));
        split.read(wire.slice(pos, n));
        pos += n;
      }
      assertEquals(whole.dataBytes(), split.dataBytes());
      assertEquals(whole.pendingFrameBytes(), split.pendingFrameBytes());
      assertEquals(whole.remainingBytes(), split.remainingBytes());
      assertEquals(whole.incompleteMessages(), split.incompleteMessages());
      assertTrue(whole.pendingFrameBytes() >= 0);
      if (!raw) {
        long remaining = 0;
        int incomplete = 0;
        for (Ref r : refs.values()) {
          if (r.incomplete()) {
            incomplete++;
            if (r.prefixBytes < 5 || r.length <= LIMIT) {
              remaining += r.remaining();
            }
          }
        }
        assertEquals(dataBytes, whole.dataBytes());
        assertEquals(incomplete, whole.incompleteMessages());
        assertEquals(remaining, whole.remainingBytes());
        assertEquals(remaining == 0 && incomplete == 0, whole.pendingFrameBytes() == 0
            && whole.incompleteMessages() == 0);
      }
    } finally {
      wire.release();
    }
  }

  /** Writes random frames to {@code wire}, tracking the reference; returns the DATA bytes. */
  private static long frames(FuzzedDataProvider data, ByteBuf wire, Map<Integer, Ref> refs) {
    long dataBytes = 0;
    // Streams opened by HEADERS and not yet closed: DATA counts only on these.
    Set<Integer> open = new HashSet<>();
    int count = data.consumeInt(0, 40);
    for (int f = 0; f < count; f++) {
      int stream = STREAMS[data.consumeInt(0, STREAMS.length - 1)];
      int kind = data.consumeInt(0, 9);
      if (kind == 0) {
        wire.writeMedium(4).writeByte(0x3).writeByte(0).writeInt(stream).writeInt(8);
        refs.remove(stream);
        open.remove(stream);
        continue;
      }
      if (kind == 1) {
        int len = data.consumeInt(0, 40);
        int type = data.consumeInt(1, 9);
        wire.writeMedium(len).writeByte(type).writeByte(0).writeInt(stream).writeZero(len);
        if (type == 0x3) {
          refs.remove(stream);
          open.remove(stream);
        } else if (type == 0x1) {
          open.add(stream);
        }
        continue;
      }
      if (open.add(stream)) {
        wire.writeMedium(0).writeByte(0x1).writeByte(0x4).writeInt(stream);
      }
      Ref ref = refs.computeIfAbsent(stream, s -> new Ref());
      ByteBuf body = Unpooled.buffer();
      int bodyBytes = data.consumeInt(0, 300);
      for (int i = 0; i < bodyBytes; i++) {
        if (ref.prefixBytes < 5) {
          int b = ref.prefixBytes == 0 ? 0 : ref.prefixBytes < 3 ? 0 : data.consumeInt(0, 255);
          if (ref.prefixBytes == 3) {
            b &= 1; // lengths up to 511: some over the limit
          }
          body.writeByte(b);
          if (ref.prefixBytes > 0) {
            ref.length = ref.length << 8 | b;
          }
          if (++ref.prefixBytes == 5) {
            ref.left = ref.length;
          }
        } else {
          body.writeByte(0x5a);
          ref.left--;
        }
        if (ref.prefixBytes == 5 && ref.left == 0) {
          ref.prefixBytes = 0;
          ref.length = 0;
        }
      }
      boolean padded = data.consumeBoolean();
      int pad = padded ? data.consumeInt(0, 255) : 0;
      boolean end = data.consumeInt(0, 5) == 0;
      int length = body.readableBytes() + (padded ? 1 + pad : 0);
      wire.writeMedium(length).writeByte(0).writeByte((end ? 0x1 : 0) | (padded ? 0x8 : 0))
          .writeInt(stream);
      if (padded) {
        wire.writeByte(pad);
      }
      wire.writeBytes(body).writeZero(pad);
      body.release();
      dataBytes += length;
      if (end) {
        refs.remove(stream);
        open.remove(stream);
      }
    }
    return dataBytes;
  }
}
