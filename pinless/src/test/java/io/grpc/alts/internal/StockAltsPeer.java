package io.grpc.alts.internal;

import io.grpc.netty.shaded.io.netty.buffer.ByteBuf;
import io.grpc.netty.shaded.io.netty.buffer.ByteBufAllocator;
import io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator;
import java.io.ByteArrayOutputStream;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Test scope: one end of grpc-alts's own record layer ({@link AltsTsiFrameProtector} over the
 * REKEY crypter, the stock peer), behind byte arrays because it speaks grpc-netty-shaded's
 * buffers. It lives in grpc-alts's package because the crypter's constructor is package-private.
 */
public final class StockAltsPeer {
  private final AltsTsiFrameProtector protector;
  private final ByteBufAllocator alloc = PooledByteBufAllocator.DEFAULT;

  /** A stock end with a 44-byte key and the given maximum frame size. */
  public StockAltsPeer(byte[] key44, boolean isClient, int maxFrameSize) {
    protector =
        new AltsTsiFrameProtector(maxFrameSize, new AltsChannelCrypter(key44, isClient), alloc);
  }

  /** Seals {@code messages} in one flush and returns the frames. */
  public byte[] protect(byte[]... messages) throws GeneralSecurityException {
    List<ByteBuf> in = new ArrayList<>();
    for (byte[] m : messages) {
      in.add(alloc.buffer(m.length).writeBytes(m));
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    protector.protectFlush(
        in,
        frame -> {
          byte[] b = new byte[frame.readableBytes()];
          frame.readBytes(b);
          frame.release();
          out.writeBytes(b);
        },
        alloc);
    return out.toByteArray();
  }

  /** Opens the frames in one read and returns their plaintext (a partial frame waits). */
  public byte[] unprotect(byte[] read) throws GeneralSecurityException {
    ByteBuf in = alloc.buffer(read.length).writeBytes(read);
    List<Object> out = new ArrayList<>();
    try {
      protector.unprotect(in, out, alloc);
    } finally {
      in.release();
    }
    ByteArrayOutputStream plain = new ByteArrayOutputStream();
    for (Object o : out) {
      ByteBuf b = (ByteBuf) o;
      byte[] bytes = new byte[b.readableBytes()];
      b.readBytes(bytes);
      b.release();
      plain.writeBytes(bytes);
    }
    return plain.toByteArray();
  }

  /** Releases what the protector holds. */
  public void destroy() {
    protector.destroy();
  }

  /** The stock limits on the frame size. */
  public static List<Integer> frameSizeLimits() {
    return Collections.unmodifiableList(
        List.of(AltsTsiFrameProtector.getMinFrameSize(), AltsTsiFrameProtector.getMaxFrameSize()));
  }
}
