package io.pinless.compare;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import javax.imageio.ImageIO;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.style.Styler;

/**
 * The comparison's outputs: the side-by-side table (with the {@link Targets}), {@code report.json},
 * {@code report.md} and {@code report.png}.
 */
final class Report {
  private Report() {}

  /** The pairs the ratios are taken for: each pinless variant run against each stock one it stands in for. */
  static List<String[]> ratioPairs(List<String> variants) {
    List<String[]> pairs = new ArrayList<>();
    String[][] wanted = {
      {"pinless-alts", "stock-alts"}, {"pinless-alts", "stock-plaintext"},
      {"pinless-plaintext", "stock-plaintext"}, {"pinless-tls", "stock-tls"},
      {"pinless-tls", "stock-plaintext"}};
    for (String[] pair : wanted) {
      if (variants.contains(pair[0]) && variants.contains(pair[1])) {
        pairs.add(pair);
      }
    }
    return pairs;
  }

  /** Ratios (first over second) of every figure, for each pair; completed variants only. */
  static List<JsonObject> ratios(List<JsonObject> results) {
    List<String> names = new ArrayList<>();
    for (JsonObject r : results) {
      if (r.has("completed") && r.get("completed").getAsBoolean()) {
        names.add(r.get("variant").getAsString());
      }
    }
    List<JsonObject> ratios = new ArrayList<>();
    for (String[] pair : ratioPairs(names)) {
      JsonObject of = find(results, pair[0]);
      JsonObject to = find(results, pair[1]);
      JsonObject ratio = new JsonObject();
      ratio.addProperty("variant", pair[0]);
      ratio.addProperty("baseline", pair[1]);
      for (Metric m : Metric.ALL) {
        double a = m.value(of);
        double b = m.value(to);
        if (!Double.isNaN(a) && !Double.isNaN(b) && b != 0 && !m.lowerBound(of) && !m.lowerBound(to)) {
          ratio.addProperty(m.path(), Math.round(a / b * 1000) / 1000.0);
        }
      }
      addRoundRatios(ratio, of, to);
      Targets.mark(ratio);
      ratios.add(ratio);
    }
    return ratios;
  }

  /** The per-round figures {@link #addRoundRatios} pairs: key in a round, and the metric's path. */
  private static final String[][] ROUND_FIGURES = {
    {"downloadThroughputMBps", "download.throughputMBps"},
    {"downloadClientCpuNanosPerPayloadByte", "download.client.cpuNanosPerPayloadByte"},
    {"downloadClientPinnedMeanBytes", "download.client.pooledDirectPinnedMeanBytes"}};

  /**
   * With several rounds (run in turn, so round i of both variants ran minutes apart at most), adds
   * each round's ratio of the download figures and their median: on a machine whose speed drifts,
   * the median of paired ratios says more than the ratio of two medians.
   */
  private static void addRoundRatios(JsonObject ratio, JsonObject of, JsonObject to) {
    if (!of.has("rounds") || !to.has("rounds")
        || of.getAsJsonArray("rounds").size() != to.getAsJsonArray("rounds").size()) {
      return;
    }
    JsonArray ofRounds = of.getAsJsonArray("rounds");
    JsonArray toRounds = to.getAsJsonArray("rounds");
    JsonObject byRound = new JsonObject();
    JsonObject medians = new JsonObject();
    for (String[] figure : ROUND_FIGURES) {
      List<Double> ratios = roundRatios(ofRounds, toRounds, figure[0]);
      if (ratios != null) {
        JsonArray values = new JsonArray();
        ratios.forEach(values::add);
        byRound.add(figure[1], values);
        medians.addProperty(figure[1], Math.round(Median.median(ratios) * 1000) / 1000.0);
      }
    }
    if (byRound.size() > 0) {
      ratio.add("byRound", byRound);
      ratio.add("byRoundMedian", medians);
    }
  }

  /** Each round's ratio of {@code key}, to 3 decimals; null if a round lacks it or divides by 0. */
  private static List<Double> roundRatios(JsonArray ofRounds, JsonArray toRounds, String key) {
    List<Double> ratios = new ArrayList<>();
    for (int i = 0; i < ofRounds.size(); i++) {
      JsonElement a = ofRounds.get(i).getAsJsonObject().get(key);
      JsonElement b = toRounds.get(i).getAsJsonObject().get(key);
      if (a == null || b == null || a.isJsonNull() || b.isJsonNull() || b.getAsDouble() == 0) {
        return null;
      }
      ratios.add(Math.round(a.getAsDouble() / b.getAsDouble() * 1000) / 1000.0);
    }
    return ratios;
  }

  /** One line per pair with rounds: each round's ratio of the download figures, and the median. */
  private static List<String> roundLines(List<JsonObject> ratios) {
    List<String> lines = new ArrayList<>();
    for (JsonObject r : ratios) {
      if (!r.has("byRound")) {
        continue;
      }
      StringBuilder line = new StringBuilder(r.get("variant").getAsString() + " / "
          + r.get("baseline").getAsString() + ", round by round (the variants ran in turn):");
      String sep = " ";
      for (String[] figure : ROUND_FIGURES) {
        JsonArray values = r.getAsJsonObject("byRound").getAsJsonArray(figure[1]);
        if (values == null) {
          continue;
        }
        line.append(sep).append(Metric.at(figure[1]).label()).append(' ');
        for (JsonElement v : values) {
          line.append(String.format(Locale.ROOT, "%.2f ", v.getAsDouble()));
        }
        line.append(String.format(Locale.ROOT, "(median %.2f)",
            r.getAsJsonObject("byRoundMedian").get(figure[1]).getAsDouble()));
        sep = "; ";
      }
      lines.add(line.toString());
    }
    return lines;
  }

  /**
   * One line per variant with a download: how its copies per payload byte were made. With
   * several rounds the figure is their median, and the line shows the first round's terms.
   */
  static List<String> copiesLines(List<JsonObject> variants) {
    List<String> lines = new ArrayList<>();
    for (JsonObject v : variants) {
      JsonObject download = v.has("download") ? v.getAsJsonObject("download") : null;
      if (download != null && download.has("copiesFormula")) {
        lines.add("copies per payload byte, " + v.get("variant").getAsString()
            + (v.has("rounds") ? ", first round: " : ": ")
            + download.get("copiesFormula").getAsString());
      }
    }
    return lines;
  }

  private static JsonObject find(List<JsonObject> results, String variant) {
    for (JsonObject r : results) {
      if (variant.equals(r.get("variant").getAsString())) {
        return r;
      }
    }
    throw new IllegalArgumentException(variant);
  }

  /** Prints the side-by-side table: a column per variant, then a column per ratio. */
  static void printTable(JsonObject report, PrintStream out) {
    List<JsonObject> variants = new ArrayList<>();
    report.getAsJsonArray("variants").forEach(e -> variants.add(e.getAsJsonObject()));
    List<JsonObject> ratios = new ArrayList<>();
    report.getAsJsonArray("ratios").forEach(e -> ratios.add(e.getAsJsonObject()));
    StringBuilder header = new StringBuilder(Metric.column(""));
    for (JsonObject v : variants) {
      header.append(String.format(Locale.ROOT, " %19s", v.get("variant").getAsString()));
    }
    for (JsonObject r : ratios) {
      header.append(String.format(Locale.ROOT, " %19s",
          shortName(r.get("variant").getAsString()) + "/" + shortName(r.get("baseline").getAsString())));
    }
    header.append("   better");
    out.println(header);
    for (Metric m : Metric.ALL) {
      StringBuilder line = new StringBuilder(Metric.column(m.label()));
      for (JsonObject v : variants) {
        line.append(String.format(Locale.ROOT, " %19s", m.text(v)));
      }
      for (JsonObject r : ratios) {
        JsonElement ratio = r.get(m.path());
        line.append(String.format(Locale.ROOT, " %19s",
            ratio == null ? "-" : String.format(Locale.ROOT, "%.2fx", ratio.getAsDouble())));
      }
      line.append(m.higherIsBetter() ? "   higher" : "   lower");
      out.println(line);
    }
    StringBuilder leaks = new StringBuilder(Metric.column("leaks reported by Netty"));
    for (JsonObject v : variants) {
      leaks.append(String.format(Locale.ROOT, " %19s", v.has("leaks") ? v.get("leaks").getAsString() : "-"));
    }
    out.println(leaks);
    Targets.tableLines(ratios).forEach(out::println);
    copiesLines(variants).forEach(out::println);
    roundLines(ratios).forEach(out::println);
  }

  /** Writes {@code report.md}: the table as Markdown, with the date and the command, for a README. */
  static Path writeMarkdown(JsonObject report, Path dir) throws IOException {
    List<JsonObject> variants = new ArrayList<>();
    report.getAsJsonArray("variants").forEach(e -> variants.add(e.getAsJsonObject()));
    List<JsonObject> ratios = new ArrayList<>();
    report.getAsJsonArray("ratios").forEach(e -> ratios.add(e.getAsJsonObject()));
    StringBuilder md = new StringBuilder();
    md.append(String.format(Locale.ROOT, "`%s`, %s, %s cores, %s, transport %s:%n%n",
        report.get("command").getAsString(), report.get("generated").getAsString(),
        report.getAsJsonObject("machine").get("cores").getAsString(),
        report.getAsJsonObject("machine").get("java").getAsString(),
        report.getAsJsonObject("options").get("transport").getAsString()));
    StringBuilder rule = new StringBuilder("| --- |");
    md.append("| |");
    for (JsonObject v : variants) {
      md.append(' ').append(v.get("variant").getAsString()).append(" |");
      rule.append(" ---: |");
    }
    for (JsonObject r : ratios) {
      md.append(' ').append(r.get("variant").getAsString()).append(" / ")
          .append(r.get("baseline").getAsString()).append(" |");
      rule.append(" ---: |");
    }
    md.append('\n').append(rule).append('\n');
    for (Metric m : Metric.ALL) {
      md.append("| ").append(m.label().trim())
          .append(m.higherIsBetter() ? ", higher is better" : ", lower is better").append(" |");
      for (JsonObject v : variants) {
        md.append(' ').append(m.text(v)).append(" |");
      }
      for (JsonObject r : ratios) {
        JsonElement ratio = r.get(m.path());
        md.append(' ').append(ratio == null ? "-" : String.format(Locale.ROOT, "%.2f", ratio.getAsDouble())).append(" |");
      }
      md.append('\n');
    }
    md.append("| leaks reported by Netty |");
    for (JsonObject v : variants) {
      md.append(' ').append(v.has("leaks") ? v.get("leaks").getAsString() : "-").append(" |");
    }
    md.append(" |".repeat(ratios.size())).append('\n');
    md.append(Targets.markdown(ratios));
    for (String line : copiesLines(variants)) {
      md.append('\n').append(line).append('\n');
    }
    for (String line : roundLines(ratios)) {
      md.append('\n').append(line).append('\n');
    }
    Files.createDirectories(dir);
    Path file = dir.resolve("report.md");
    Files.writeString(file, md, StandardCharsets.UTF_8);
    return file;
  }

  private static String shortName(String variant) {
    return variant.replace("pinless-", "p-").replace("stock-", "s-");
  }

  /** Writes {@code report.json}. */
  static Path writeJson(JsonObject report, Path dir) throws IOException {
    Files.createDirectories(dir);
    Path file = dir.resolve("report.json");
    Files.writeString(file, new GsonBuilder().setPrettyPrinting().create().toJson(report),
        StandardCharsets.UTF_8);
    return file;
  }

  /**
   * Writes {@code report.png}: four bar charts, one bar per variant: download throughput, small
   * calls per second, the client process's memory during the download (pooled direct pinned, pool
   * reserved, heap after GC), bytes per idle connection.
   */
  static Path writeChart(JsonObject report, Path dir) throws IOException {
    Files.createDirectories(dir);
    List<JsonObject> variants = new ArrayList<>();
    report.getAsJsonArray("variants").forEach(e -> {
      JsonObject v = e.getAsJsonObject();
      if (v.has("completed") && v.get("completed").getAsBoolean()) {
        variants.add(v);
      }
    });
    JsonObject options = report.getAsJsonObject("options");
    CategoryChart[] charts = {
      chart("Download throughput, MB/s (higher is better)", variants,
          List.of("download"), List.of(Metric.at("download.throughputMBps"))),
      chart(String.format(Locale.ROOT, "%d-byte unary calls per second (higher is better)",
              options.get("smallBytes").getAsInt()), variants,
          List.of("small calls"), List.of(Metric.at("small.callsPerSecond"))),
      chart("The client process during the download, MiB (lower is better)", variants,
          List.of("pinned, mean", "pinned, peak", "reserved, mean", "reserved, peak",
              "heap after GC, mean"),
          List.of(Metric.at("download.client.pooledDirectPinnedMeanBytes"),
              Metric.at("download.client.pooledDirectPinnedPeakBytes"),
              Metric.at("download.client.poolReservedMeanBytes"),
              Metric.at("download.client.poolReservedPeakBytes"),
              Metric.at("download.client.heapAfterGcMeanBytes"))),
      chart(String.format(Locale.ROOT, "Bytes per idle connection, %d connections (lower is better)",
              options.get("idleConnections").getAsInt()), variants,
          List.of("heap", "pooled direct", "total"), List.of(Metric.at("idle.heapBytesPerConnection"),
              Metric.at("idle.pooledDirectPinnedBytesPerConnection"), Metric.at("idle.bytesPerConnection"))),
    };
    int w = 800;
    int h = 450;
    int titleHeight = 40;
    BufferedImage image = new BufferedImage(2 * w, 2 * h + titleHeight, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = image.createGraphics();
    try {
      g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, image.getWidth(), image.getHeight());
      g.setColor(Color.BLACK);
      g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 18));
      g.drawString(String.format(Locale.ROOT, "pinless compare, %s, transport %s, %s",
          report.get("generated").getAsString(), options.get("transport").getAsString(),
          report.getAsJsonObject("machine").get("cores").getAsString() + " cores"), 16, 27);
      if (variants.isEmpty()) {
        g.drawString("no variant completed: see the logs beside this file", 16, titleHeight + 40);
      }
      for (int i = 0; i < charts.length && !variants.isEmpty(); i++) {
        BufferedImage part = BitmapEncoder.getBufferedImage(charts[i]);
        g.drawImage(part, (i % 2) * w, titleHeight + (i / 2) * h, null);
      }
    } finally {
      g.dispose();
    }
    Path file = dir.resolve("report.png");
    ImageIO.write(image, "png", file.toFile());
    return file;
  }

  private static CategoryChart chart(String title, List<JsonObject> variants, List<String> categories,
      List<Metric> metrics) {
    CategoryChart chart = new CategoryChartBuilder().width(800).height(450).title(title).build();
    chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
    chart.getStyler().setLegendLayout(Styler.LegendLayout.Horizontal);
    chart.getStyler().setDecimalPattern("#,##0.#");
    chart.getStyler().setChartBackgroundColor(Color.WHITE);
    chart.getStyler().setLabelsVisible(true);
    chart.getStyler().setYAxisMin(0.0);
    for (JsonObject v : variants) {
      List<Double> values = new ArrayList<>();
      for (Metric m : metrics) {
        double value = m.value(v);
        values.add(Double.isNaN(value) ? 0 : value);
      }
      chart.addSeries(v.get("variant").getAsString(), categories, values);
    }
    return chart;
  }
}
