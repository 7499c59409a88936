package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY44;
import static io.pinless.alts.RecordChannels.encode;
import static io.pinless.alts.RecordChannels.pattern;
import static io.pinless.alts.RecordChannels.putIntLE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.alts.RecordChannels.Capture;
import io.pinless.testing.LeakDetection;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A seeded, bounded mutation fuzzer for the decoder: valid record streams are mutated (bit flips,
 * hostile lengths and types, truncation, splices, duplicated records) and fed in random read
 * sizes. Whatever the input: no exception other than {@link AltsRecordException} reaches the
 * pipeline, the plaintext delivered is a prefix of the real plaintext, nothing is held after a
 * failure or close, and nothing leaks. The seed is printed on failure; {@code
 * -Dpinless.fuzz.iterations=N} runs longer.
 */
class AltsRecordDecoderFuzzTest {
  private static final int MAX = 4096;
  private static final long SEED = Long.getLong("pinless.fuzz.seed", 0x5eed_a175L);
  private static final int ITERATIONS = Integer.getInteger("pinless.fuzz.iterations", 3000);

  @Test
  void survivesMutatedStreams() throws InterruptedException {
    SplittableRandom random = new SplittableRandom(SEED);
    byte[][] messages = new byte[6][];
    for (int i = 0; i < messages.length; i++) {
      messages[i] = pattern(random.nextInt(0, 2 * MAX), i);
    }
    byte[] plaintext = RecordChannels.concat(messages);
    byte[] valid = encode(ALTSRP_GCM_AES128_REKEY, KEY44, true, MAX, messages);
    int failures = 0;
    for (int iteration = 0; iteration < ITERATIONS; iteration++) {
      byte[] input = mutate(valid, random);
      Capture capture = new Capture();
      AltsRecordDecoder decoder = new AltsRecordDecoder(ALTSRP_GCM_AES128_REKEY, KEY44, false, MAX);
      EmbeddedChannel ch = new EmbeddedChannel(decoder, capture);
      int i = 0;
      while (i < input.length && ch.isOpen()) {
        int n = Math.min(input.length - i, 1 + random.nextInt(random.nextBoolean() ? 16 : 3 * MAX));
        RecordChannels.feed(ch, Arrays.copyOfRange(input, i, i + n), n);
        i += n;
      }
      ch.close();
      String where = "seed " + SEED + " iteration " + iteration;
      for (Throwable t : capture.errors) {
        assertTrue(t instanceof AltsRecordException, where + ": " + t);
      }
      failures += capture.errors.isEmpty() ? 0 : 1;
      byte[] got = capture.bytes();
      assertTrue(got.length <= plaintext.length, where);
      // Records authenticate only in order under their own counter, so whatever survives a
      // mutation is a prefix of the real plaintext.
      assertTrue(
          Arrays.equals(got, 0, got.length, plaintext, 0, got.length),
          where + ": delivered bytes that are not a prefix of the plaintext");
      assertEquals(0, decoder.heldBytes(), where);
      ch.finishAndReleaseAll();
    }
    assertTrue(failures > ITERATIONS / 2, "the mutator should break most streams: " + failures);
    LeakDetection.collectAndDetect();
    LeakDetection.assertNoLeaks("fuzz seed " + SEED);
  }

  private static byte[] mutate(byte[] valid, SplittableRandom random) {
    byte[] b = valid.clone();
    switch (random.nextInt(7)) {
      case 0: // flip bits
        for (int k = 1 + random.nextInt(3); k > 0; k--) {
          b[random.nextInt(b.length)] ^= (byte) (1 << random.nextInt(8));
        }
        return b;
      case 1: // a hostile length at a record boundary or anywhere
        putIntLE(b, boundary(b, random), random.nextBoolean() ? random.nextLong(1L << 32) : random.nextInt(40));
        return b;
      case 2: // a hostile type
        putIntLE(b, boundary(b, random) + 4, random.nextLong(1L << 32));
        return b;
      case 3: // truncated
        return Arrays.copyOf(b, random.nextInt(b.length));
      case 4: // a splice of two places
        int cut = random.nextInt(b.length);
        int from = random.nextInt(b.length);
        byte[] spliced = Arrays.copyOf(b, cut + b.length - from);
        System.arraycopy(b, from, spliced, cut, b.length - from);
        return spliced;
      case 5: // random garbage appended to a valid stream
        byte[] longer = Arrays.copyOf(b, b.length + 1 + random.nextInt(64));
        for (int i = b.length; i < longer.length; i++) {
          longer[i] = (byte) random.nextInt(256);
        }
        return longer;
      default: // a whole valid stream (the control)
        return b;
    }
  }

  /** The offset of a random record header in a valid stream (scanning its lengths). */
  private static int boundary(byte[] b, SplittableRandom random) {
    int offset = 0;
    int pick = random.nextInt(6);
    for (int k = 0; k < pick && offset + 8 <= b.length; k++) {
      long length = (b[offset] & 0xffL) | (b[offset + 1] & 0xffL) << 8
          | (b[offset + 2] & 0xffL) << 16 | (b[offset + 3] & 0xffL) << 24;
      if (offset + 4 + length + 8 > b.length) {
        break;
      }
      offset += 4 + (int) length;
    }
    return offset;
  }
}
