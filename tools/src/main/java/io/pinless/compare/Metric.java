package io.pinless.compare;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.util.List;
import java.util.Locale;

/**
 * A figure of the report's table: its label, where it is in a variant's JSON (a dotted path),
 * which way is better, and how it is shown. {@link #ALL} lists every figure, in the table's order.
 */
record Metric(String label, String path, boolean higherIsBetter, double scale, String format) {
  private static final double MIB = 1 << 20;

  /**
   * Every figure the table shows and the ratios compare, in order. A phase's {@code client} and
   * {@code server} figures are each measured in its own process; "both ends" rows add the two.
   */
  static final List<Metric> ALL = List.of(
      new Metric("download throughput (MB/s)", "download.throughputMBps", true, 1, "%.0f"),
      new Metric("download p50 per object (ms)", "download.latencyMillis.p50", false, 1, "%.1f"),
      new Metric("download p90 per object (ms)", "download.latencyMillis.p90", false, 1, "%.1f"),
      new Metric("download p99 per object (ms)", "download.latencyMillis.p99", false, 1, "%.1f"),
      mib("download: client pooled direct pinned, mean", "download.client.pooledDirectPinnedMeanBytes"),
      mib("download: client pooled direct pinned, peak", "download.client.pooledDirectPinnedPeakBytes"),
      mib("download: client pool reserved, mean", "download.client.poolReservedMeanBytes"),
      mib("download: client pool reserved, peak", "download.client.poolReservedPeakBytes"),
      mib("download: client heap after GC, mean", "download.client.heapAfterGcMeanBytes"),
      mib("download: client heap after GC, peak", "download.client.heapAfterGcPeakBytes"),
      new Metric("download: client CPU ns per byte", "download.client.cpuNanosPerPayloadByte", false, 1, "%.3f"),
      new Metric("download: client heap allocated per byte", "download.client.heapAllocatedPerPayloadByte", false, 1, "%.4f"),
      new Metric("download: client copies per byte", "download.copiesPerPayloadByte", false, 1, "%.2f"),
      mib("download: server pooled direct pinned, mean", "download.server.pooledDirectPinnedMeanBytes"),
      mib("download: server pool reserved, mean", "download.server.poolReservedMeanBytes"),
      mib("download: server heap after GC, mean", "download.server.heapAfterGcMeanBytes"),
      new Metric("download: server CPU ns per byte", "download.server.cpuNanosPerPayloadByte", false, 1, "%.3f"),
      new Metric("download: CPU ns per byte, both ends", "download.cpuNanosPerPayloadByte", false, 1, "%.3f"),
      new Metric("download: heap allocated per byte, both ends", "download.heapAllocatedPerPayloadByte", false, 1, "%.4f"),
      new Metric("small calls per second", "small.callsPerSecond", true, 1, "%.0f"),
      new Metric("small p50 (us)", "small.latencyMicros.p50", false, 1, "%.0f"),
      new Metric("small p90 (us)", "small.latencyMicros.p90", false, 1, "%.0f"),
      new Metric("small p99 (us)", "small.latencyMicros.p99", false, 1, "%.0f"),
      mib("small: client pooled direct pinned, mean", "small.client.pooledDirectPinnedMeanBytes"),
      mib("small: client pooled direct pinned, peak", "small.client.pooledDirectPinnedPeakBytes"),
      mib("small: client pool reserved, mean", "small.client.poolReservedMeanBytes"),
      mib("small: client pool reserved, peak", "small.client.poolReservedPeakBytes"),
      mib("small: client heap after GC, mean", "small.client.heapAfterGcMeanBytes"),
      mib("small: client heap after GC, peak", "small.client.heapAfterGcPeakBytes"),
      new Metric("small: client CPU ns per byte", "small.client.cpuNanosPerPayloadByte", false, 1, "%.1f"),
      new Metric("small: client CPU us per call", "small.client.cpuMicrosPerCall", false, 1, "%.1f"),
      new Metric("small: server CPU us per call", "small.server.cpuMicrosPerCall", false, 1, "%.1f"),
      new Metric("small: CPU us per call, both ends", "small.cpuMicrosPerCall", false, 1, "%.1f"),
      new Metric("small: heap allocated per byte, both ends", "small.heapAllocatedPerPayloadByte", false, 1, "%.2f"),
      new Metric("idle: bytes per connection", "idle.bytesPerConnection", false, 1, "%.0f"),
      new Metric("idle:   heap bytes per connection", "idle.heapBytesPerConnection", false, 1, "%.0f"),
      new Metric("idle:   pooled direct bytes per connection", "idle.pooledDirectPinnedBytesPerConnection", false, 1, "%.0f"),
      new Metric("idle:   client end's process, per connection", "idle.clientBytesPerConnection", false, 1, "%.0f"),
      new Metric("idle:   server end's process, per connection", "idle.serverBytesPerConnection", false, 1, "%.0f"),
      new Metric("idle: seconds to open all, one call each", "idle.openSeconds", false, 1, "%.1f"));

  /** Width of the table's first column, its labels. */
  private static final int LABEL_WIDTH = 52;

  /** {@code label} padded to the table's first column. */
  static String column(String label) {
    return String.format(Locale.ROOT, "%-" + LABEL_WIDTH + "s", label);
  }

  /** A memory figure shown in MiB; lower is better. */
  private static Metric mib(String label, String path) {
    return new Metric(label + " (MiB)", path, false, MIB, "%.2f");
  }

  /** The metric of {@link #ALL} at {@code path}. */
  static Metric at(String path) {
    for (Metric m : ALL) {
      if (m.path().equals(path)) {
        return m;
      }
    }
    throw new IllegalArgumentException(path);
  }

  /** The figure in {@code variant}, scaled for display; NaN if absent. */
  double value(JsonObject variant) {
    JsonElement e = variant;
    for (String key : path.split("\\.")) {
      if (e == null || !e.isJsonObject()) {
        return Double.NaN;
      }
      e = e.getAsJsonObject().get(key);
    }
    return e == null || !e.isJsonPrimitive() ? Double.NaN : e.getAsDouble() / scale;
  }

  /**
   * Whether the figure in {@code variant} is only a lower bound: a sibling {@code <name>LowerBound}
   * (the figure's name up to {@code PerPayloadByte}) is true.
   */
  boolean lowerBound(JsonObject variant) {
    int dot = path.lastIndexOf('.');
    String name = path.substring(dot + 1).replace("PerPayloadByte", "") + "LowerBound";
    JsonObject parent = variant;
    for (String key : path.substring(0, Math.max(dot, 0)).split("\\.")) {
      if (key.isEmpty()) {
        continue;
      }
      if (!parent.has(key) || !parent.get(key).isJsonObject()) {
        return false;
      }
      parent = parent.getAsJsonObject(key);
    }
    return parent.has(name) && parent.get(name).getAsBoolean();
  }

  /** The figure in {@code variant} as the table shows it: "-" if absent, led by ">= " if a bound. */
  String text(JsonObject variant) {
    double v = value(variant);
    if (Double.isNaN(v)) {
      return "-";
    }
    return (lowerBound(variant) ? ">= " : "") + String.format(Locale.ROOT, format, v);
  }
}
