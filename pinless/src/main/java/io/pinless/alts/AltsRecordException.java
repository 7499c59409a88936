package io.pinless.alts;

import io.netty.handler.codec.DecoderException;

/**
 * A fatal violation of the ALTS record protocol: the connection is closed and no byte of the
 * offending record is delivered. {@link #reason()} says which rule was broken; the message gives
 * the offending value and the limit; an authentication failure keeps the
 * {@link java.security.GeneralSecurityException} as its cause.
 */
public final class AltsRecordException extends DecoderException {
  private static final long serialVersionUID = 1L;

  /** Which rule of the record protocol was broken. */
  public enum Reason {
    /** The length field is below 20 (type, empty ciphertext and tag). */
    LENGTH_TOO_SMALL,
    /** The whole frame (4 + length) exceeds the maximum frame size. */
    LENGTH_TOO_LARGE,
    /** The type field is not 6. */
    BAD_TYPE,
    /** The tag did not verify: corrupted, forged, wrong key or wrong direction. */
    BAD_TAG,
    /** This direction's record counter would overflow. */
    COUNTER_OVERFLOW,
    /** The peer closed the connection with a record partly received. */
    TRUNCATED,
    /** A previous error already ended this connection's record stream. */
    FAILED_BEFORE,
    /** The cipher itself failed (not the peer's fault). */
    CRYPTO_FAILURE
  }

  /** Which rule was broken. */
  private final Reason reason;

  /** Creates an exception for {@code reason} with a message naming the value and the limit. */
  public AltsRecordException(Reason reason, String message) {
    super(message);
    this.reason = reason;
  }

  /** Creates an exception for {@code reason} that keeps {@code cause}. */
  public AltsRecordException(Reason reason, String message, Throwable cause) {
    super(message, cause);
    this.reason = reason;
  }

  /** Which rule was broken. */
  public Reason reason() {
    return reason;
  }
}
