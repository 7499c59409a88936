package io.pinless.alts;

import io.netty.buffer.ByteBuf;
import java.nio.ByteBuffer;

/**
 * The ALTS frame layout and the checks every receiver makes on a header.
 *
 * <pre>
 * +----------------+----------------+------------------------+-----------+
 * | length u32 LE  | type u32 LE =6 | ciphertext (length-20) | tag (16)  |
 * +----------------+----------------+------------------------+-----------+
 *  \______________/ \____________________________________________________/
 *    4 bytes          length bytes: a frame is 4 + length bytes in all
 * </pre>
 *
 * The header is not authenticated, so it is checked before anything is sized from it.
 */
final class AltsFrames {
  /** Bytes of the length field. */
  static final int LENGTH_BYTES = 4;
  /** Bytes of the length and type fields together. */
  static final int HEADER_BYTES = 8;
  /** The only frame type ALTS defines: a protected record. */
  static final int TYPE_RECORD = 6;
  /** Bytes a frame carries besides its plaintext: length, type and tag. */
  static final int OVERHEAD_BYTES = HEADER_BYTES + AesGcm.TAG_BYTES;
  /** The smallest legal length field: type plus tag around an empty ciphertext. */
  static final int MIN_LENGTH = 4 + AesGcm.TAG_BYTES;
  /** 1 MiB: the largest frame any ALTS implementation accepts. */
  static final int MAX_FRAME_BYTES = 1 << 20;
  /** The smallest maximum frame size that still carries one plaintext byte per frame. */
  static final int MIN_FRAME_BYTES = OVERHEAD_BYTES + 1;

  private AltsFrames() {}

  /**
   * Checks a maximum frame size given by a caller (or a handshaker).
   *
   * @throws IllegalArgumentException if it is outside [{@value #MIN_FRAME_BYTES}, 1 MiB]
   */
  static int checkMaxFrameSize(int maxFrameSize) {
    if (maxFrameSize < MIN_FRAME_BYTES || maxFrameSize > MAX_FRAME_BYTES) {
      throw new IllegalArgumentException(
          "maxFrameSize " + maxFrameSize + " not in [" + MIN_FRAME_BYTES + ", " + MAX_FRAME_BYTES
              + "]");
    }
    return maxFrameSize;
  }

  /**
   * Checks the length and type fields of a frame header and returns the length (the frame is
   * {@code 4 + length} bytes).
   *
   * @throws AltsRecordException if the length is below 20, the frame exceeds {@code
   *     maxFrameSize}, or the type is not 6
   */
  static int checkHeader(long length, long type, int maxFrameSize) {
    if (length < MIN_LENGTH) {
      throw new AltsRecordException(
          AltsRecordException.Reason.LENGTH_TOO_SMALL,
          "record length " + length + " is below the minimum " + MIN_LENGTH);
    }
    if (LENGTH_BYTES + length > maxFrameSize) {
      throw new AltsRecordException(
          AltsRecordException.Reason.LENGTH_TOO_LARGE,
          "record frame of " + (LENGTH_BYTES + length) + " bytes exceeds the maximum frame size "
              + maxFrameSize);
    }
    if (type != TYPE_RECORD) {
      throw new AltsRecordException(
          AltsRecordException.Reason.BAD_TYPE,
          "record type 0x" + Long.toHexString(type) + " is not 0x6");
    }
    return (int) length;
  }

  /**
   * A view of bytes {@code [index, index + length)} of {@code buf} as one NIO buffer, without a
   * copy when the buffer is contiguous, and without a new object when the buffer (or, for a slice
   * or duplicate, the buffer under it) keeps a reusable internal view: a slice's bytes are found
   * in the buffer under it from the two memory addresses. The view is only valid until the next
   * call for the same buffer or any buffer sharing its memory: two views needed at once must be of
   * buffers that do not share one (a frame and the buffer its plaintext goes to never do).
   *
   * @param buf borrowed: indexes are not moved
   */
  static ByteBuffer view(ByteBuf buf, int index, int length) {
    if (buf.nioBufferCount() != 1) {
      return buf.nioBuffer(index, length);
    }
    if (buf.hasMemoryAddress()) {
      ByteBuf root = buf;
      for (ByteBuf under = root.unwrap();
          under != null && under.hasMemoryAddress() && under.nioBufferCount() == 1;
          under = under.unwrap()) {
        root = under;
      }
      if (root != buf) {
        long offset = buf.memoryAddress() - root.memoryAddress();
        return root.internalNioBuffer((int) offset + index, length);
      }
    }
    return buf.internalNioBuffer(index, length);
  }

  /**
   * Whether {@code length} bytes from {@code out}'s index 0 end exactly where {@code in}'s
   * readable bytes begin in memory; false when either has no memory address.
   *
   * @param out borrowed: only its address is read
   * @param in borrowed: only its address and reader index are read
   */
  static boolean endsAt(ByteBuf out, int length, ByteBuf in) {
    return out.hasMemoryAddress() && in.hasMemoryAddress()
        && out.memoryAddress() + length == in.memoryAddress() + in.readerIndex();
  }
}
