package io.pinless.compare;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.grpc.Server;
import io.pinless.alts.handshake.LocalHandshakerMain;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@code pinless compare}: what pinless saves, measured side by side on this machine. Starts the
 * local ALTS handshakers in this process, then runs each variant (pinless ALTS, stock grpc-alts,
 * stock plaintext grpc-netty, by default) through the same phases: the download loop, many small
 * unary calls, and idle connections. A variant's clients run in a JVM of its own ({@link
 * VariantRun}) and its server end in another ({@link ServerEnd}), so that each process holds one
 * end of each connection and measures only its own. Prints one table, headed by the client
 * process's figures and their ratios against the targets ({@link Targets}), and writes {@code
 * report.json}, {@code report.md} and {@code report.png}.
 *
 * <pre>
 *   mvn -q -Ptools -DskipTests package &amp;&amp; java -jar tools/target/pinless-compare.jar [--quick] [options]
 * </pre>
 */
public final class Compare {
  /** Every variant's JVM gets the same heap. */
  static final String HEAP = "1g";

  private Compare() {}

  /** Runs the comparison; exits 0 when every variant completed, 1 if one failed, 2 on bad options. */
  public static void main(String[] args) {
    int status;
    try {
      JsonObject report = run(System.out, args);
      status = report == null || allCompleted(report) ? 0 : 1;
    } catch (Options.UsageException e) {
      System.err.println("pinless compare: " + e.getMessage());
      System.err.println(Options.USAGE);
      status = 2;
    } catch (Exception e) {
      System.err.println("pinless compare: failed: " + e);
      status = 1;
    }
    System.exit(status);
  }

  /** Whether every variant of {@code report} completed its phases with no leak reported. */
  static boolean allCompleted(JsonObject report) {
    for (var e : report.getAsJsonArray("variants")) {
      JsonObject v = e.getAsJsonObject();
      if (!v.get("completed").getAsBoolean() || v.get("leaks").getAsInt() != 0) {
        return false;
      }
    }
    return true;
  }

  /**
   * Runs the comparison that {@code args} describe, showing progress and the table on {@code out}.
   *
   * @return the report written to {@code report.json}, or null if only the usage was asked for
   */
  public static JsonObject run(PrintStream out, String... args)
      throws Options.UsageException, IOException, InterruptedException {
    Options options = Options.parse(args);
    if (options.help) {
      out.println(Options.USAGE);
      return null;
    }
    System.setProperty("java.awt.headless", "true");
    Files.createDirectories(options.out);
    out.printf(Locale.ROOT, "pinless compare: %s on %s; phases %s; %d clients, %d idle "
            + "connections, phases of %d ms after %d ms of warm-up; %d round(s); report in %s%n",
        names(options.variants), options.transport.name, String.join(",", options.phases),
        options.clients, options.idleConnections, options.durationMillis, options.warmupMillis,
        options.rounds, options.out);
    JsonObject report = new JsonObject();
    report.addProperty("tool", "pinless compare");
    report.addProperty("generated", Instant.now().truncatedTo(ChronoUnit.SECONDS).toString());
    report.addProperty("command", ("java -jar tools/target/pinless-compare.jar " + String.join(" ", args)).trim());
    report.add("machine", machine());
    report.add("options", options(options));
    JsonArray variants = new JsonArray();
    Server clientHandshaker = LocalHandshakerMain.start(0, "client-sa");
    Server serverHandshaker = LocalHandshakerMain.start(0, "server-sa");
    try {
      String handshakers = LocalHandshakerMain.hostAndPort(clientHandshaker) + ","
          + LocalHandshakerMain.hostAndPort(serverHandshaker);
      // Rounds go through the variants in turn, so that a slow spell of a shared machine falls
      // on all of them; each figure reported is then the median of a variant's rounds.
      List<List<JsonObject>> rounds = new ArrayList<>();
      options.variants.forEach(v -> rounds.add(new ArrayList<>()));
      for (int round = 1; round <= options.rounds; round++) {
        for (int i = 0; i < options.variants.size(); i++) {
          rounds.get(i).add(runVariant(options.variants.get(i), round, options, handshakers, out));
        }
      }
      for (List<JsonObject> variantRounds : rounds) {
        variants.add(Median.of(variantRounds));
      }
    } finally {
      clientHandshaker.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      serverHandshaker.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    report.add("variants", variants);
    List<JsonObject> results = new ArrayList<>();
    variants.forEach(e -> results.add(e.getAsJsonObject()));
    JsonArray ratios = new JsonArray();
    Report.ratios(results).forEach(ratios::add);
    report.add("ratios", ratios);
    out.println();
    Report.printTable(report, out);
    Path json = Report.writeJson(report, options.out);
    Path png = Report.writeChart(report, options.out);
    Path md = Report.writeMarkdown(report, options.out);
    out.printf(Locale.ROOT, "%nwrote %s, %s and %s%n", json, png, md);
    return report;
  }

  /** Runs {@code variant} in its own JVM and returns its result, with the leaks it reported. */
  private static JsonObject runVariant(Variant variant, int round, Options options,
      String handshakers, PrintStream out) throws IOException, InterruptedException {
    String name = options.rounds == 1 ? variant.name : variant.name + "-round" + round;
    Path resultFile = options.out.resolve(name + ".json");
    Path logFile = options.out.resolve(name + ".log");
    Files.deleteIfExists(resultFile);
    List<String> command = javaCommand(VariantRun.class);
    command.addAll(List.of(
        "--variant", variant.name, "--handshakers", handshakers, "--result", resultFile.toString()));
    command.addAll(options.childArgs());
    out.printf(Locale.ROOT, "%n[%s] starting in its own JVM (-Xmx%s)%s%n", variant.name, HEAP,
        options.rounds == 1 ? "" : ", round " + round + " of " + options.rounds);
    long start = System.nanoTime();
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    AtomicInteger leaks = new AtomicInteger();
    Deque<String> tail = new ArrayDeque<>();
    Thread reader = new Thread(() -> forward(process, variant, logFile, out, leaks, tail),
        "pinless-compare-" + variant.name);
    reader.start();
    // and 20 ms per idle connection: more than opening one over ALTS takes on two shared cores
    long limitMillis = 4 * (options.warmupMillis + options.durationMillis)
        + TimeUnit.MINUTES.toMillis(6) + 20L * options.idleConnections;
    boolean exited = process.waitFor(limitMillis, TimeUnit.MILLISECONDS);
    if (!exited) {
      process.destroyForcibly().waitFor();
    }
    reader.join();
    JsonObject result;
    if (Files.exists(resultFile)) {
      result = JsonParser.parseString(Files.readString(resultFile, StandardCharsets.UTF_8)).getAsJsonObject();
    } else {
      result = new JsonObject();
      result.addProperty("variant", variant.name);
      result.addProperty("completed", false);
      result.addProperty("error", exited
          ? "its JVM exited with " + process.exitValue() + " and no result"
          : "did not finish within " + limitMillis + " ms");
    }
    result.addProperty("leaks", leaks.get());
    result.addProperty("wallSeconds", Math.round((System.nanoTime() - start) / 1e8) / 10.0);
    if (!result.get("completed").getAsBoolean()) {
      out.printf(Locale.ROOT, "[%s] FAILED: %s; the last lines of %s:%n", variant.name,
          result.get("error").getAsString(), logFile);
      synchronized (tail) {
        tail.forEach(line -> out.println("    " + line));
      }
    } else if (leaks.get() > 0) {
      out.printf(Locale.ROOT, "[%s] %d leak(s) reported by Netty: see %s%n", variant.name, leaks.get(), logFile);
    }
    return result;
  }

  /**
   * The command that runs {@code main} in a JVM of its own, with this JVM's class path, the heap
   * every variant gets, and this JVM's leak detector level (both Netty copies; off if unset). A
   * variant's JVM starts its server ends with it too, so both get the same options.
   */
  static List<String> javaCommand(Class<?> main) {
    String leakLevel = System.getProperty("io.netty.leakDetection.level", "disabled");
    return new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xms" + HEAP, "-Xmx" + HEAP, "-XX:+UseG1GC", "-Djava.awt.headless=true",
        "-Dio.netty.leakDetection.level=" + leakLevel,
        "-Dio.grpc.netty.shaded.io.netty.leakDetection.level=" + leakLevel,
        "-cp", System.getProperty("java.class.path"),
        main.getName()));
  }

  /** Copies a variant's output to its log, shows its progress lines, counts leak reports. */
  private static void forward(Process process, Variant variant, Path logFile, PrintStream out,
      AtomicInteger leaks, Deque<String> tail) {
    try (BufferedReader in = new BufferedReader(
            new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter log = new PrintWriter(Files.newBufferedWriter(logFile, StandardCharsets.UTF_8))) {
      for (String line; (line = in.readLine()) != null; ) {
        log.println(line);
        if (line.startsWith(VariantRun.PROGRESS)) {
          out.printf(Locale.ROOT, "[%s] %s%n", variant.name, line.substring(VariantRun.PROGRESS.length()));
        }
        if (line.contains("LEAK:")) {
          leaks.incrementAndGet();
        }
        synchronized (tail) {
          tail.addLast(line);
          if (tail.size() > 20) {
            tail.removeFirst();
          }
        }
      }
    } catch (IOException e) {
      out.printf(Locale.ROOT, "[%s] lost its output: %s%n", variant.name, e);
    }
  }

  private static String names(List<Variant> variants) {
    List<String> names = new ArrayList<>();
    variants.forEach(v -> names.add(v.name));
    return String.join(", ", names);
  }

  private static JsonObject machine() {
    JsonObject m = new JsonObject();
    m.addProperty("cores", Runtime.getRuntime().availableProcessors());
    m.addProperty("os", System.getProperty("os.name") + " " + System.getProperty("os.version")
        + " " + System.getProperty("os.arch"));
    m.addProperty("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.version"));
    m.addProperty("heapPerVariant", HEAP);
    return m;
  }

  private static JsonObject options(Options o) {
    JsonObject j = new JsonObject();
    j.addProperty("quick", o.quick);
    j.addProperty("transport", o.transport.name);
    j.addProperty("phases", String.join(",", o.phases));
    j.addProperty("clients", o.clients);
    j.addProperty("idleConnections", o.idleConnections);
    j.addProperty("objectBytes", o.objectBytes);
    j.addProperty("messageBytes", o.messageBytes);
    j.addProperty("marshaller", o.marshaller.name);
    j.addProperty("smallBytes", o.smallBytes);
    j.addProperty("inFlight", o.inFlight);
    j.addProperty("durationMillis", o.durationMillis);
    j.addProperty("warmupMillis", o.warmupMillis);
    j.addProperty("rounds", o.rounds);
    return j;
  }
}
