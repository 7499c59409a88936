package io.pinless.read;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The inbound bytes a connection has handed on that are still retained downstream, against a
 * limit. {@link io.pinless.http2.Http2FrameSlicer} adds the bytes each buffer it hands on pins
 * and subtracts them when the last reference is released (on any thread);
 * {@link ReadOnReadyHandler} reads no more while the total is above the limit, and is told when
 * it falls back below.
 *
 * <p>The limit must exceed the largest message the application accepts: gRPC holds every byte of
 * a message until the message is complete, so a limit below that would stop reading for good.
 */
public final class ReadBudget {
  /** 64 MiB: well above gRPC's default 4 MiB message limit and the 16 MiB messages we test. */
  public static final long DEFAULT_LIMIT_BYTES = 64L << 20;

  private final long limitBytes;
  private final AtomicLong retained = new AtomicLong();
  /** Told (on the releasing thread) when the total falls to the limit or below; may be null. */
  private volatile Runnable onBelowLimit;

  /** A budget of {@code limitBytes}; {@link Long#MAX_VALUE} never holds reads back. */
  public ReadBudget(long limitBytes) {
    if (limitBytes <= 0) {
      throw new IllegalArgumentException("limitBytes " + limitBytes + " must be positive");
    }
    this.limitBytes = limitBytes;
  }

  /** The limit in bytes. */
  public long limitBytes() {
    return limitBytes;
  }

  /** The bytes handed on and still retained downstream. */
  public long retainedBytes() {
    return retained.get();
  }

  /** True while the retained bytes exceed the limit. */
  public boolean isExceeded() {
    return retained.get() > limitBytes;
  }

  /** Counts {@code bytes} more as retained downstream. */
  public void add(long bytes) {
    retained.addAndGet(bytes);
  }

  /** Counts {@code bytes} as released; tells the listener if this brings the total to the limit. */
  public void release(long bytes) {
    long after = retained.addAndGet(-bytes);
    Runnable listener = onBelowLimit;
    if (listener != null && after <= limitBytes && after + bytes > limitBytes) {
      listener.run();
    }
  }

  /** Sets the one listener told when the total falls back to the limit. */
  void onBelowLimit(Runnable listener) {
    this.onBelowLimit = listener;
  }
}
