package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY44;
import static io.pinless.alts.RecordChannels.direct;
import static io.pinless.alts.RecordChannels.drainOutbound;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.channel.ChannelFuture;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.alts.RecordChannels.Capture;
import io.pinless.alts.RecordChannels.CloseRecorder;
import java.nio.channels.ClosedChannelException;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class AltsRecordCodecTest {
  private static final int MAX = 16384;

  private static byte[] random(int n, long seed) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  /** A channel whose one record entry is a codec for the given end. */
  private static EmbeddedChannel end(boolean isClient, CloseRecorder closer, Capture capture) {
    return new EmbeddedChannel(
        closer, new AltsRecordCodec(ALTSRP_GCM_AES128_REKEY, KEY44, isClient, MAX), capture);
  }

  @Test
  void bothEndsExchangeRecordsThroughOneEntryEach() {
    Capture clientIn = new Capture();
    Capture serverIn = new Capture();
    EmbeddedChannel client = end(true, new CloseRecorder(), clientIn);
    EmbeddedChannel server = end(false, new CloseRecorder(), serverIn);
    assertEquals(1, client.pipeline().names().stream()
        .filter(n -> client.pipeline().get(n) instanceof AltsRecordCodec).count());

    byte[] up = random(3 * MAX + 5, 1);
    byte[] down = random(MAX - 1, 2);
    client.writeOutbound(direct(up));
    server.writeOutbound(direct(down));
    byte[] upFrames = drainOutbound(client);
    byte[] downFrames = drainOutbound(server);
    // Every byte split, to show the decoding half keeps partial records across reads.
    for (int i = 0; i < upFrames.length; i += 1000) {
      server.writeInbound(direct(upFrames, i, Math.min(1000, upFrames.length - i)));
    }
    client.writeInbound(direct(downFrames));

    assertArrayEquals(up, serverIn.bytes());
    assertArrayEquals(down, clientIn.bytes());
    assertTrue(clientIn.errors.isEmpty() && serverIn.errors.isEmpty());
    assertFalse(client.finishAndReleaseAll());
    assertFalse(server.finishAndReleaseAll());
  }

  @Test
  void speaksTheSameRecordsAsTheSeparateHandlers() {
    byte[] message = random(2 * MAX, 3);
    // The codec's client frames, opened by a lone server-side decoder.
    EmbeddedChannel codec = end(true, new CloseRecorder(), new Capture());
    codec.writeOutbound(direct(message));
    Capture fromCodec = new Capture();
    EmbeddedChannel decoder = RecordChannels.decoderChannel(new CloseRecorder(),
        new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, false, MAX), fromCodec);
    decoder.writeInbound(direct(drainOutbound(codec)));
    assertArrayEquals(message, fromCodec.bytes());
    // A lone client-side encoder's frames, opened by the server's codec.
    Capture intoCodec = new Capture();
    EmbeddedChannel server = end(false, new CloseRecorder(), intoCodec);
    server.writeInbound(direct(
        RecordChannels.encode(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, message)));
    assertArrayEquals(message, intoCodec.bytes());
    codec.finishAndReleaseAll();
    decoder.finishAndReleaseAll();
    server.finishAndReleaseAll();
  }

  @Test
  void aForgedRecordIsFatalAndClosesAndDeliversNothingOfIt() {
    Capture capture = new Capture();
    CloseRecorder closer = new CloseRecorder();
    closer.hold = false;
    EmbeddedChannel server = end(false, closer, capture);
    byte[] good = random(100, 4);
    byte[] frames = RecordChannels.encode(
        ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, good, random(100, 5));
    frames[frames.length - 1] ^= 1; // the second record's tag
    server.writeInbound(direct(frames));

    assertArrayEquals(good, capture.bytes(), "the record before the forged one, and no more");
    assertEquals(AltsRecordException.Reason.BAD_TAG, capture.onlyError().reason());
    assertEquals(1, closer.closes);
    assertFalse(server.isOpen());
    server.finishAndReleaseAll();
  }

  @Test
  void removalFailsAndReleasesUnflushedWrites() {
    EmbeddedChannel client = end(true, new CloseRecorder(), new Capture());
    ChannelFuture pending = client.write(direct(random(500, 6)));
    client.pipeline().remove(AltsRecordCodec.class);

    assertTrue(pending.isDone());
    assertInstanceOf(ClosedChannelException.class, pending.cause());
    assertEquals(List.of(), drainOutboundList(client));
    client.finishAndReleaseAll();
  }

  private static List<byte[]> drainOutboundList(EmbeddedChannel ch) {
    byte[] bytes = drainOutbound(ch);
    return bytes.length == 0 ? List.of() : List.of(bytes);
  }
}
