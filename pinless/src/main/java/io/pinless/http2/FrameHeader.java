package io.pinless.http2;

import io.netty.buffer.ByteBuf;

/**
 * The HTTP/2 frame header, as pinless's HTTP/2 classes read and write it.
 *
 * <pre>
 *   | length u24 BE | type u8 | flags u8 | R + stream id u31 |   9 bytes, then the payload
 * </pre>
 *
 * <p>Memory: none; it writes into buffers its callers own.
 */
final class FrameHeader {
  /** A frame header's size. */
  static final int BYTES = 9;
  /** The client's connection preface (RFC 9113, 3.4) before its first frame. */
  static final int CLIENT_PREFACE_BYTES = 24;
  static final int TYPE_DATA = 0x0;
  static final int TYPE_HEADERS = 0x1;
  static final int TYPE_RST_STREAM = 0x3;
  static final int TYPE_SETTINGS = 0x4;
  static final int TYPE_WINDOW_UPDATE = 0x8;
  static final int FLAG_END_STREAM = 0x1;
  static final int FLAG_PADDED = 0x8;

  private FrameHeader() {}

  /**
   * Writes a DATA frame header at {@code index} of {@code buf}.
   *
   * @param buf borrowed: its indexes are not moved
   */
  static void setData(ByteBuf buf, int index, int length, int flags, int stream) {
    buf.setMedium(index, length);
    buf.setByte(index + 3, TYPE_DATA);
    buf.setByte(index + 4, flags);
    buf.setInt(index + 5, stream);
  }

  /**
   * Appends a DATA frame header for {@code length} payload bytes.
   *
   * @param to borrowed: its writer index is advanced by 9
   * @return {@code to}
   */
  static ByteBuf writeData(ByteBuf to, int length, int flags, int stream) {
    return to.writeMedium(length).writeByte(TYPE_DATA).writeByte(flags).writeInt(stream);
  }
}
