package io.pinless.alts;

import io.netty.util.concurrent.FastThreadLocal;

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
 *
 * <p>{@link RecordCipher} extends it, so that a direction's counter and keys are one object (an
 * idle connection has four directions; a counter object of its own cost 16 bytes more each).
 */
class AltsCounter {
  /** Per thread: the 12 bytes {@link #current()} returns (a connection keeps no array). */
  private static final FastThreadLocal<byte[]> BYTES =
      new FastThreadLocal<>() {
        @Override
        protected byte[] initialValue() {
          return new byte[12];
        }
      };

  /** Counter bytes 0..7, little endian. */
  private long low;
  /** Counter bytes 8..11, little endian (byte 11 carries the direction bit). */
  private int high;
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
      high = 0x80 << 24;
    }
  }

  /**
   * The counter of the next record, in an array of this thread's that the next call on the thread
   * overwrites; the caller must not modify it.
   *
   * @throws AltsRecordException if the counter has overflowed
   */
  byte[] current() {
    if (spent) {
      throw new AltsRecordException(
          AltsRecordException.Reason.COUNTER_OVERFLOW,
          "record counter overflowed after 2^" + (8 * overflowBytes) + " records");
    }
    byte[] bytes = BYTES.get();
    for (int i = 0; i < 8; i++) {
      bytes[i] = (byte) (low >>> (8 * i));
    }
    for (int i = 0; i < 4; i++) {
      bytes[8 + i] = (byte) (high >>> (8 * i));
    }
    return bytes;
  }

  /** Advances to the next record; marks the counter spent when the record number wraps. */
  void increment() {
    if (overflowBytes <= 8) {
      long mask = overflowBytes == 8 ? -1L : (1L << (8 * overflowBytes)) - 1;
      long next = (low + 1) & mask;
      low = (low & ~mask) | next;
      spent = next == 0;
      return;
    }
    if (++low != 0) {
      return;
    }
    int mask = (1 << (8 * (overflowBytes - 8))) - 1;
    int next = (high + 1) & mask;
    high = (high & ~mask) | next;
    spent = next == 0;
  }

  /** Sets the counter to {@code bytes}, for tests that start near overflow. */
  void set(byte[] bytes) {
    if (bytes.length != 12) {
      throw new IllegalArgumentException("counter length " + bytes.length + " is not 12");
    }
    low = 0;
    high = 0;
    for (int i = 0; i < 8; i++) {
      low |= (bytes[i] & 0xffL) << (8 * i);
    }
    for (int i = 0; i < 4; i++) {
      high |= (bytes[8 + i] & 0xff) << (8 * i);
    }
    spent = false;
  }

  /** True once the counter has overflowed. */
  boolean isSpent() {
    return spent;
  }
}
