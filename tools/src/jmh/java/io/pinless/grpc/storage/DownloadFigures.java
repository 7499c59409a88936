package io.pinless.grpc.storage;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * What one client JVM of {@link StorageDownloads} measured over its window. Sizes are bytes;
 * the memory figures are the mean and peak of samples taken every 50 ms.
 *
 * @param api {@code high-level} or {@code gapic}
 * @param variant {@code pinless} or {@code stock}
 * @param provider the class of gRPC's channel provider in the client JVM
 * @param pinlessConnections the connections pinless installed in the client JVM (0 on stock)
 * @param downloads whole downloads in the window
 * @param megabytesPerSecond payload bytes per microsecond (10^6 bytes per second)
 * @param cpuNanosPerByte the process's CPU time, every thread, per payload byte
 * @param pinnedMean pooled direct memory pinned by live buffers ({@link GrpcPools}), mean
 * @param pinnedPeak the same, peak
 * @param reservedMean direct memory the pools reserved, mean
 * @param reservedPeak the same, peak
 * @param heapAfterGc live heap as the last collection left it, mean
 * @param directShare the share of ReadObject content bytes that were views of direct buffers
 */
record DownloadFigures(String api, String variant, String provider, long pinlessConnections,
    long downloads, double megabytesPerSecond, double cpuNanosPerByte, long pinnedMean,
    long pinnedPeak, long reservedMean, long reservedPeak, long heapAfterGc,
    double directShare) {
  /** The first word of a figures line. */
  static final String PREFIX = "figures";

  /** A line of {@code key=value} fields after {@link #PREFIX}; no value holds a space. */
  String line() {
    return String.format(Locale.ROOT,
        "%s api=%s variant=%s provider=%s pinlessConnections=%d downloads=%d mbPerSecond=%.3f"
            + " cpuNanosPerByte=%.5f pinnedMean=%d pinnedPeak=%d reservedMean=%d"
            + " reservedPeak=%d heapAfterGc=%d directShare=%.6f",
        PREFIX, api, variant, provider, pinlessConnections, downloads, megabytesPerSecond,
        cpuNanosPerByte, pinnedMean, pinnedPeak, reservedMean, reservedPeak, heapAfterGc,
        directShare);
  }

  /** Parses {@link #line}. */
  static DownloadFigures parse(String line) {
    String[] words = line.trim().split(" ");
    if (words.length != 14 || !words[0].equals(PREFIX)) {
      throw new IllegalArgumentException("not a figures line: " + line);
    }
    Map<String, String> f = new HashMap<>();
    for (int i = 1; i < words.length; i++) {
      int eq = words[i].indexOf('=');
      if (eq < 0) {
        throw new IllegalArgumentException("no value in " + words[i] + " of " + line);
      }
      f.put(words[i].substring(0, eq), words[i].substring(eq + 1));
    }
    return new DownloadFigures(f.get("api"), f.get("variant"), f.get("provider"),
        Long.parseLong(f.get("pinlessConnections")), Long.parseLong(f.get("downloads")),
        Double.parseDouble(f.get("mbPerSecond")), Double.parseDouble(f.get("cpuNanosPerByte")),
        Long.parseLong(f.get("pinnedMean")), Long.parseLong(f.get("pinnedPeak")),
        Long.parseLong(f.get("reservedMean")), Long.parseLong(f.get("reservedPeak")),
        Long.parseLong(f.get("heapAfterGc")), Double.parseDouble(f.get("directShare")));
  }
}
