package io.pinless.compare;

import com.google.gson.JsonObject;

/**
 * A phase's costs per unit of work, from each process's figures ({@link MemoryMonitor#stop}): CPU
 * and heap allocated per payload byte, CPU per call; for the client's process, the server end's,
 * and both ends together. A phase's JSON holds the processes' figures under {@code client} and
 * {@code server}, and the sums of both ends at its top.
 */
final class PhaseFigures {
  private PhaseFigures() {}

  /** Adds to {@code process} its CPU and heap allocated per payload byte; returns it. */
  static JsonObject perByte(JsonObject process, long payloadBytes) {
    process.addProperty("cpuNanosPerPayloadByte",
        ratio(process.get("cpuNanos").getAsLong(), payloadBytes));
    process.addProperty("heapAllocatedPerPayloadByte",
        ratio(process.get("heapAllocatedBytes").getAsLong(), payloadBytes));
    return process;
  }

  /** Adds to {@code process} its CPU microseconds per call; returns it. */
  static JsonObject perCall(JsonObject process, long calls) {
    process.addProperty("cpuMicrosPerCall",
        ratio(process.get("cpuNanos").getAsLong() / 1e3, calls));
    return process;
  }

  /** Adds to {@code phase} both ends' CPU and heap allocated per payload byte. */
  static void bothEndsPerByte(JsonObject phase, long payloadBytes) {
    phase.addProperty("cpuNanosPerPayloadByte", ratio(sum(phase, "cpuNanos"), payloadBytes));
    phase.addProperty("heapAllocatedPerPayloadByte",
        ratio(sum(phase, "heapAllocatedBytes"), payloadBytes));
  }

  /** Adds to {@code phase} both ends' CPU microseconds per call. */
  static void bothEndsPerCall(JsonObject phase, long calls) {
    phase.addProperty("cpuMicrosPerCall", ratio(sum(phase, "cpuNanos") / 1e3, calls));
  }

  private static double sum(JsonObject phase, String key) {
    return phase.getAsJsonObject("client").get(key).getAsDouble()
        + phase.getAsJsonObject("server").get(key).getAsDouble();
  }

  /** {@code amount / per} to four decimals; 0 when nothing was done. */
  private static double ratio(double amount, long per) {
    return per == 0 ? 0 : Math.round(amount / per * 10_000) / 10_000.0;
  }
}
