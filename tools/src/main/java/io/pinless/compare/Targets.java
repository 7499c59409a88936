package io.pinless.compare;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * What pinless's client must reach against the stock variant of the same transport, in the
 * download and small phases: pooled direct memory pinned at most 0.6 of stock's on average and
 * 0.5 at its peak, pool reserved memory and CPU per payload byte at most stock's. grpc-go's seed
 * change took a download loop's in-use memory from 35 to 20 MB (0.57). Each pinless variant's
 * ratio over the stock variant of its transport is marked against these, in the JSON ({@code
 * targets} of the ratio) and after the table.
 */
final class Targets {
  /** The ratio, pinless over stock, of the figure at {@code path} must be at most {@code limit}. */
  record Target(String path, double limit) {}

  /** Every target, in the order shown. */
  static final List<Target> TARGETS = targets("download", "small");

  private Targets() {}

  private static List<Target> targets(String... phases) {
    List<Target> targets = new ArrayList<>();
    for (String phase : phases) {
      targets.add(new Target(phase + ".client.pooledDirectPinnedMeanBytes", 0.6));
      targets.add(new Target(phase + ".client.pooledDirectPinnedPeakBytes", 0.5));
      targets.add(new Target(phase + ".client.poolReservedMeanBytes", 1.0));
      targets.add(new Target(phase + ".client.poolReservedPeakBytes", 1.0));
      targets.add(new Target(phase + ".client.cpuNanosPerPayloadByte", 1.0));
    }
    return List.copyOf(targets);
  }

  /** Whether {@code baseline} is the stock variant of {@code variant}'s transport. */
  static boolean sameTransport(String variant, String baseline) {
    return variant.startsWith("pinless-")
        && baseline.equals("stock-" + variant.substring("pinless-".length()));
  }

  /**
   * Adds {@code targets} to {@code ratio} (one of {@link Report#ratios}) when its baseline is the
   * stock variant of the same transport: for each target whose ratio is known, the ratio, the
   * limit and whether it is met.
   */
  static void mark(JsonObject ratio) {
    if (!sameTransport(ratio.get("variant").getAsString(), ratio.get("baseline").getAsString())) {
      return;
    }
    JsonObject marks = new JsonObject();
    for (Target t : TARGETS) {
      JsonElement value = ratio.get(t.path());
      if (value != null) {
        JsonObject mark = new JsonObject();
        mark.addProperty("ratio", value.getAsDouble());
        mark.addProperty("limit", t.limit());
        mark.addProperty("met", value.getAsDouble() <= t.limit());
        marks.add(t.path(), mark);
      }
    }
    ratio.add("targets", marks);
  }

  /** The marked ratios, with a column per same-transport pair; none if no pair was run. */
  static List<String> tableLines(List<JsonObject> ratios) {
    List<JsonObject> marked = marked(ratios);
    List<String> lines = new ArrayList<>();
    if (marked.isEmpty()) {
      return lines;
    }
    String title = "targets: pinless / stock, same transport";
    StringBuilder header = new StringBuilder(
        Metric.column(title) + String.format(Locale.ROOT, " %-8s", "target"));
    for (JsonObject r : marked) {
      header.append(String.format(Locale.ROOT, " %" + width(r) + "s", pair(r)));
    }
    lines.add("");
    lines.add(header.toString());
    for (Target t : TARGETS) {
      StringBuilder line = new StringBuilder(Metric.column(Metric.at(t.path()).label())
          + String.format(Locale.ROOT, " %-8s", limit(t)));
      for (JsonObject r : marked) {
        line.append(String.format(Locale.ROOT, " %" + width(r) + "s", cell(r, t)));
      }
      lines.add(line.toString());
    }
    return lines;
  }

  /** The same as a Markdown table, after a blank line; empty if no pair was run. */
  static String markdown(List<JsonObject> ratios) {
    List<JsonObject> marked = marked(ratios);
    if (marked.isEmpty()) {
      return "";
    }
    StringBuilder md = new StringBuilder("\n| target: pinless / stock, same transport | limit |");
    StringBuilder rule = new StringBuilder("| --- | ---: |");
    for (JsonObject r : marked) {
      md.append(' ').append(pair(r)).append(" |");
      rule.append(" ---: |");
    }
    md.append('\n').append(rule).append('\n');
    for (Target t : TARGETS) {
      md.append("| ").append(Metric.at(t.path()).label()).append(" | ").append(limit(t))
          .append(" |");
      for (JsonObject r : marked) {
        md.append(' ').append(cell(r, t)).append(" |");
      }
      md.append('\n');
    }
    return md.toString();
  }

  private static List<JsonObject> marked(List<JsonObject> ratios) {
    List<JsonObject> marked = new ArrayList<>();
    for (JsonObject r : ratios) {
      if (r.has("targets")) {
        marked.add(r);
      }
    }
    return marked;
  }

  /** A column's width: its pair's name, or the widest cell ("0.00 MISSED"). */
  private static int width(JsonObject ratio) {
    return Math.max(pair(ratio).length(), 12);
  }

  private static String pair(JsonObject ratio) {
    return ratio.get("variant").getAsString() + " / " + ratio.get("baseline").getAsString();
  }

  private static String limit(Target t) {
    return String.format(Locale.ROOT, "<= %.1f", t.limit());
  }

  /** The ratio and "met" or "MISSED"; "-" if the ratio is not known. */
  private static String cell(JsonObject ratio, Target t) {
    JsonElement mark = ratio.getAsJsonObject("targets").get(t.path());
    if (mark == null) {
      return "-";
    }
    JsonObject m = mark.getAsJsonObject();
    return String.format(Locale.ROOT, "%.2f %s", m.get("ratio").getAsDouble(),
        m.get("met").getAsBoolean() ? "met" : "MISSED");
  }
}
