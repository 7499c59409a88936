package io.pinless.tls;

import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.util.function.IntSupplier;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLEngineResult.Status;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSession;

/**
 * An engine with TLS 1.3's record shape and no cryptography, its handshake done: a record is
 * the header, the plaintext, the inner content type, zero padding and a 16-byte tag of zeros.
 *
 * <pre>
 *   23 | 3 | 3 | length u16 | plaintext | 23 | 0 ... 0 (padding) | tag[16]
 * </pre>
 *
 * <p>It pads each record it seals by what {@code padding} gives (RFC 8446 5.4: any amount, as long
 * as plaintext and padding stay within 2^14). Unwrapping asks for the room a real engine asks
 * for, the record's length less the tag. Sealing takes at most {@link #wrapLimit} bytes per call,
 * and nothing at all once {@link #sealBudget} bytes were sealed, as an engine that is not ready.
 */
class FakeTls13Engine extends SSLEngine {
  static final int TAG_BYTES = 16;
  private static final int APPLICATION_DATA = 23;
  private static final int ALERT = 21;

  /** Padding of each record sealed. */
  IntSupplier padding = () -> 0;
  /** The most plaintext one wrap takes. */
  int wrapLimit = TlsRecords.MAX_PLAINTEXT_BYTES;
  /** Plaintext this engine seals in all before every wrap takes nothing; -1 for no limit. */
  long sealBudget = -1;
  private boolean outboundDone;
  private boolean closeNotifySent;
  private boolean inboundDone;

  private final SSLSession negotiated = (SSLSession) Proxy.newProxyInstance(
      SSLSession.class.getClassLoader(), new Class<?>[] {SSLSession.class},
      (proxy, method, args) -> switch (method.getName()) {
        case "getProtocol" -> "TLSv1.3";
        case "getCipherSuite" -> "TLS_AES_128_GCM_SHA256";
        case "getPacketBufferSize" ->
            TlsRecords.HEADER_BYTES + TlsRecords.MAX_PLAINTEXT_BYTES + 256;
        case "getApplicationBufferSize" -> TlsRecords.MAX_PLAINTEXT_BYTES;
        case "isValid" -> true;
        case "hashCode" -> System.identityHashCode(proxy);
        case "equals" -> proxy == args[0];
        case "toString" -> "FakeTls13Parameters";
        default -> null;
      });

  /**
   * A record of {@code plaintext} padded by {@code pad} bytes, as the peer's engine would seal it.
   */
  static byte[] record(byte[] plaintext, int pad) {
    return record(APPLICATION_DATA, plaintext, pad);
  }

  private static byte[] record(int type, byte[] plaintext, int pad) {
    int length = plaintext.length + 1 + pad + TAG_BYTES;
    ByteBuffer record = ByteBuffer.allocate(TlsRecords.HEADER_BYTES + length);
    record.put((byte) APPLICATION_DATA).put((byte) 3).put((byte) 3).putShort((short) length);
    record.put(plaintext).put((byte) type);
    return record.array(); // padding and tag are zeros
  }

  @Override
  public SSLEngineResult wrap(ByteBuffer[] srcs, int offset, int length, ByteBuffer dst)
      throws SSLException {
    if (outboundDone) {
      if (closeNotifySent) {
        return result(Status.CLOSED, 0, 0);
      }
      byte[] alert = record(ALERT, new byte[] {1, 0}, 0);
      if (dst.remaining() < alert.length) {
        return result(Status.BUFFER_OVERFLOW, 0, 0);
      }
      dst.put(alert);
      closeNotifySent = true;
      return result(Status.CLOSED, 0, alert.length);
    }
    long available = 0;
    for (int i = offset; i < offset + length; i++) {
      available += srcs[i].remaining();
    }
    int take = (int) Math.min(available, wrapLimit);
    if (sealBudget >= 0) {
      take = (int) Math.min(take, sealBudget);
    }
    if (take == 0) {
      return result(Status.OK, 0, 0);
    }
    int pad = padding.getAsInt();
    if (dst.remaining() < TlsRecords.HEADER_BYTES + take + 1 + pad + TAG_BYTES) {
      return result(Status.BUFFER_OVERFLOW, 0, 0);
    }
    byte[] plaintext = new byte[take];
    int at = 0;
    for (int i = offset; i < offset + length && at < take; i++) {
      int n = Math.min(srcs[i].remaining(), take - at);
      srcs[i].get(plaintext, at, n);
      at += n;
    }
    byte[] record = record(plaintext, pad);
    dst.put(record);
    if (sealBudget >= 0) {
      sealBudget -= take;
    }
    return result(Status.OK, take, record.length);
  }

  @Override
  public SSLEngineResult unwrap(ByteBuffer src, ByteBuffer[] dsts, int offset, int length)
      throws SSLException {
    if (inboundDone) {
      return result(Status.CLOSED, 0, 0);
    }
    if (src.remaining() < TlsRecords.HEADER_BYTES) {
      return result(Status.BUFFER_UNDERFLOW, 0, 0);
    }
    int start = src.position();
    int recordLength = src.getShort(start + 3) & 0xffff;
    if (src.remaining() < TlsRecords.HEADER_BYTES + recordLength) {
      return result(Status.BUFFER_UNDERFLOW, 0, 0);
    }
    if (src.get(start) != APPLICATION_DATA || recordLength < 1 + TAG_BYTES) {
      throw new SSLException("not a protected record");
    }
    int end = start + TlsRecords.HEADER_BYTES + recordLength - TAG_BYTES;
    int typeAt = end - 1;
    while (typeAt > start + TlsRecords.HEADER_BYTES && src.get(typeAt) == 0) {
      typeAt--;
    }
    int type = src.get(typeAt);
    int plaintextBytes = typeAt - start - TlsRecords.HEADER_BYTES;
    if (type == 0 || plaintextBytes > TlsRecords.MAX_PLAINTEXT_BYTES) {
      throw new SSLException("bad inner plaintext");
    }
    long room = 0;
    for (int i = offset; i < offset + length; i++) {
      room += dsts[i].remaining();
    }
    if (room < recordLength - TAG_BYTES) {
      return result(Status.BUFFER_OVERFLOW, 0, 0);
    }
    int consumed = TlsRecords.HEADER_BYTES + recordLength;
    if (type == ALERT) {
      src.position(start + consumed);
      inboundDone = true;
      return result(Status.CLOSED, consumed, 0);
    }
    ByteBuffer plaintext = src.duplicate();
    plaintext.position(start + TlsRecords.HEADER_BYTES).limit(typeAt);
    for (int i = offset; i < offset + length && plaintext.hasRemaining(); i++) {
      int n = Math.min(dsts[i].remaining(), plaintext.remaining());
      ByteBuffer piece = plaintext.duplicate();
      piece.limit(piece.position() + n);
      dsts[i].put(piece);
      plaintext.position(plaintext.position() + n);
    }
    src.position(start + consumed);
    return result(Status.OK, consumed, plaintextBytes);
  }

  private static SSLEngineResult result(Status status, int consumed, int produced) {
    return new SSLEngineResult(status, HandshakeStatus.NOT_HANDSHAKING, consumed, produced);
  }

  @Override
  public Runnable getDelegatedTask() {
    return null;
  }

  @Override
  public void closeInbound() {
    inboundDone = true;
  }

  @Override
  public boolean isInboundDone() {
    return inboundDone;
  }

  @Override
  public void closeOutbound() {
    outboundDone = true;
  }

  @Override
  public boolean isOutboundDone() {
    return outboundDone && closeNotifySent;
  }

  @Override
  public String[] getSupportedCipherSuites() {
    return new String[] {"TLS_AES_128_GCM_SHA256"};
  }

  @Override
  public String[] getEnabledCipherSuites() {
    return getSupportedCipherSuites();
  }

  @Override
  public void setEnabledCipherSuites(String[] suites) {}

  @Override
  public String[] getSupportedProtocols() {
    return new String[] {"TLSv1.3"};
  }

  @Override
  public String[] getEnabledProtocols() {
    return getSupportedProtocols();
  }

  @Override
  public void setEnabledProtocols(String[] protocols) {}

  @Override
  public SSLSession getSession() {
    return negotiated;
  }

  @Override
  public void beginHandshake() {}

  @Override
  public HandshakeStatus getHandshakeStatus() {
    return HandshakeStatus.NOT_HANDSHAKING;
  }

  @Override
  public void setUseClientMode(boolean mode) {}

  @Override
  public boolean getUseClientMode() {
    return true;
  }

  @Override
  public void setNeedClientAuth(boolean need) {}

  @Override
  public boolean getNeedClientAuth() {
    return false;
  }

  @Override
  public void setWantClientAuth(boolean want) {}

  @Override
  public boolean getWantClientAuth() {
    return false;
  }

  @Override
  public void setEnableSessionCreation(boolean flag) {}

  @Override
  public boolean getEnableSessionCreation() {
    return false;
  }

  @Override
  public String getApplicationProtocol() {
    return "h2";
  }
}
