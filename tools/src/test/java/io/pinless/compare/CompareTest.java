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
import java.io.IOException;
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
 * {@code pinless compare} in a short mode: every variant's clients and its server end run each in
 * a JVM of its own (with this JVM's leak detector level, PARANOID under Maven) through every
 * phase, and the report has every field.
 */
class CompareTest {
  /** Fields every variant's result must have, with a number (checked independently of Report). */
  private static final List<String> NUMBERS = List.of(
      "download.throughputMBps", "download.objects", "download.payloadBytes",
      "download.latencyMillis.p50", "download.latencyMillis.p90", "download.latencyMillis.p99",
      "download.client.pooledDirectPinnedMeanBytes", "download.client.pooledDirectPinnedPeakBytes",
      "download.client.poolReservedMeanBytes", "download.client.poolReservedPeakBytes",
      "download.client.heapAfterGcMeanBytes", "download.client.heapAfterGcPeakBytes",
      "download.client.inUseMeanBytes", "download.client.inUsePeakBytes",
      "download.client.pinlessHeldDownstreamMeanBytes",
      "download.client.pinlessHeldDownstreamPeakBytes",
      "download.client.cpuNanosPerPayloadByte", "download.client.heapAllocatedPerPayloadByte",
      "download.server.pooledDirectPinnedMeanBytes", "download.server.poolReservedMeanBytes",
      "download.server.heapAfterGcMeanBytes", "download.server.cpuNanosPerPayloadByte",
      "download.heapAllocatedPerPayloadByte", "download.cpuNanosPerPayloadByte",
      "download.jitSeconds", "download.warmupSeconds",
      "small.callsPerSecond", "small.calls", "small.throughputMBps",
      "small.latencyMicros.p50", "small.latencyMicros.p90", "small.latencyMicros.p99",
      "small.client.pooledDirectPinnedMeanBytes", "small.client.pooledDirectPinnedPeakBytes",
      "small.client.poolReservedMeanBytes", "small.client.poolReservedPeakBytes",
      "small.client.heapAfterGcMeanBytes", "small.client.heapAfterGcPeakBytes",
      "small.client.cpuNanosPerPayloadByte", "small.client.cpuMicrosPerCall",
      "small.server.cpuMicrosPerCall",
      "small.heapAllocatedPerPayloadByte", "small.cpuMicrosPerCall",
      "idle.connections", "idle.bytesPerConnection", "idle.heapBytesPerConnection",
      "idle.pooledDirectPinnedBytesPerConnection", "idle.openSeconds");

  /**
   * The client process's figures that must be above 0 in every phase: the pools reserved a chunk,
   * a collection left some heap, the process used CPU. Pinned bytes are sampled and may be 0 at
   * every sample of a short small-call phase; in the download phase 2 MiB messages pin them.
   */
  private static final List<String> CLIENT_POSITIVE = List.of(
      "client.poolReservedMeanBytes", "client.poolReservedPeakBytes",
      "client.heapAfterGcMeanBytes", "client.heapAfterGcPeakBytes",
      "client.cpuNanosPerPayloadByte");

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
      for (String phase : List.of("download", "small")) {
        for (String path : CLIENT_POSITIVE) {
          assertTrue(number(v, phase + "." + path) > 0, name + ": " + phase + "." + path);
        }
        assertServerEndRanInAnotherProcess(v, phase);
      }
      assertTrue(number(v, "download.client.pooledDirectPinnedMeanBytes") > 0, name);
      assertTrue(number(v, "download.client.pooledDirectPinnedPeakBytes")
          >= number(v, "download.client.pooledDirectPinnedMeanBytes"), name);
      assertTrue(number(v, "download.client.poolReservedPeakBytes")
          >= number(v, "download.client.pooledDirectPinnedPeakBytes"), name + ": a pool reserves"
          + " at least what its buffers pin");
    }
    assertEquals(List.of("pinless-alts", "stock-alts", "stock-plaintext"), names);
    assertEquals(2, report.getAsJsonArray("ratios").size());
    JsonObject ratio = report.getAsJsonArray("ratios").get(0).getAsJsonObject();
    assertEquals("stock-alts", ratio.get("baseline").getAsString());
    assertTrue(ratio.get("download.throughputMBps").getAsDouble() > 0);
    JsonObject pinned = ratio.getAsJsonObject("targets")
        .getAsJsonObject("download.client.pooledDirectPinnedMeanBytes");
    assertEquals(0.6, pinned.get("limit").getAsDouble());
    assertEquals(pinned.get("ratio").getAsDouble() <= 0.6, pinned.get("met").getAsBoolean());
    assertTrue(ratio.getAsJsonObject("targets").has("small.client.cpuNanosPerPayloadByte"), ratio.toString());
    // pinless ALTS over stock plaintext is no same-transport pair: no targets
    assertFalse(report.getAsJsonArray("ratios").get(1).getAsJsonObject().has("targets"));
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
    assertTrue(output.contains("download: client pooled direct pinned, mean (MiB)"), output);
    assertTrue(output.contains("targets: pinless / stock, same transport"), output);
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
    assertTrue(output.contains("download: client copies per byte"), output);
    assertTrue(output.contains(">= 2.00"), output);
    assertTrue(output.contains("copies per payload byte, pinless-alts: (DATA "), output);
    assertTrue(Files.readString(dir.resolve("report.md"), StandardCharsets.UTF_8)
        .contains("download: client copies per byte, lower is better"));
  }

  /**
   * The phase's server end ran in a process other than the client's (and this test's), started
   * with the same JVM options as the client's.
   */
  private static void assertServerEndRanInAnotherProcess(JsonObject v, String phase) {
    String name = v.get("variant").getAsString() + " " + phase;
    long client = (long) number(v, phase + ".client.pid");
    long server = (long) number(v, phase + ".server.pid");
    assertTrue(client > 0 && server > 0, name + ": pids " + client + ", " + server);
    assertTrue(client != server, name + ": the server end ran in the client's process " + client);
    assertTrue(client != ProcessHandle.current().pid(), name + ": the client ran in this test's JVM");
    JsonObject figures = v.getAsJsonObject(phase);
    String clientJvm = figures.getAsJsonObject("client").get("jvmArguments").getAsString();
    assertTrue(clientJvm.contains("-Xmx" + Compare.HEAP), name + ": " + clientJvm);
    assertEquals(clientJvm, figures.getAsJsonObject("server").get("jvmArguments").getAsString(), name);
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
            + throughputs[v][i] + ",\"client\":{\"cpuNanosPerPayloadByte\":" + cpu[v][i]
            + "}}}").getAsJsonObject());
      }
      merged.add(Median.of(rounds));
    }
    JsonObject ratio = Report.ratios(merged).get(0);
    assertEquals(0.833, ratio.get("download.throughputMBps").getAsDouble(), 1e-9);
    assertEquals(List.of(1.5, 0.9, 0.833), doubles(ratio.getAsJsonObject("byRound"), "download.throughputMBps"));
    assertEquals(0.9, ratio.getAsJsonObject("byRoundMedian").get("download.throughputMBps").getAsDouble(), 1e-9);
    assertEquals(List.of(0.75, 1.0, 2.0),
        doubles(ratio.getAsJsonObject("byRound"), "download.client.cpuNanosPerPayloadByte"));
    assertEquals(1.0, ratio.getAsJsonObject("byRoundMedian")
        .get("download.client.cpuNanosPerPayloadByte").getAsDouble(), 1e-9);

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
    // the download phase's clients hold one end each: the server end is another process
    Options.checkDescriptors(1, 500, 1_000);
    assertThrows(Options.UsageException.class, () -> Options.checkDescriptors(1, 501, 1_000));
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
    try (RemoteServerEnd server =
            RemoteServerEnd.start(Variant.PINLESS_PLAINTEXT, "unused,unused", options, System.out);
        Variant.Stack client = Variant.PINLESS_PLAINTEXT.open(Transport.NIO, new String[2])) {
      int port = server.port();
      Measurement before = RemoteServerEnd.answer(server.measure(), "measurement");
      assertEquals(0, before.serverConnections());
      server.begin();
      List<io.grpc.ManagedChannel> channels = new ArrayList<>();
      try {
        for (int i = 0; i < 20; i++) {
          io.grpc.ManagedChannel channel = client.newChannel(port);
          channels.add(channel);
          Workload.echo(channel, new byte[1024]).get(60, TimeUnit.SECONDS);
        }
        JsonObject figures = server.end();
        // its own process's figures: another pid, and the CPU its server spent on the calls
        assertTrue(figures.get("pid").getAsLong() != ProcessHandle.current().pid(), figures.toString());
        assertTrue(figures.get("cpuNanos").getAsLong() > 0, figures.toString());
        assertTrue(figures.get("poolReservedPeakBytes").getAsLong() > 0, figures.toString());
        Measurement grown = RemoteServerEnd.answer(server.measure(), "measurement").minus(before);
        assertEquals(20, grown.serverConnections());
        // this process's heap is not in it: the server end measures its own
        assertTrue(grown.heapBytes() > 20 * 1_000L, "server end's heap growth " + grown);
        // a phase's figures are asked for once
        IOException refused = assertThrows(IOException.class, server::end);
        assertTrue(String.valueOf(refused.getCause()).contains("end without begin"), refused.toString());
      } finally {
        VariantRun.shutdown(channels);
      }
    }
  }

  @Test
  void targetsMarkEachPinlessVariantAgainstStockOfItsTransport() {
    List<JsonObject> variants = new ArrayList<>();
    // name, client pinned mean, pinned peak, reserved mean, CPU ns per byte
    Object[][] figures = {
      {"pinless-tls", 5, 4, 8, 0.9}, {"stock-tls", 10, 10, 8, 1.0},
      {"stock-plaintext", 10, 10, 4, 1.0}};
    for (Object[] f : figures) {
      variants.add(JsonParser.parseString("{\"variant\":\"" + f[0] + "\",\"completed\":true,"
          + "\"download\":{\"client\":{\"pooledDirectPinnedMeanBytes\":" + f[1]
          + ",\"pooledDirectPinnedPeakBytes\":" + f[2] + ",\"poolReservedMeanBytes\":" + f[3]
          + ",\"cpuNanosPerPayloadByte\":" + f[4] + "}}}").getAsJsonObject());
    }
    List<JsonObject> ratios = Report.ratios(variants);
    assertEquals(2, ratios.size());
    JsonObject tls = ratios.get(0);
    assertEquals("stock-tls", tls.get("baseline").getAsString());
    JsonObject marks = tls.getAsJsonObject("targets");
    assertTrue(marks.getAsJsonObject("download.client.pooledDirectPinnedMeanBytes").get("met").getAsBoolean());
    // 0.4 of stock's peak is under 0.5; the reserved ratio of 1.0 is at its limit, so met
    assertTrue(marks.getAsJsonObject("download.client.pooledDirectPinnedPeakBytes").get("met").getAsBoolean());
    assertTrue(marks.getAsJsonObject("download.client.poolReservedMeanBytes").get("met").getAsBoolean());
    assertFalse(marks.has("small.client.cpuNanosPerPayloadByte"), "no small phase, no mark");
    assertFalse(ratios.get(1).has("targets"), "pinless TLS over stock plaintext is not marked");

    variants.get(0).getAsJsonObject("download").getAsJsonObject("client")
        .addProperty("pooledDirectPinnedMeanBytes", 7);
    JsonObject missed = Report.ratios(variants).get(0);
    assertFalse(missed.getAsJsonObject("targets")
        .getAsJsonObject("download.client.pooledDirectPinnedMeanBytes").get("met").getAsBoolean());
    List<String> lines = Targets.tableLines(List.of(missed));
    String table = String.join("\n", lines);
    assertTrue(table.contains("pinless-tls / stock-tls"), table);
    assertTrue(lines.stream().anyMatch(l -> l.startsWith("download: client pooled direct pinned, mean")
        && l.contains("<= 0.6") && l.endsWith("0.70 MISSED")), table);
    assertTrue(lines.stream().anyMatch(l -> l.startsWith("download: client pool reserved, peak")
        && l.endsWith("-")), table);
    assertTrue(Targets.markdown(List.of(missed)).contains("| <= 0.6 | 0.70 MISSED |"));
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
    assertEquals(Transport.IO_URING_NO_RING,
        Options.parse("--transport", "io_uring_noring").transport);
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
