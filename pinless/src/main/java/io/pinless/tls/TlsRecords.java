package io.pinless.tls;

import io.grpc.Attributes;
import io.grpc.Grpc;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.security.cert.Certificate;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * The TLS record header (RFC 8446 section 5.1, RFC 5246 section 6.2): type u8, version u16,
 * length u16, then {@code length} bytes. Checked before anything is allocated from it.
 */
final class TlsRecords {
  static final int HEADER_BYTES = 5;
  /** The largest plaintext of one record: 2^14. */
  static final int MAX_PLAINTEXT_BYTES = 1 << 14;
  /** The largest length field any TLS version allows: 2^14 + 2048 (TLS 1.2's ciphertext). */
  static final int MAX_LENGTH = MAX_PLAINTEXT_BYTES + 2048;
  /**
   * What a sealed record adds to its plaintext at most, for sizing writes: header, explicit IV,
   * MAC and padding of the largest suites. The engines need less (22 bytes with TLS 1.3).
   */
  static final int MAX_SEAL_OVERHEAD_BYTES = HEADER_BYTES + 16 + 48 + 256;

  /**
   * What each record of a suite adds to its plaintext at least: TLS 1.3's inner content type and
   * tag; TLS 1.2's explicit nonce and tag for AES-GCM and CCM, the tag alone for ChaCha20-Poly1305;
   * 0 for anything else (a bound that is never too small).
   */
  static int minRecordOverhead(String protocol, String cipherSuite) {
    int tag = cipherSuite.contains("CCM_8") ? 8 : 16;
    if ("TLSv1.3".equals(protocol)) {
      return 1 + tag;
    }
    if ("TLSv1.2".equals(protocol)) {
      if (cipherSuite.contains("_GCM_") || cipherSuite.contains("_CCM")) {
        return 8 + tag;
      }
      if (cipherSuite.contains("CHACHA20_POLY1305")) {
        return tag;
      }
    }
    return 0;
  }

  private static final int CHANGE_CIPHER_SPEC = 20;
  private static final int APPLICATION_DATA = 23;

  private TlsRecords() {}

  /** What the engine has negotiated so far, as the JDK's API names it. */
  private static SSLSession negotiated(SSLEngine engine) {
    return engine.getSession();
  }

  /**
   * The room one record the engine seals or opens may need: its packet buffer size, which a JDK
   * engine enlarges once a peer sends a record longer than TLS allows.
   */
  static int packetBytes(SSLEngine engine) {
    return negotiated(engine).getPacketBufferSize();
  }

  /** The most plaintext one record the engine opens may hold. */
  static int plaintextBytes(SSLEngine engine) {
    return negotiated(engine).getApplicationBufferSize();
  }

  /** The protocol version the engine negotiated ({@code TLSv1.3}, {@code TLSv1.2}). */
  static String protocol(SSLEngine engine) {
    return negotiated(engine).getProtocol();
  }

  /** The cipher suite the engine negotiated. */
  static String cipherSuite(SSLEngine engine) {
    return negotiated(engine).getCipherSuite();
  }

  /** gRPC's TLS transport attribute, from which applications read the peer's certificates. */
  static Attributes transportAttributes(SSLEngine engine) {
    return Attributes.newBuilder()
        .set(Grpc.TRANSPORT_ATTR_SSL_SESSION, negotiated(engine))
        .build();
  }

  /** The first certificate the engine presented to its peer, or null. */
  static Certificate localCertificate(SSLEngine engine) {
    Certificate[] local = negotiated(engine).getLocalCertificates();
    return local == null || local.length == 0 ? null : local[0];
  }

  /** The first certificate of the chain the engine verified, or null when the peer sent none. */
  static Certificate peerCertificate(SSLEngine engine) {
    try {
      Certificate[] chain = negotiated(engine).getPeerCertificates();
      return chain.length == 0 ? null : chain[0];
    } catch (SSLPeerUnverifiedException e) {
      return null;
    }
  }

  /**
   * Checks one record header.
   *
   * @return the record's length field, the bytes that follow the header
   * @throws StatusRuntimeException (UNAVAILABLE) naming what is wrong: a type that is not a TLS
   *     content type (such as plaintext HTTP/2 or HTTP/1 sent to a TLS port), a version that is
   *     not TLS, or a length above {@link #MAX_LENGTH}
   */
  static int checkHeader(int type, int major, int minor, int length) {
    if (type < CHANGE_CIPHER_SPEC || type > APPLICATION_DATA) {
      throw refused("the peer does not speak TLS: a record starts with byte 0x"
          + Integer.toHexString(type) + guess(type));
    }
    if (major != 3 || minor > 4) {
      throw refused("the peer sent a record of version " + major + "." + minor
          + ", which is not TLS");
    }
    if (length > MAX_LENGTH) {
      throw refused("the peer sent a TLS record of " + length + " bytes, above the maximum of "
          + MAX_LENGTH);
    }
    return length;
  }

  /** What a peer sending {@code first} as its first byte probably speaks. */
  private static String guess(int first) {
    if (first == 'P') {
      return " ('P': plaintext HTTP/2 sent to a TLS port?)";
    }
    if (first == 0) {
      return " (an HTTP/2 frame: a plaintext server answering a TLS client?)";
    }
    if (first >= 'A' && first <= 'Z') {
      return " ('" + (char) first + "': plaintext HTTP/1?)";
    }
    return "";
  }

  static StatusRuntimeException refused(String reason) {
    return Status.UNAVAILABLE.withDescription(reason).asRuntimeException();
  }

  static StatusRuntimeException refused(String reason, Throwable cause) {
    return Status.UNAVAILABLE.withDescription(reason).withCause(cause).asRuntimeException();
  }
}
