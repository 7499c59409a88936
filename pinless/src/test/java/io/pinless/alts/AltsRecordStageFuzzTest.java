package io.pinless.alts;

import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128;
import static io.pinless.alts.AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY;
import static io.pinless.alts.RecordChannels.KEY16;
import static io.pinless.alts.RecordChannels.KEY44;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.grpc.StatusRuntimeException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.pinless.alts.RecordChannels.Capture;
import io.pinless.alts.RecordChannels.CloseRecorder;
import io.pinless.connection.ConnectionHandler;
import io.pinless.read.ReadBudget;
import io.pinless.testing.PoolBytes;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import javax.crypto.Cipher;
import javax.crypto.Mac;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * ALTS frames through the record stage as a connection reads them: only typed errors, no buffer
 * left allocated, plaintext equal to a plain reference decoder's, and held bytes within four times
 * the bytes of the cut record received (64 at least) after every read.
 *
 * <p>{@link #randomBytes} feeds raw bytes; {@link #mutatedStreams} builds valid record streams
 * from the fuzzer's bytes and mutates them (flipped bits, lengths, types, cuts, splices). Both cut
 * the stream into reads the fuzzer chooses, through the connection's own read buffers: fresh
 * ones sized by the stage and the cut record's own buffer when the stage offers it.
 */
class AltsRecordStageFuzzTest {
  /** One arena and no thread caches, so live buffers are counted exactly per input. */
  private static final PooledByteBufAllocator ALLOC =
      new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);

  /** The most reads {@link #ringReads} cuts a stream into, past the ones the fuzzer sizes. */
  private static final int MAX_RING_READS = 4096;

  @FuzzTest
  void randomBytes(FuzzedDataProvider data) throws GeneralSecurityException {
    boolean rekey = data.consumeBoolean();
    int max = maxFrameSize(data);
    int[] reads = reads(data);
    check(rekey, max, data.consumeRemainingAsBytes(), reads, 0);
  }

  @FuzzTest
  void mutatedStreams(FuzzedDataProvider data) throws GeneralSecurityException {
    boolean rekey = data.consumeBoolean();
    int max = maxFrameSize(data);
    check(rekey, max, mutatedStream(data, rekey, max), reads(data), 0);
  }

  /**
   * As {@link #mutatedStreams}, read as io_uring reads from a provided-buffer ring: the transport
   * picks every read's buffer, all of the ring's size, tells the stage only its size, and hands
   * the read on as a slice of it.
   */
  @FuzzTest
  void ringReads(FuzzedDataProvider data) throws GeneralSecurityException {
    boolean rekey = data.consumeBoolean();
    int max = maxFrameSize(data);
    int ring = data.consumeBoolean()
        ? data.consumeInt(1, 64 * 1024) : data.consumeInt(64 * 1024, 2 << 20);
    byte[] stream = mutatedStream(data, rekey, max);
    // At most about 4096 reads: each takes a leak-tracked buffer, which costs the harness, not
    // the stage, most of the time.
    ring = Math.max(ring, stream.length / MAX_RING_READS + 1);
    check(rekey, max, stream, reads(data), ring);
  }

  /** A valid record stream of up to five messages, then mutated up to three times. */
  private static byte[] mutatedStream(FuzzedDataProvider data, boolean rekey, int max)
      throws GeneralSecurityException {
    byte[][] messages = new byte[data.consumeInt(0, 5)][];
    for (int i = 0; i < messages.length; i++) {
      messages[i] = RecordChannels.pattern(data.consumeInt(0, Math.min(2 * max, 300_000)), i);
    }
    byte[] stream = RecordChannels.encode(rekey ? ALTSRP_GCM_AES128_REKEY : ALTSRP_GCM_AES128,
        rekey ? KEY44 : KEY16, false, max, messages);
    for (int k = data.consumeInt(0, 3); k > 0 && stream.length > 0; k--) {
      stream = mutate(data, stream);
    }
    return stream;
  }

  private static int maxFrameSize(FuzzedDataProvider data) {
    switch (data.consumeInt(0, 3)) {
      case 0:
        return 16 * 1024;
      case 1:
        return 128 * 1024;
      case 2:
        return data.consumeInt(AltsFrames.MIN_FRAME_BYTES, 8 * 1024);
      default:
        return data.consumeInt(AltsFrames.MIN_FRAME_BYTES, AltsFrames.MAX_FRAME_BYTES);
    }
  }

  /** Read sizes the fuzzer picks; once they run out, reads take what the buffer has room for. */
  private static int[] reads(FuzzedDataProvider data) {
    int[] reads = new int[data.consumeInt(0, 24)];
    for (int i = 0; i < reads.length; i++) {
      // 0: a read that brings nothing, whose buffer the read loop releases unread.
      reads[i] = data.consumeBoolean() ? data.consumeInt(0, 16) : data.consumeInt(1, 300_000);
    }
    return reads;
  }

  private static byte[] mutate(FuzzedDataProvider data, byte[] b) {
    int at = data.consumeInt(0, b.length - 1);
    // Header fields need a whole header to write into.
    switch (data.consumeInt(b.length < 8 ? 3 : 0, 5)) {
      case 0: // a flipped bit
        b[at] ^= (byte) (1 << data.consumeInt(0, 7));
        return b;
      case 1: // a length field at a frame's start
        RecordChannels.putIntLE(b, frameStart(b, at), data.consumeLong(0, 0xffffffffL));
        return b;
      case 2: // a type field at a frame's start
        RecordChannels.putIntLE(b, Math.min(frameStart(b, at) + 4, b.length - 4),
            data.consumeLong(0, 0xffffffffL));
        return b;
      case 3: // cut short
        return Arrays.copyOf(b, at);
      case 4: // a splice of two places
        int from = data.consumeInt(0, b.length - 1);
        byte[] spliced = Arrays.copyOf(b, at + b.length - from);
        System.arraycopy(b, from, spliced, at, b.length - from);
        return spliced;
      default: // bytes inserted
        byte[] extra = data.consumeBytes(data.consumeInt(1, 64));
        byte[] longer = new byte[b.length + extra.length];
        System.arraycopy(b, 0, longer, 0, at);
        System.arraycopy(extra, 0, longer, at, extra.length);
        System.arraycopy(b, at, longer, at + extra.length, b.length - at);
        return longer;
    }
  }

  /** The start of the frame holding byte {@code at} of a valid stream (0 if it has no header). */
  private static int frameStart(byte[] b, int at) {
    int start = 0;
    while (start + 8 <= b.length) {
      long next = start + 4 + u32(b, start);
      if (next > at || next + 8 > b.length) {
        break;
      }
      start = (int) next;
    }
    return Math.min(start, Math.max(0, b.length - 4));
  }

  /**
   * Feeds {@code stream} to a client's stage in {@code reads} and checks the property; with a
   * {@code ring} size above 0, every read's buffer is one of that size the transport picked.
   */
  private static void check(boolean rekey, int max, byte[] stream, int[] reads, int ring)
      throws GeneralSecurityException {
    Reference ref = Reference.decode(rekey, max, stream);
    long liveBefore = PoolBytes.liveBuffers(ALLOC);
    AltsRecordStage stage = new AltsRecordStage(rekey ? ALTSRP_GCM_AES128_REKEY : ALTSRP_GCM_AES128,
        rekey ? KEY44 : KEY16, true, max);
    ConnectionHandler connection =
        new ConnectionHandler(new ReadBudget(Long.MAX_VALUE), false, 48 * 1024);
    connection.install(stage, null);
    Capture capture = new Capture();
    CloseRecorder closer = new CloseRecorder();
    EmbeddedChannel ch = new EmbeddedChannel(closer, connection, capture);
    ch.config().setAllocator(ALLOC);
    RecvByteBufAllocator.Handle handle = ch.config().getRecvByteBufAllocator().newHandle();
    handle.reset(ch.config());
    List<ByteBuf> fed = new ArrayList<>();
    int offset = 0;
    for (int i = 0; offset < stream.length; i++) {
      ByteBuf read;
      if (ring > 0) {
        read = ALLOC.directBuffer(ring, ring);
        handle.attemptedBytesRead(ring);
      } else {
        read = handle.allocate(ALLOC);
      }
      int n = Math.min(stream.length - offset, read.writableBytes());
      if (i < reads.length) {
        n = Math.min(n, reads[i]);
      }
      fed.add(read);
      if (n == 0) {
        read.release();
        continue;
      }
      read.writeBytes(stream, offset, n);
      if (ring > 0) {
        // As io_uring hands a ring's read on: a retained slice of the ring's buffer, no room
        // behind it, the ring's own reference dropped.
        ByteBuf slice = read.retainedSlice(read.readerIndex(), n);
        read.release();
        fed.set(fed.size() - 1, slice);
        read = slice;
        handle.lastBytesRead(n);
      }
      ch.writeInbound(read);
      offset += n;
      int held = stage.heldBytes();
      if (capture.errors.isEmpty()) {
        int received = offset - ref.frameStartAtOrBefore(offset);
        assertTrue(held <= Math.max(64, 4 * received),
            held + " bytes held with " + received + " of the record received");
        if (ring > 0 && read.refCnt() > 0) {
          // Whatever keeps a piece of a ring's read keeps the ring's whole buffer.
          assertTrue(ring <= Math.max(64, 4 * received), "a " + ring
              + "-byte ring buffer kept with " + received + " bytes of the record received");
        }
      } else {
        assertEquals(0, held, "held after a fatal error");
      }
    }
    closer.hold = false;
    ch.close();
    for (Throwable t : capture.errors) {
      Throwable typed = t instanceof StatusRuntimeException ? t.getCause() : t;
      if (!(typed instanceof AltsRecordException)) {
        throw new AssertionError("an error that is not an AltsRecordException", t);
      }
    }
    assertArrayEquals(ref.plaintext, capture.bytes(), "the plaintext differs from the reference");
    assertEquals(ref.end < stream.length ? 1 : 0, capture.errors.size(), capture.errors::toString);
    assertEquals(0, stage.heldBytes());
    ch.finishAndReleaseAll();
    for (ByteBuf read : fed) {
      assertEquals(0, read.refCnt(), "a read buffer is still retained");
    }
    assertEquals(liveBefore, PoolBytes.liveBuffers(ALLOC), "pooled buffers left allocated");
  }

  private static long u32(byte[] b, int at) {
    return (b[at] & 0xffL) | (b[at + 1] & 0xffL) << 8 | (b[at + 2] & 0xffL) << 16
        | (b[at + 3] & 0xffL) << 24;
  }

  /**
   * A plain decoder of a client's view of the server's frames: parses each frame, decrypts it with
   * {@code javax.crypto}, stops at the first bad or incomplete one.
   */
  private static final class Reference {
    final byte[] plaintext;
    /** Where the good frames end. */
    final int end;
    /** The start of each good frame, and {@link #end}. */
    final int[] starts;

    private Reference(byte[] plaintext, int end, int[] starts) {
      this.plaintext = plaintext;
      this.end = end;
      this.starts = starts;
    }

    int frameStartAtOrBefore(int offset) {
      int start = 0;
      for (int s : starts) {
        if (s <= offset) {
          start = s;
        }
      }
      return start;
    }

    static Reference decode(boolean rekey, int max, byte[] stream)
        throws GeneralSecurityException {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      List<Integer> starts = new ArrayList<>();
      int offset = 0;
      byte[] counter = new byte[12];
      counter[11] = (byte) 0x80; // server to client
      while (stream.length - offset >= 8) {
        long length = u32(stream, offset);
        long type = u32(stream, offset + 4);
        if (length < 20 || 4 + length > max || type != 6 || offset + 4 + length > stream.length) {
          break;
        }
        byte[] plain = open(rekey, counter, stream, offset + 8, (int) length - 4);
        if (plain == null) {
          break;
        }
        starts.add(offset);
        out.writeBytes(plain);
        offset += 4 + (int) length;
        increment(counter);
      }
      starts.add(offset);
      return new Reference(out.toByteArray(), offset,
          starts.stream().mapToInt(Integer::intValue).toArray());
    }

    /** @return the plaintext, or null when the tag does not verify */
    private static byte[] open(boolean rekey, byte[] counter, byte[] frame, int at, int bytes)
        throws GeneralSecurityException {
      byte[] key;
      byte[] nonce;
      if (rekey) {
        Mac hmac = Mac.getInstance("HmacSHA256");
        hmac.init(new SecretKeySpec(Arrays.copyOf(KEY44, 32), "HmacSHA256"));
        hmac.update(counter, 2, 6);
        hmac.update((byte) 1);
        key = Arrays.copyOf(hmac.doFinal(), 16);
        nonce = counter.clone();
        for (int i = 0; i < 12; i++) {
          nonce[i] ^= KEY44[32 + i];
        }
      } else {
        key = KEY16;
        nonce = counter;
      }
      Cipher gcm = Cipher.getInstance("AES/GCM/NoPadding", "SunJCE");
      gcm.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key, "AES"),
          new GCMParameterSpec(128, nonce));
      ByteBuffer plain = ByteBuffer.allocate(Math.max(0, bytes - 16));
      try {
        gcm.doFinal(ByteBuffer.wrap(frame, at, bytes), plain);
      } catch (javax.crypto.AEADBadTagException e) {
        return null;
      }
      return plain.array();
    }

    private static void increment(byte[] counter) {
      for (int i = 0; i < 11; i++) {
        if (++counter[i] != 0) {
          return;
        }
      }
    }
  }
}
