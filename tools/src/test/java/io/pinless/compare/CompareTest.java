package io.pinless.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code pinless compare} in a short mode: every variant runs in its own JVM (with this JVM's
 * leak detector level, PARANOID under Maven) through every phase, and the report has every field.
 */
class CompareTest {
  /** Fields every variant's result must have, with a number (checked independently of Report). */
  private static final List<String> NUMBERS = List.of(
      "download.throughputMBps", "download.objects", "download.payloadBytes",
      "download.latencyMillis.p50", "download.latencyMillis.p90", "download.latencyMillis.p99",
      "download.memory.inUseAvgBytes", "download.memory.inUsePeakBytes",
      "download.memory.heapAfterGcAvgBytes", "download.memory.heapAfterGcPeakBytes",
      "download.memory.pooledDirectPinnedAvgBytes", "download.memory.pooledDirectPinnedPeakBytes",
      "download.memory.clientPooledDirectPinnedAvgBytes",
      "download.memory.clientPooledDirectPinnedPeakBytes",
      "download.memory.pinlessHeldDownstreamAvgBytes",
      "download.memory.pinlessHeldDownstreamPeakBytes",
      "download.heapAllocatedPerPayloadByte", "download.cpuNanosPerPayloadByte",
      "download.jitSeconds", "download.warmupSeconds",
      "small.callsPerSecond", "small.calls", "small.throughputMBps",
      "small.latencyMicros.p50", "small.latencyMicros.p90", "small.latencyMicros.p99",
      "small.memory.inUseAvgBytes", "small.memory.inUsePeakBytes",
      "small.heapAllocatedPerPayloadByte", "small.cpuMicrosPerCall",
      "idle.connections", "idle.bytesPerConnection", "idle.heapBytesPerConnection",
      "idle.pooledDirectPinnedBytesPerConnection", "idle.openSeconds");

  @Test
  void shortRunCompletesEveryVariantAndWritesJsonAndPng(@TempDir Path dir) throws Exception {
    ByteArrayOutputStream shown = new ByteArrayOutputStream();
    JsonObject returned = Compare.run(new PrintStream(shown, true, StandardCharsets.UTF_8),
        "--quick", "--duration", "1s", "--warmup", "300ms", "--clients", "2",
        "--idle-connections", "40", "--object-size", "8MiB", "--message-size", "2MiB",
        "--out", dir.toString());
    String output = shown.toString(StandardCharsets.UTF_8);
    assertNotNull(returned, output);

    JsonObject report = JsonParser.parseString(
        Files.readString(dir.resolve("report.json"), StandardCharsets.UTF_8)).getAsJsonObject();
    List<String> names = new ArrayList<>();
    for (JsonElement e : report.getAsJsonArray("variants")) {
      JsonObject v = e.getAsJsonObject();
      String name = v.get("variant").getAsString();
      names.add(name);
      assertTrue(v.get("completed").getAsBoolean(), name + " did not complete: " + v + "\n" + output);
      assertEquals(0, v.get("leaks").getAsInt(), name + " leaked; see its log in " + dir);
      for (String path : NUMBERS) {
        assertTrue(number(v, path) >= 0, name + " has no " + path);
      }
      assertTrue(number(v, "download.throughputMBps") > 0, name);
      assertTrue(number(v, "small.calls") > 0, name);
      assertEquals(0, (long) number(v, "download.payloadBytes") % (8 << 20), name + ": whole objects only");
      assertEquals(40, (int) number(v, "idle.connections"), name);
      assertTrue(number(v, "download.latencyMillis.p50") <= number(v, "download.latencyMillis.p99"), name);
    }
    assertEquals(List.of("pinless-alts", "stock-alts", "stock-plaintext"), names);
    assertEquals(2, report.getAsJsonArray("ratios").size());
    JsonObject ratio = report.getAsJsonArray("ratios").get(0).getAsJsonObject();
    assertEquals("stock-alts", ratio.get("baseline").getAsString());
    assertTrue(ratio.get("download.throughputMBps").getAsDouble() > 0);
    for (String key : List.of("generated", "command", "machine", "options")) {
      assertTrue(report.has(key), "report has no " + key);
    }
    assertEquals(40, report.getAsJsonObject("options").get("idleConnections").getAsInt());

    byte[] png = Files.readAllBytes(dir.resolve("report.png"));
    assertEquals((byte) 0x89, png[0]);
    assertEquals("PNG", new String(png, 1, 3, StandardCharsets.US_ASCII));
    BufferedImage image = ImageIO.read(dir.resolve("report.png").toFile());
    assertTrue(image.getWidth() >= 800 && image.getHeight() >= 450);

    assertTrue(output.contains("download throughput (MB/s)"), output);
    assertTrue(output.contains("[pinless-alts] idle:"), "progress is shown:\n" + output);
  }

  @Test
  void idleAloneMeasuresBothEndsEachInItsOwnProcess(@TempDir Path dir) throws Exception {
    ByteArrayOutputStream shown = new ByteArrayOutputStream();
    JsonObject report = Compare.run(new PrintStream(shown, true, StandardCharsets.UTF_8),
        "--phases", "idle", "--variants", "pinless-plaintext,stock-tls", "--idle-connections", "30",
        "--out", dir.toString());
    String output = shown.toString(StandardCharsets.UTF_8);
    assertEquals("idle", report.getAsJsonObject("options").get("phases").getAsString());
    for (JsonElement e : report.getAsJsonArray("variants")) {
      JsonObject v = e.getAsJsonObject();
      String name = v.get("variant").getAsString();
      assertTrue(v.get("completed").getAsBoolean(), name + " did not complete: " + v + "\n" + output);
      assertEquals(0, v.get("leaks").getAsInt(), name + " leaked; see its log in " + dir);
      assertFalse(v.has("download") || v.has("small"), name + " ran a phase not asked for");
      assertEquals(name.endsWith("-tls"), v.has("tlsEngine"), name + ": " + v);
      assertEquals(30, (int) number(v, "idle.connections"), name);
      double client = number(v, "idle.clientBytesPerConnection");
      double server = number(v, "idle.serverBytesPerConnection");
      // each end holds a connection's objects, measured in its own process
      assertTrue(client > 1_000 && server > 1_000, name + ": client " + client + ", server " + server);
      double total = number(v, "idle.bytesPerConnection");
      assertTrue(total >= client + server && total <= client + server + 1, name + ": " + v);
      assertEquals(number(v, "idle.heapBytesPerConnection")
              + number(v, "idle.pooledDirectPinnedBytesPerConnection"), total, 1, name);
    }
    assertTrue(output.contains("to the server end in a JVM of its own"), output);
  }

  @Test
  void zeroCopyMarshallerDownloadsChunksAndReportsCopiesPerPayloadByte(@TempDir Path dir)
      throws Exception {
    ByteArrayOutputStream shown = new ByteArrayOutputStream();
    JsonObject report = Compare.run(new PrintStream(shown, true, StandardCharsets.UTF_8),
        "--phases", "download", "--marshaller", "zero-copy",
        "--variants", "pinless-plaintext,pinless-alts,stock-plaintext", "--clients", "1",
        "--duration", "1s", "--warmup", "300ms", "--settle", "0",
        "--object-size", "8MiB", "--message-size", "2MiB", "--out", dir.toString());
    String output = shown.toString(StandardCharsets.UTF_8);
    assertEquals("zero-copy", report.getAsJsonObject("options").get("marshaller").getAsString());
    for (JsonElement e : report.getAsJsonArray("variants")) {
      JsonObject v = e.getAsJsonObject();
      String name = v.get("variant").getAsString();
      assertTrue(v.get("completed").getAsBoolean(), name + " did not complete: " + v + "\n" + output);
      assertEquals(0, v.get("leaks").getAsInt(), name + " leaked; see its log in " + dir);
      assertEquals(0, (long) number(v, "download.payloadBytes") % (8 << 20), name);
      JsonObject download = v.getAsJsonObject("download");
      double copies = download.get("copiesPerPayloadByte").getAsDouble();
      boolean bound = download.get("copiesLowerBound").getAsBoolean();
      assertTrue(download.get("copiesFormula").getAsString().length() > 0, name);
      switch (name) {
        case "pinless-plaintext":
          // counted: what the slicer and the marshaller copied, at most two per byte
          assertFalse(bound, name);
          assertTrue(copies >= 0 && copies <= 2.1, name + ": " + download);
          assertTrue(number(v, "download.pinlessCopiedBytes.messageBytes") >= 0, name);
          break;
        case "pinless-alts":
          // the decrypting copy, and what the record layer and the marshaller copied
          assertFalse(bound, name);
          assertTrue(copies >= 1 && copies <= 3.1, name + ": " + download);
          break;
        default:
          // protobuf's array and its copy of the data field; the transport's own uncounted
          assertTrue(bound, name);
          assertEquals(2, copies, name);
      }
    }
    assertTrue(output.contains("download copies per payload byte"), output);
    assertTrue(output.contains(">= 2.00"), output);
    assertTrue(output.contains("copies per payload byte, pinless-alts: (DATA "), output);
    assertTrue(Files.readString(dir.resolve("report.md"), StandardCharsets.UTF_8)
        .contains("download copies per payload byte (receiving), lower is better"));
  }

  private static double number(JsonObject o, String path) {
    JsonElement e = o;
    for (String key : path.split("\\.")) {
      if (!e.isJsonObject() || !e.getAsJsonObject().has(key)) {
        return -1;
      }
      e = e.getAsJsonObject().get(key);
    }
    return e.getAsDouble();
  }

  @Test
  void roundsMergeIntoTheirMedians() {
    List<JsonObject> rounds = new ArrayList<>();
    double[] throughputs = {300, 900, 500};
    for (double t : throughputs) {
      JsonObject r = JsonParser.parseString("{\"variant\":\"pinless-alts\",\"completed\":true,"
          + "\"leaks\":0,\"transport\":\"nio\",\"download\":{\"throughputMBps\":" + t
          + ",\"latencyMillis\":{\"p50\":" + (t / 100) + "}}}").getAsJsonObject();
      rounds.add(r);
    }
    JsonObject merged = Median.of(rounds);
    assertEquals(500, number(merged, "download.throughputMBps"));
    assertEquals(5, number(merged, "download.latencyMillis.p50"));
    assertEquals("nio", merged.get("transport").getAsString());
    assertTrue(merged.get("completed").getAsBoolean());
    assertEquals(3, merged.getAsJsonArray("rounds").size());

    rounds.get(1).addProperty("completed", false);
    rounds.get(2).addProperty("leaks", 2);
    JsonObject failed = Median.of(rounds);
    assertFalse(failed.get("completed").getAsBoolean());
    assertEquals(2, failed.get("leaks").getAsInt());
  }

  @Test
  void roundsOfTwoVariantsArePairedRoundByRound() {
    // pinless 300, 900, 500 MB/s against stock 200, 1000, 600 in the same rounds: the rounds'
    // ratios are 1.5, 0.9 and 0.833 (median 0.9), while the medians' ratio is 500 / 600 = 0.833
    double[][] throughputs = {{300, 900, 500}, {200, 1000, 600}};
    double[][] cpu = {{3, 2, 4}, {4, 2, 2}};
    List<JsonObject> merged = new ArrayList<>();
    for (int v = 0; v < 2; v++) {
      List<JsonObject> rounds = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        rounds.add(JsonParser.parseString("{\"variant\":\"" + (v == 0 ? "pinless-alts" : "stock-alts")
            + "\",\"completed\":true,\"leaks\":0,\"download\":{\"throughputMBps\":"
            + throughputs[v][i] + ",\"cpuNanosPerPayloadByte\":" + cpu[v][i] + "}}").getAsJsonObject());
      }
      merged.add(Median.of(rounds));
    }
    JsonObject ratio = Report.ratios(merged).get(0);
    assertEquals(0.833, ratio.get("download.throughputMBps").getAsDouble(), 1e-9);
    assertEquals(List.of(1.5, 0.9, 0.833), doubles(ratio.getAsJsonObject("byRound"), "download.throughputMBps"));
    assertEquals(0.9, ratio.getAsJsonObject("byRoundMedian").get("download.throughputMBps").getAsDouble(), 1e-9);
    assertEquals(List.of(0.75, 1.0, 2.0), doubles(ratio.getAsJsonObject("byRound"), "download.cpuNanosPerPayloadByte"));
    assertEquals(1.0, ratio.getAsJsonObject("byRoundMedian").get("download.cpuNanosPerPayloadByte").getAsDouble(), 1e-9);

    JsonObject report = new JsonObject();
    JsonArray variants = new JsonArray();
    merged.forEach(variants::add);
    report.add("variants", variants);
    JsonArray ratios = new JsonArray();
    ratios.add(ratio);
    report.add("ratios", ratios);
    ByteArrayOutputStream shown = new ByteArrayOutputStream();
    Report.printTable(report, new PrintStream(shown, true, StandardCharsets.UTF_8));
    String table = shown.toString(StandardCharsets.UTF_8);
    assertTrue(table.contains("round by round") && table.contains("1.50 0.90 0.83 (median 0.90)"), table);

    // one round each: nothing to pair
    JsonObject single = Report.ratios(List.of(merged.get(0).deepCopy(), merged.get(1).deepCopy()).stream()
        .peek(o -> o.remove("rounds")).toList()).get(0);
    assertFalse(single.has("byRound"));
  }

  private static List<Double> doubles(JsonObject o, String key) {
    List<Double> values = new ArrayList<>();
    o.getAsJsonArray(key).forEach(e -> values.add(e.getAsDouble()));
    return values;
  }

  @Test
  void badOptionsAreOneLineEach() {
    String[][] bad = {
      {"--bogus"}, {"--clients", "x"}, {"--clients", "0"}, {"--transport", "carrier-pigeon"},
      {"--duration"}, {"--duration", "soon"}, {"--settle", "later"},
      {"--variants", "pinless-alts,mystery"},
      {"--object-size", "3MiB", "--message-size", "2MiB"}, {"--variants", "stock-alts,stock-alts"},
      {"--rounds", "0"}, {"--phases", "idle,nap"}, {"--phases", ""}, {"--marshaller", "json"},
    };
    for (String[] args : bad) {
      Options.UsageException e = assertThrows(Options.UsageException.class, () -> Options.parse(args),
          String.join(" ", args));
      assertFalse(e.getMessage().contains("\n"), e.getMessage());
    }
  }

  @Test
  void idleConnectionsBeyondTheOpenFilesLimitAreRefusedUpFrontNamingTheLimit() throws Exception {
    // each process holds one end of each idle connection: 10,000 fit under 20,000 descriptors
    Options.checkDescriptors(10_000, 4, 20_000);
    Options.checkDescriptors(19_500, 4, 20_000);
    Options.UsageException e = assertThrows(Options.UsageException.class,
        () -> Options.checkDescriptors(19_501, 4, 20_000));
    assertTrue(e.getMessage().contains("open-files limit of 20000"), e.getMessage());
    assertTrue(e.getMessage().contains("ulimit -n"), e.getMessage());
    assertTrue(e.getMessage().contains("one end of each connection"), e.getMessage());
    assertTrue(e.getMessage().contains("at most 19500 idle connections"), e.getMessage());
    assertFalse(e.getMessage().contains("\n"), e.getMessage());
    Options.checkDescriptors(9_000, 4, 10_000);
    assertThrows(Options.UsageException.class, () -> Options.checkDescriptors(9_501, 4, 10_000));
    // the download phase's clients hold both ends in one process
    Options.checkDescriptors(1, 250, 1_000);
    assertThrows(Options.UsageException.class, () -> Options.checkDescriptors(1, 251, 1_000));
    Options.checkDescriptors(1_000_000, 4, 0);
    assertTrue(Options.openFilesLimit() > 0, "the limit is known on this machine");
  }

  @Test
  void phasesRunInTheirOwnOrderAndReachTheVariantsJvm() throws Exception {
    assertEquals(List.of("download", "small", "idle"), Options.parse().phases);
    assertEquals(List.of("download", "idle"), Options.parse("--phases", "idle, download").phases);
    Options idle = Options.parse("--phases=idle");
    assertEquals(List.of("idle"), idle.phases);
    List<String> child = idle.childArgs();
    assertEquals("idle", child.get(child.indexOf("--phases") + 1));
    assertEquals(List.of("idle"), Options.parse(child.toArray(new String[0])).phases);
  }

  @Test
  void theServerEndAnswersWithItsOwnConnectionsAndMemory() throws Exception {
    Options options = Options.parse("--quick");
    try (IdleServer.Remote server =
            IdleServer.Remote.start(Variant.PINLESS_PLAINTEXT, "unused,unused", options, System.out);
        Variant.Stack client = Variant.PINLESS_PLAINTEXT.open(Transport.NIO, new String[2])) {
      int port = server.port();
      IdleServer.Measurement before = IdleServer.Remote.answer(server.measure(), "measurement");
      assertEquals(0, before.serverConnections());
      List<io.grpc.ManagedChannel> channels = new ArrayList<>();
      try {
        for (int i = 0; i < 20; i++) {
          io.grpc.ManagedChannel channel = client.newChannel(port);
          channels.add(channel);
          Workload.echo(channel, new byte[1024]).get(60, TimeUnit.SECONDS);
        }
        IdleServer.Measurement grown =
            IdleServer.Remote.answer(server.measure(), "measurement").minus(before);
        assertEquals(20, grown.serverConnections());
        // this process's heap is not in it: the server end measures its own
        assertTrue(grown.heapBytes() > 20 * 1_000L, "server end's heap growth " + grown);
      } finally {
        VariantRun.shutdown(channels);
      }
    }
  }

  @Test
  void quickShortensPhasesAndExplicitOptionsWin() throws Exception {
    Options quick = Options.parse("--quick");
    Options normal = Options.parse();
    assertTrue(quick.durationMillis < normal.durationMillis);
    assertTrue(quick.idleConnections < normal.idleConnections);
    assertEquals(7_000, Options.parse("--duration", "7s", "--quick").durationMillis);
    assertEquals(500, Options.parse("--quick", "--warmup=500ms").warmupMillis);
    assertEquals(0, quick.settleMillis);
    assertEquals(60_000, normal.settleMillis);
    assertEquals(5_000, Options.parse("--quick", "--settle", "5s").settleMillis);
    assertTrue(Options.parse("--settle", "0").childArgs().containsAll(List.of("--settle", "0ms")));
    assertEquals(64 << 20, Options.parse("--object-size", "64MiB").objectBytes);
    assertEquals(List.of(Variant.STOCK_PLAINTEXT, Variant.PINLESS_PLAINTEXT),
        Options.parse("--variants", "stock-plaintext,pinless-plaintext").variants);
    assertEquals(Transport.IO_URING, Options.parse("--transport", "io_uring").transport);
  }

  @Test
  void theCommandPrintsUsageNotAStackTraceOnABadOption() throws Exception {
    Process p = new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp", System.getProperty("java.class.path"), Compare.class.getName(), "--bogus")
        .redirectErrorStream(true)
        .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    assertEquals(2, p.exitValue(), out);
    assertTrue(out.startsWith("pinless compare: unknown option --bogus\nusage:"), out);
    assertFalse(out.contains("\tat "), out);
  }
}
