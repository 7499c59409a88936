package io.pinless.compare;

/**
 * What one end's process holds at one moment: its live heap after a full collection, the pooled
 * direct bytes its live buffers pin and how many such buffers there are (its stack's allocators),
 * and its server's ready connections. The idle phase takes one in each process before and after
 * opening its connections.
 */
record Measurement(long heapBytes, long pooledBytes, long pooledBuffers, int serverConnections) {
  /** Measures this process, where {@code stack} runs. */
  static Measurement of(Variant.Stack stack) {
    long heap = MemoryMonitor.heapAfterFullCollection();
    return new Measurement(heap, stack.pinnedDirectBytes(), stack.activeDirectBuffers(),
        stack.serverConnections());
  }

  /** The four figures, separated by spaces. */
  String line() {
    return heapBytes + " " + pooledBytes + " " + pooledBuffers + " " + serverConnections;
  }

  /** Parses {@link #line}. */
  static Measurement parse(String line) {
    String[] f = line.trim().split(" ");
    if (f.length != 4) {
      throw new IllegalArgumentException("not a measurement: " + line);
    }
    return new Measurement(Long.parseLong(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2]),
        Integer.parseInt(f[3]));
  }

  /** The growth since {@code before}; the connections are this measurement's. */
  Measurement minus(Measurement before) {
    return new Measurement(heapBytes - before.heapBytes, pooledBytes - before.pooledBytes,
        pooledBuffers - before.pooledBuffers, serverConnections);
  }
}
