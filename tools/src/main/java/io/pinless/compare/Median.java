package io.pinless.compare;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/** One variant's result from several rounds: every figure the median of the rounds'. */
public final class Median {
  private Median() {}

  /**
   * Merges {@code rounds} of one variant: each number becomes the median of that number across
   * the rounds; anything else comes from the first round. {@code completed} holds only if every
   * round completed, {@code leaks} is the sum, and {@code rounds} lists each round's download
   * throughput, the client's CPU per byte and mean pinned direct bytes, the JIT's compilation
   * time, small calls per second and idle bytes per connection, so that the spread stays visible
   * and {@link Report#ratios} can pair the rounds of two variants. One round is returned as it is.
   */
  static JsonObject of(List<JsonObject> rounds) {
    if (rounds.size() == 1) {
      return rounds.get(0);
    }
    boolean completed = true;
    int leaks = 0;
    for (JsonObject r : rounds) {
      completed &= r.has("completed") && r.get("completed").getAsBoolean();
      leaks += r.has("leaks") ? r.get("leaks").getAsInt() : 0;
    }
    JsonObject merged = completed ? merge(rounds) : firstFailed(rounds);
    merged.addProperty("completed", completed);
    merged.addProperty("leaks", leaks);
    JsonArray perRound = new JsonArray();
    for (JsonObject r : rounds) {
      JsonObject one = new JsonObject();
      one.add("downloadThroughputMBps", dig(r, "download", "throughputMBps"));
      one.add("downloadClientCpuNanosPerPayloadByte",
          dig(r, "download", "client", "cpuNanosPerPayloadByte"));
      one.add("downloadClientPinnedMeanBytes",
          dig(r, "download", "client", "pooledDirectPinnedMeanBytes"));
      one.add("downloadJitSeconds", dig(r, "download", "jitSeconds"));
      one.add("smallCallsPerSecond", dig(r, "small", "callsPerSecond"));
      one.add("idleBytesPerConnection", dig(r, "idle", "bytesPerConnection"));
      perRound.add(one);
    }
    merged.add("rounds", perRound);
    return merged;
  }

  /** The median of {@code values} (not empty; left as it is), the mean of the middle two if even. */
  public static double median(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    int n = sorted.size();
    return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
  }

  /** The element at {@code keys} under {@code o}; null if any is missing. */
  private static JsonElement dig(JsonObject o, String... keys) {
    JsonElement e = o;
    for (String key : keys) {
      if (e == null || !e.isJsonObject()) {
        return null;
      }
      e = e.getAsJsonObject().get(key);
    }
    return e;
  }

  private static JsonObject firstFailed(List<JsonObject> rounds) {
    for (JsonObject r : rounds) {
      if (!r.has("completed") || !r.get("completed").getAsBoolean()) {
        return r.deepCopy();
      }
    }
    throw new AssertionError("no round failed");
  }

  private static JsonObject merge(List<JsonObject> objects) {
    JsonObject merged = new JsonObject();
    for (Map.Entry<String, JsonElement> e : objects.get(0).entrySet()) {
      List<JsonElement> same = new ArrayList<>();
      for (JsonObject o : objects) {
        if (o.has(e.getKey())) {
          same.add(o.get(e.getKey()));
        }
      }
      JsonElement first = e.getValue();
      if (first.isJsonObject()) {
        List<JsonObject> children = new ArrayList<>();
        same.forEach(x -> children.add(x.getAsJsonObject()));
        merged.add(e.getKey(), merge(children));
      } else if (first.isJsonPrimitive() && first.getAsJsonPrimitive().isNumber()) {
        List<Double> values = new ArrayList<>();
        same.forEach(x -> values.add(x.getAsDouble()));
        merged.add(e.getKey(), new JsonPrimitive(Math.round(median(values) * 10_000) / 10_000.0));
      } else {
        merged.add(e.getKey(), first.deepCopy());
      }
    }
    return merged;
  }
}
