package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY44;
import static io.pinless.alts.RecordChannels.concat;
import static io.pinless.alts.RecordChannels.direct;
import static io.pinless.alts.RecordChannels.drainOutbound;
import static io.pinless.alts.RecordChannels.feed;
import static io.pinless.alts.RecordChannels.pattern;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.alts.internal.StockAltsPeer;
import io.netty.buffer.ByteBuf;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.alts.RecordChannels.Capture;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.TreeSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Round trips against grpc-alts's own frame protector (the stock peer), both directions, at the
 * frame sizes grpc-java uses (16 KiB by default, 128 KiB when negotiated).
 */
class StockInteropTest {

  /** A message set that fills frames, leaves partial ones and includes tiny writes. */
  private static byte[][] messages(int max) {
    return new byte[][] {
      pattern(5, 1), pattern(max - 24, 2), pattern(max + 3, 3), pattern(1, 4), pattern(2 * max, 5)
    };
  }

  /**
   * Read sizes: 1 to 64 bytes, then primes and sizes around the header, the frame size and the
   * whole stream (every size from 1 to a 400 KiB whole would be 10^11 byte copies).
   */
  private static TreeSet<Integer> readSizes(int max, int whole) {
    TreeSet<Integer> sizes = new TreeSet<>();
    for (int i = 1; i <= 64; i++) {
      sizes.add(i);
    }
    for (int s : new int[] {97, 1021, 4093, 8191, max - 1, max, max + 1, 2 * max - 1, whole - 1, whole}) {
      if (s >= 1 && s <= whole) {
        sizes.add(s);
      }
    }
    return sizes;
  }

  @ParameterizedTest
  @ValueSource(ints = {16384, 131072})
  void stockClientToPinlessServerAtManyReadSizes(int max) throws Exception {
    byte[][] messages = messages(max);
    byte[] expected = concat(messages);
    StockAltsPeer stock = new StockAltsPeer(KEY44, true, max);
    byte[] frames = stock.protect(messages);
    stock.destroy();
    for (int chunk : readSizes(max, frames.length)) {
      Capture capture = new Capture();
      AltsRecordDecoder decoder = new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, false, max);
      EmbeddedChannel ch = new EmbeddedChannel(decoder, capture);
      feed(ch, frames, chunk);
      assertTrue(capture.errors.isEmpty(), capture.errors::toString);
      assertArrayEquals(expected, capture.bytes(), "read size " + chunk);
      assertEquals(0, decoder.heldBytes());
      ch.finishAndReleaseAll();
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {16384, 131072})
  void pinlessClientToStockServerAtManyReadSizes(int max) throws Exception {
    byte[][] messages = messages(max);
    byte[] expected = concat(messages);
    EmbeddedChannel enc =
        new EmbeddedChannel(new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, max));
    for (byte[] m : messages) {
      enc.write(direct(m));
    }
    enc.flush();
    byte[] frames = drainOutbound(enc);
    enc.finishAndReleaseAll();
    for (int chunk : readSizes(max, frames.length)) {
      StockAltsPeer stock = new StockAltsPeer(KEY44, false, max);
      ByteArrayOutputStream got = new ByteArrayOutputStream();
      for (int i = 0; i < frames.length; i += chunk) {
        got.writeBytes(
            stock.unprotect(Arrays.copyOfRange(frames, i, Math.min(frames.length, i + chunk))));
      }
      stock.destroy();
      assertArrayEquals(expected, got.toByteArray(), "read size " + chunk);
    }
  }

  @org.junit.jupiter.api.Test
  void bothDirectionsInterleavedAcrossTheRekeyBoundary() throws Exception {
    int max = 16384;
    // 66,000 records each way, alternating, so both directions derive their second key.
    StockAltsPeer stockServer = new StockAltsPeer(KEY44, false, max);
    EmbeddedChannel pinlessClient =
        new EmbeddedChannel(
            new AltsRecordEncoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, max),
            new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, true, max));
    Capture capture = new Capture();
    pinlessClient.pipeline().addLast(capture);
    for (int i = 0; i < 66_000; i++) {
      byte[] ping = {(byte) i, (byte) (i >> 8)};
      pinlessClient.writeOutbound(direct(ping));
      ByteBuf frame = pinlessClient.readOutbound();
      byte[] wire = new byte[frame.readableBytes()];
      frame.readBytes(wire).release();
      assertArrayEquals(ping, stockServer.unprotect(wire), "ping " + i);
      pinlessClient.writeInbound(direct(stockServer.protect(new byte[] {(byte) ~i})));
    }
    assertTrue(capture.errors.isEmpty(), capture.errors::toString);
    byte[] pongs = capture.bytes();
    assertEquals(66_000, pongs.length);
    for (int i = 0; i < pongs.length; i++) {
      assertEquals((byte) ~i, pongs[i], "pong " + i);
    }
    stockServer.destroy();
    pinlessClient.finishAndReleaseAll();
  }
}
