package io.pinless.alts;

/**
 * One direction's record counter: 12 bytes, little endian, starting at zero and incremented once
 * per record. Byte 11 has 0x80 set for server-to-client records. Only the low
 * {@code overflowBytes} bytes count; when they wrap the counter is spent and every later use
 * fails, so a key and nonce pair is never used twice.
 *
 * <pre>
 *   byte  0 .. overflowBytes-1   record number, little endian (5 bytes for AES128, 8 for REKEY)
 *   byte  overflowBytes .. 10    zero
 *   byte  11                     0x80 server-to-client, 0x00 client-to-server
 * </pre>
 */
final class AltsCounter {
  /** The counter value, which is the nonce (before masking) of the next record. */
  private final byte[] value = new byte[12];
  /** How many low bytes carry the record number. */
  private final int overflowBytes;
  /** True once the record number has wrapped: no record may use this counter again. */
  private boolean spent;

  AltsCounter(int overflowBytes, boolean serverToClient) {
    if (overflowBytes < 1 || overflowBytes > 11) {
      throw new IllegalArgumentException("overflowBytes " + overflowBytes + " not in [1, 11]");
    }
    this.overflowBytes = overflowBytes;
    if (serverToClient) {
      value[11] = (byte) 0x80;
    }
  }

  /**
   * The counter of the next record. The array is live: it changes on {@link #increment()}; the
   * caller must not modify it.
   *
   * @throws AltsRecordException if the counter has overflowed
   */
  byte[] current() {
    if (spent) {
      throw new AltsRecordException(
          AltsRecordException.Reason.COUNTER_OVERFLOW,
          "record counter overflowed after 2^" + (8 * overflowBytes) + " records");
    }
    return value;
  }

  /** Advances to the next record; marks the counter spent when the record number wraps. */
  void increment() {
    for (int i = 0; i < overflowBytes; i++) {
      if (++value[i] != 0) {
        return;
      }
    }
    spent = true;
  }

  /** Sets the counter to {@code bytes}, for tests that start near overflow. */
  void set(byte[] bytes) {
    if (bytes.length != 12) {
      throw new IllegalArgumentException("counter length " + bytes.length + " is not 12");
    }
    System.arraycopy(bytes, 0, value, 0, 12);
    spent = false;
  }

  /** True once the counter has overflowed. */
  boolean isSpent() {
    return spent;
  }
}
