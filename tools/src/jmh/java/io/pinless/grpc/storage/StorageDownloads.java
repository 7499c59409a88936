package io.pinless.grpc.storage;

import io.pinless.compare.Median;
import io.pinless.grpc.Interleaved;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;
import java.util.stream.Stream;

/**
 * The Cloud Storage client's download loop, as a user meets it, over pinless as gRPC's transport
 * provider and over the transport the client brings (grpc-netty-shaded), each in JVMs of its own.
 *
 * <pre>
 *   mvn -q -Ptools,jmh -DskipTests package
 *   java -cp tools/target/benchmarks.jar io.pinless.grpc.storage.StorageDownloads \
 *       [rounds (5)] [warm-up seconds (10)] [window seconds (10)] [object MiB (64)] \
 *       [apis (high-level,gapic)]
 * </pre>
 *
 * <p>One {@link FakeStorageServer} JVM (stock grpc-netty, h2c on 127.0.0.1) serves one object for
 * the whole run. In each round, for each API ({@code high-level}: {@code Storage}'s reader;
 * {@code gapic}: the generated {@code StorageClient}), three client JVMs run in turn:
 * {@code pinless} (started with {@code -Dpinless.provider=true}), {@code stock}, and {@code
 * control}, a second stock JVM. The order of all of them rotates from round to round. gRPC's
 * registry picks its provider once per JVM, so a JVM is a variant; each checks it got the one it
 * is named after (see {@link StorageDownloadClient}).
 *
 * <p>Each client JVM checks its first download's bytes, downloads in a loop for the warm-up, then
 * measures a window of whole downloads and reports {@link DownloadFigures}: throughput, CPU per
 * payload byte, pooled direct memory pinned and reserved (every pool of both Netty copies,
 * sampled every 50 ms), live heap after collections, and the share of ReadObject content bytes
 * that were views of direct buffers.
 *
 * <p>It prints a line per client JVM, then per API the ratios pinless / stock and, as the noise
 * they must stand out of, control / stock, each as the rounds' median and geometric mean with a
 * 95% confidence interval ({@link Interleaved#summarize}).
 *
 * <p>Class path: the client needs the protobuf-java and Guava that its BOM names, which are not
 * the tools' own, and its SLF4J API, which the tools leave out. The build copies them into {@code
 * tools/target/storage-runtime}, and every JVM started here has them ahead of this JVM's class
 * path (a shaded jar's older copies are then never loaded; separate jars of them are left out).
 * {@code -Dpinless.storage.runtime=DIR} names another directory. The leak detector level of this JVM ({@code io.netty.leakDetection.level},
 * default disabled) is passed to both Netty copies of every JVM; a leak report fails the run.
 */
public final class StorageDownloads {
  /** The heap of every JVM started here, as pinless compare gives its variants. */
  private static final String HEAP = "1g";
  /** A client JVM's start, setup and checked first download, at the most, in seconds. */
  private static final int SETUP_SECONDS = 180;

  private StorageDownloads() {}

  /** A client JVM to run in each round: its API, its variant, and its label in the output. */
  record Run(String api, String variant, String label) {}

  /**
   * A figure compared between variants: its name, how to read it from a JVM's figures, and the
   * unit its medians are printed in.
   */
  private record Figure(String name, ToDoubleFunction<DownloadFigures> value, double unit) {}

  /** Bytes in a MiB, for the memory figures. */
  private static final double MIB = 1 << 20;

  private static final List<Figure> FIGURES = List.of(
      new Figure("MB/s", DownloadFigures::megabytesPerSecond, 1),
      new Figure("CPU ns/B", DownloadFigures::cpuNanosPerByte, 1),
      new Figure("pinned MiB mean", DownloadFigures::pinnedMean, MIB),
      new Figure("pinned MiB peak", DownloadFigures::pinnedPeak, MIB),
      new Figure("reserved MiB mean", DownloadFigures::reservedMean, MIB),
      new Figure("reserved MiB peak", DownloadFigures::reservedPeak, MIB),
      new Figure("heap MiB after GC", DownloadFigures::heapAfterGc, MIB));

  /** Runs the comparison; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    double warmup = args.length > 1 ? Double.parseDouble(args[1]) : 10;
    double window = args.length > 2 ? Double.parseDouble(args[2]) : 10;
    int objectMib = args.length > 3 ? Integer.parseInt(args[3]) : 64;
    List<String> apis = List.of(args.length > 4 ? args[4].split(",") : new String[] {
        "high-level", "gapic"});
    if (rounds < 1 || objectMib < 1 || objectMib > 1024) {
      throw new IllegalArgumentException("needs at least one round and 1 to 1024 MiB");
    }
    List<Run> runs = new ArrayList<>();
    for (String api : apis) {
      runs.add(new Run(api, "pinless", "pinless"));
      runs.add(new Run(api, "stock", "stock"));
      runs.add(new Run(api, "stock", "control"));
    }
    PrintStream out = System.out;
    out.printf(Locale.ROOT, "%d MiB object, %d rounds of %d client JVMs, %.0f s warm-up and %.0f s"
            + " window each; %s%n", objectMib, rounds, runs.size(), warmup, window,
        System.getProperty("java.vm.name") + " " + System.getProperty("java.version"));
    Map<Run, DownloadFigures[]> results = new LinkedHashMap<>();
    runs.forEach(run -> results.put(run, new DownloadFigures[rounds]));
    try (ServerJvm server = ServerJvm.start(objectMib << 20, System.err)) {
      out.printf(Locale.ROOT, "%5s %-10s %-8s %8s %8s %9s %9s %9s %9s %9s %6s%n", "round", "api",
          "variant", "MB/s", "CPU ns/B", "pinned", "peak", "reserved", "peak", "heap", "direct");
      for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < runs.size(); k++) {
          Run run = runs.get((k + r) % runs.size());
          DownloadFigures f = runClient(server, run.api(), run.variant(), warmup, window,
              System.err);
          results.get(run)[r] = f;
          out.printf(Locale.ROOT, "%5d %-10s %-8s %8.1f %8.3f %9s %9s %9s %9s %9s %6.3f%n", r + 1,
              run.api(), run.label(), f.megabytesPerSecond(), f.cpuNanosPerByte(),
              mib(f.pinnedMean()), mib(f.pinnedPeak()), mib(f.reservedMean()),
              mib(f.reservedPeak()), mib(f.heapAfterGc()), f.directShare());
        }
      }
    }
    out.println("(memory in MiB: pinned and reserved are the mean and peak of samples;"
        + " heap is the live heap after collections, mean)");
    for (String api : apis) {
      summarize(api, results.get(new Run(api, "pinless", "pinless")),
          results.get(new Run(api, "stock", "stock")),
          results.get(new Run(api, "stock", "control")), out);
    }
  }

  private static String mib(long bytes) {
    return String.format(Locale.ROOT, "%.2f", bytes / MIB);
  }

  /** Prints each figure's ratios for one API, and the direct shares seen. */
  private static void summarize(String api, DownloadFigures[] pinless, DownloadFigures[] stock,
      DownloadFigures[] control, PrintStream out) {
    out.printf(Locale.ROOT, "%s, %d rounds:%n", api, stock.length);
    for (Figure figure : FIGURES) {
      out.printf(Locale.ROOT, "%s %s, medians: pinless %.3f, stock %.3f, control %.3f%n", api,
          figure.name(), median(pinless, figure.value()) / figure.unit(),
          median(stock, figure.value()) / figure.unit(),
          median(control, figure.value()) / figure.unit());
      ratios(api + " " + figure.name() + " pinless / stock", pinless, stock, figure.value(), out);
      ratios(api + " " + figure.name() + " control / stock", control, stock, figure.value(), out);
    }
    out.printf(Locale.ROOT, "%s direct share, lowest of the rounds: pinless %.4f, stock %.4f,"
            + " control %.4f%n", api, lowest(pinless, DownloadFigures::directShare),
        lowest(stock, DownloadFigures::directShare), lowest(control, DownloadFigures::directShare));
  }

  private static void ratios(String name, DownloadFigures[] over, DownloadFigures[] under,
      ToDoubleFunction<DownloadFigures> value, PrintStream out) {
    double[] ratios = new double[over.length];
    for (int r = 0; r < ratios.length; r++) {
      ratios[r] = value.applyAsDouble(over[r]) / value.applyAsDouble(under[r]);
      if (!(ratios[r] > 0) || Double.isInfinite(ratios[r])) {
        out.printf(Locale.ROOT, "%s: no ratio (round %d: %s / %s)%n", name, r + 1,
            value.applyAsDouble(over[r]), value.applyAsDouble(under[r]));
        return;
      }
    }
    if (ratios.length == 1) {
      out.printf(Locale.ROOT, "%s: %.3f (one round, no interval)%n", name, ratios[0]);
    } else {
      Interleaved.summarize(name, ratios);
    }
  }

  private static double median(DownloadFigures[] figures, ToDoubleFunction<DownloadFigures> value) {
    return Median.median(Stream.of(figures).map(value::applyAsDouble).toList());
  }

  private static double lowest(DownloadFigures[] figures, ToDoubleFunction<DownloadFigures> value) {
    double lowest = Double.POSITIVE_INFINITY;
    for (DownloadFigures f : figures) {
      lowest = Math.min(lowest, value.applyAsDouble(f));
    }
    return lowest;
  }

  /**
   * Runs one client JVM against {@code server} and returns its figures. Its other output goes to
   * {@code log}, each line tagged with the API and variant.
   *
   * @throws IllegalStateException if the JVM fails, reports no figures or reports a leak
   */
  static DownloadFigures runClient(ServerJvm server, String api, String variant,
      double warmupSeconds, double windowSeconds, PrintStream log)
      throws IOException, InterruptedException {
    List<String> command = javaCommand(StorageDownloadClient.class, variant.equals("pinless"));
    command.addAll(List.of(api, variant, String.valueOf(server.port()),
        String.valueOf(server.objectBytes()), String.valueOf(server.crc32c()),
        String.valueOf(warmupSeconds), String.valueOf(windowSeconds)));
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    String tag = "[" + api + " " + variant + "] ";
    DownloadFigures figures = null;
    int leaks = 0;
    Deque<String> tail = new ArrayDeque<>();
    try (BufferedReader in = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line; (line = in.readLine()) != null; ) {
        if (line.startsWith(DownloadFigures.PREFIX + " ")) {
          figures = DownloadFigures.parse(line);
          continue;
        }
        if (line.contains("LEAK:")) {
          leaks++;
        }
        log.println(tag + line);
        tail.addLast(line);
        if (tail.size() > 30) {
          tail.removeFirst();
        }
      }
    }
    long limit = (long) (warmupSeconds + windowSeconds) + SETUP_SECONDS;
    if (!process.waitFor(limit, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new IllegalStateException(tag + "did not end within " + limit + " s");
    }
    if (process.exitValue() != 0 || figures == null || leaks > 0) {
      throw new IllegalStateException(tag + "exited with " + process.exitValue() + ", "
          + (figures == null ? "no figures" : "figures") + ", " + leaks + " leak reports; its"
          + " last lines:\n  " + String.join("\n  ", tail));
    }
    return figures;
  }

  /**
   * The command that runs {@code main} in a JVM of its own: the heap every JVM here gets, this
   * JVM's leak detector level for both Netty copies, pinless as gRPC's provider if {@code
   * pinless}, and {@link #storageClassPath}.
   */
  static List<String> javaCommand(Class<?> main, boolean pinless) throws IOException {
    String leakLevel = System.getProperty("io.netty.leakDetection.level", "disabled");
    List<String> command = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xms" + HEAP, "-Xmx" + HEAP, "-XX:+UseG1GC",
        "-Dio.netty.leakDetection.level=" + leakLevel,
        "-Dio.grpc.netty.shaded.io.netty.leakDetection.level=" + leakLevel,
        // The client brings SLF4J's API and no binding; SLF4J would say so on every start.
        "-Dslf4j.internal.verbosity=ERROR"));
    if (pinless) {
      command.add("-Dpinless.provider=true");
    }
    command.addAll(List.of("-cp", storageClassPath(), main.getName()));
    return command;
  }

  /**
   * The jars of the storage runtime directory, then this JVM's class path less its own
   * protobuf-java and Guava jars.
   */
  static String storageClassPath() throws IOException {
    Path dir = storageRuntime();
    List<String> path = new ArrayList<>();
    try (Stream<Path> files = Files.list(dir)) {
      files.filter(f -> f.toString().endsWith(".jar")).sorted()
          .forEach(f -> path.add(f.toString()));
    }
    if (path.isEmpty()) {
      throw new IllegalStateException("no jars in " + dir
          + ": build the tools with Maven first (mvn -Ptools,jmh -DskipTests package)");
    }
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      String name = Path.of(entry).getFileName().toString();
      if (!name.matches("(protobuf-java|guava)-\\d.*\\.jar")) {
        path.add(entry);
      }
    }
    return String.join(File.pathSeparator, path);
  }

  /**
   * {@code -Dpinless.storage.runtime}, or {@code storage-runtime} beside this class's jar or
   * class directory (both in {@code tools/target}).
   */
  private static Path storageRuntime() {
    String named = System.getProperty("pinless.storage.runtime");
    if (named != null) {
      return Path.of(named);
    }
    try {
      Path code = Path.of(StorageDownloads.class.getProtectionDomain().getCodeSource()
          .getLocation().toURI());
      return code.getParent().resolve("storage-runtime");
    } catch (URISyntaxException e) {
      throw new IllegalStateException("cannot locate " + StorageDownloads.class.getName(), e);
    }
  }
}
