package io.pinless.compare;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A latency histogram of fixed size, safe to record into from any thread: buckets grow by 1%, so
 * a percentile is known to within 1% whatever the number of calls, and recording allocates
 * nothing (the heap figures are not disturbed by the measuring).
 */
final class Latencies {
  private static final double GROWTH = 1.01;
  private static final double LOG_GROWTH = Math.log(GROWTH);
  /** Enough buckets for 1 ns to over an hour. */
  private static final int BUCKETS = 3000;

  private final AtomicLongArray counts = new AtomicLongArray(BUCKETS);

  void record(long nanos) {
    int bucket = nanos <= 1 ? 0 : (int) Math.min(BUCKETS - 1, Math.log(nanos) / LOG_GROWTH);
    counts.incrementAndGet(bucket);
  }

  long count() {
    long n = 0;
    for (int i = 0; i < BUCKETS; i++) {
      n += counts.get(i);
    }
    return n;
  }

  /** The {@code p}-th percentile (0 < p <= 100) in nanoseconds, as its bucket's upper bound; 0 if empty. */
  double percentileNanos(double p) {
    long total = count();
    if (total == 0) {
      return 0;
    }
    long rank = (long) Math.ceil(total * p / 100.0);
    long seen = 0;
    for (int i = 0; i < BUCKETS; i++) {
      seen += counts.get(i);
      if (seen >= rank) {
        return Math.pow(GROWTH, i + 1);
      }
    }
    return Math.pow(GROWTH, BUCKETS);
  }
}
