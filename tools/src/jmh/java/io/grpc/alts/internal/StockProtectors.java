package io.grpc.alts.internal;

import io.grpc.netty.shaded.io.netty.buffer.ByteBufAllocator;
import java.lang.reflect.Field;
import java.util.Arrays;

/**
 * Benchmark scope: builds grpc-alts's own record layer ({@link AltsTsiFrameProtector} over the
 * REKEY {@link AltsChannelCrypter}) for the JMH benchmarks, which live outside this package. It
 * sits in grpc-alts's package only because the crypter's constructor is package-private.
 */
public final class StockProtectors {
  private StockProtectors() {}

  /**
   * A stock protector that seals (and could open) records.
   *
   * @param key44 the 44-byte REKEY key
   * @param isClient true for the client end, whose records leave counter byte 11 clear
   * @param maxFrameBytes the largest frame sealed, 4 + length; the protector caps it at 1 MiB
   * @param alloc the allocator the protector's own small buffers come from
   */
  public static AltsTsiFrameProtector protector(
      byte[] key44, boolean isClient, int maxFrameBytes, ByteBufAllocator alloc) {
    return new AltsTsiFrameProtector(
        maxFrameBytes, new AltsChannelCrypter(key44, isClient), alloc);
  }

  /**
   * A stock receiving end whose inbound record counter can be wound back to its start, so that a
   * benchmark can open the same pre-sealed records again and again. Opening a record twice under
   * the same nonce is harmless; only sealing must never repeat one.
   */
  public static final class RewindableReceiver {
    private final AltsTsiFrameProtector protector;
    /** The crypter's live inbound counter; the crypter reads it on every record. */
    private final byte[] inCounter;
    /** The inbound counter as it was before the first record. */
    private final byte[] start;

    RewindableReceiver(byte[] key44, boolean isClient, int maxFrameBytes, ByteBufAllocator alloc) {
      AltsChannelCrypter crypter = new AltsChannelCrypter(key44, isClient);
      this.protector = new AltsTsiFrameProtector(maxFrameBytes, crypter, alloc);
      this.inCounter = liveInCounter(crypter);
      this.start = inCounter.clone();
    }

    /** The protector; use its {@code unprotect} only. */
    public AltsTsiFrameProtector protector() {
      return protector;
    }

    /**
     * Sets the inbound counter back to the first record's. The crypter derives a new key only when
     * counter bytes 2..7 change, so after fewer than 2^16 records this costs a 12-byte copy.
     */
    public void rewind() {
      System.arraycopy(start, 0, inCounter, 0, start.length);
    }

    /** Releases the protector's buffers. */
    public void destroy() {
      protector.destroy();
    }
  }

  /**
   * A stock receiving end for records sealed by the other end.
   *
   * @param key44 the 44-byte REKEY key
   * @param isClient true for the client end, which opens records whose counter byte 11 is 0x80
   * @param maxFrameBytes passed on to the protector (it only bounds what it seals)
   * @param alloc the allocator the protector's own small buffers come from
   */
  public static RewindableReceiver receiver(
      byte[] key44, boolean isClient, int maxFrameBytes, ByteBufAllocator alloc) {
    return new RewindableReceiver(key44, isClient, maxFrameBytes, alloc);
  }

  /** The array behind the crypter's private {@code inCounter} field (final, so never replaced). */
  private static byte[] liveInCounter(AltsChannelCrypter crypter) {
    try {
      Field field = AltsChannelCrypter.class.getDeclaredField("inCounter");
      field.setAccessible(true);
      byte[] counter = (byte[]) field.get(crypter);
      if (counter.length != AltsChannelCrypter.getCounterLength()) {
        throw new IllegalStateException("unexpected inCounter " + Arrays.toString(counter));
      }
      return counter;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(
          "this grpc-alts has no AltsChannelCrypter.inCounter to rewind", e);
    }
  }
}
