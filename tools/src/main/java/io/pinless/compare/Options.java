package io.pinless.compare;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The options of {@code pinless compare}, parsed from its command line. */
public final class Options {
  /** The usage text printed with {@code --help} and after a bad option. */
  public static final String USAGE = String.join("\n",
      "usage: java -jar tools/target/pinless-compare.jar [options]",
      "  --quick                  every phase for a few seconds (the whole run well under 2 minutes)",
      "  --variants a,b,...       which to run, in order (default pinless-alts,stock-alts,stock-plaintext;",
      "                           also pinless-plaintext, and pinless-tls and stock-tls: TLS over",
      "                           OpenSSL's engine with netty-tcnative present, else the JDK's)",
      "  --transport t            nio (default), epoll, io_uring (with a provided-buffer ring: 2 MiB",
      "                           buffers for ALTS and TLS, 48 KiB for plaintext) or io_uring_noring",
      "  --clients n              concurrent clients (connections) in the download and 1 KiB phases (default 4)",
      "  --idle-connections n     connections opened and left idle in the idle phase (default 1000)",
      "  --phases p,q,...         which phases run: download, small, idle (default all three)",
      "  --object-size s          the object downloaded again and again (default 64MiB)",
      "  --message-size s         the messages it is streamed in (default 2MiB)",
      "  --marshaller m           the download's messages: bytes (default; each read once), proto",
      "                           (protobuf Chunk messages, protobuf's marshaller everywhere) or",
      "                           zero-copy (Chunk messages, pinless's zero-copy marshaller in the",
      "                           pinless variants, protobuf's in the stock ones)",
      "  --small-size s           the request and the response of the small-message phase (default 1KiB)",
      "  --in-flight n            small calls in flight per client (default 32)",
      "  --duration d             measured time of the download and 1 KiB phases (default 20s)",
      "  --warmup d               unmeasured time before each of them (default 5s)",
      "  --settle d               then warm up on until the JIT compilers settle, at most this much more",
      "                           (default 60s; 0 for a fixed warm-up)",
      "  --rounds n               run the variants in turn n times; report each figure's median (default 1)",
      "  --out dir                where report.json and report.png go (default target/pinless-report)",
      "  --help                   this text",
      "sizes take B, KiB, MiB (1KiB = 1024); durations take ms or s. Each phase's server end runs",
      "in a JVM of its own; the report's headline rows are the client process's own figures.");

  /** Variants run when {@code --variants} is not given. */
  static final List<Variant> DEFAULT_VARIANTS =
      List.of(Variant.PINLESS_ALTS, Variant.STOCK_ALTS, Variant.STOCK_PLAINTEXT);

  /** Every phase, in the order they run. */
  static final List<String> PHASES = List.of("download", "small", "idle");

  boolean help;
  boolean quick;
  List<String> phases = PHASES;
  List<Variant> variants = DEFAULT_VARIANTS;
  Transport transport = Transport.NIO;
  int clients = 4;
  int idleConnections = 1000;
  int objectBytes = 64 << 20;
  int messageBytes = 2 << 20;
  Marshalling marshaller = Marshalling.BYTES;
  int smallBytes = 1024;
  int inFlight = 32;
  long durationMillis = 20_000;
  long warmupMillis = 5_000;
  long settleMillis = 60_000;
  int rounds = 1;
  Path out = Path.of("target", "pinless-report");

  /** Thrown for a bad command line; its message is the one line shown before the usage. */
  public static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  private Options() {}

  /**
   * Parses {@code args}. {@code --quick} sets short phases and 100 idle connections; options
   * given explicitly win over it, wherever they stand.
   */
  public static Options parse(String... args) throws UsageException {
    Options o = new Options();
    Map<String, String> given = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      String value = null;
      int eq = arg.indexOf('=');
      if (arg.startsWith("--") && eq > 0) {
        value = arg.substring(eq + 1);
        arg = arg.substring(0, eq);
      }
      switch (arg) {
        case "--help":
        case "-h":
          o.help = true;
          continue;
        case "--quick":
          o.quick = true;
          continue;
        case "--variants":
        case "--transport":
        case "--clients":
        case "--idle-connections":
        case "--phases":
        case "--object-size":
        case "--message-size":
        case "--marshaller":
        case "--small-size":
        case "--in-flight":
        case "--duration":
        case "--warmup":
        case "--settle":
        case "--rounds":
        case "--out":
          if (value == null) {
            if (i + 1 == args.length) {
              throw new UsageException(arg + " needs a value");
            }
            value = args[++i];
          }
          given.put(arg, value);
          continue;
        default:
          throw new UsageException("unknown option " + arg);
      }
    }
    if (o.quick) {
      o.durationMillis = 3_000;
      o.warmupMillis = 1_000;
      o.settleMillis = 0;
      o.idleConnections = 100;
    }
    for (Map.Entry<String, String> e : given.entrySet()) {
      o.set(e.getKey(), e.getValue());
    }
    if (o.objectBytes % o.messageBytes != 0) {
      throw new UsageException("--object-size must be a multiple of --message-size");
    }
    checkDescriptors(o.idleConnections, o.clients, openFilesLimit());
    return o;
  }

  /**
   * File descriptors a variant's process keeps besides its connections: its jars, the event
   * loops' selectors and pipes, the handshaker channels, with a margin.
   */
  static final int RESERVED_DESCRIPTORS = 500;

  /**
   * Refuses a run whose processes would open more files than {@code limit}. Every phase's server
   * end runs in a process of its own, so each process holds one end of each connection: the
   * clients' in the download and small phases, closed before the idle phase, then the idle
   * connections. A limit of 0 or less is unknown and not checked.
   */
  static void checkDescriptors(int idleConnections, int clients, long limit)
      throws UsageException {
    long needed = Math.max(idleConnections, clients) + RESERVED_DESCRIPTORS;
    if (limit > 0 && needed > limit) {
      throw new UsageException(String.format(Locale.ROOT,
          "--idle-connections %d needs about %d file descriptors in each of the client's and the"
              + " server's process (one end of each connection), above the open-files limit of %d:"
              + " raise that limit (ulimit -n) or use at most %d idle connections",
          idleConnections, needed, limit, Math.max(0, limit - RESERVED_DESCRIPTORS)));
    }
  }

  /** This process's open-files limit, which the variant processes inherit; 0 when unknown. */
  static long openFilesLimit() {
    if (ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.UnixOperatingSystemMXBean unix) {
      return unix.getMaxFileDescriptorCount();
    }
    return 0;
  }

  private void set(String option, String value) throws UsageException {
    switch (option) {
      case "--variants":
        List<Variant> chosen = new ArrayList<>();
        for (String name : value.split(",")) {
          Variant v = Variant.byName(name.trim());
          if (v == null) {
            throw new UsageException("unknown variant " + name.trim() + " (one of " + Variant.names() + ")");
          }
          if (chosen.contains(v)) {
            throw new UsageException("variant " + name.trim() + " given twice");
          }
          chosen.add(v);
        }
        variants = List.copyOf(chosen);
        break;
      case "--phases":
        List<String> wanted = new ArrayList<>();
        for (String name : value.split(",")) {
          if (!PHASES.contains(name.trim())) {
            throw new UsageException("unknown phase " + name.trim() + " (one of " + PHASES + ")");
          }
          wanted.add(name.trim());
        }
        // the phases run in their own order, whatever the order given
        phases = PHASES.stream().filter(wanted::contains).toList();
        break;
      case "--transport":
        transport = Transport.byName(value);
        if (transport == null) {
          throw new UsageException(
              "unknown transport " + value + " (nio, epoll, io_uring or io_uring_noring)");
        }
        break;
      case "--clients":
        clients = count(option, value, 1, 256);
        break;
      case "--idle-connections":
        idleConnections = count(option, value, 1, 20_000);
        break;
      case "--object-size":
        objectBytes = size(option, value, 1, 1 << 30);
        break;
      case "--message-size":
        messageBytes = size(option, value, 1, 64 << 20);
        break;
      case "--marshaller":
        marshaller = Marshalling.byName(value);
        if (marshaller == null) {
          throw new UsageException("unknown marshaller " + value + " (bytes, proto or zero-copy)");
        }
        break;
      case "--small-size":
        smallBytes = size(option, value, 0, 4 << 20);
        break;
      case "--in-flight":
        inFlight = count(option, value, 1, 10_000);
        break;
      case "--duration":
        durationMillis = millis(option, value, 100);
        break;
      case "--warmup":
        warmupMillis = millis(option, value, 0);
        break;
      case "--settle":
        settleMillis = millis(option, value, 0);
        break;
      case "--rounds":
        rounds = count(option, value, 1, 20);
        break;
      case "--out":
        out = Path.of(value);
        break;
      default:
        throw new AssertionError(option);
    }
  }

  private static int count(String option, String value, int min, int max) throws UsageException {
    try {
      int n = Integer.parseInt(value);
      if (n >= min && n <= max) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new UsageException(option + " takes a whole number from " + min + " to " + max + ", not " + value);
  }

  /** Parses a size such as {@code 64MiB}, {@code 2MiB}, {@code 1KiB} or {@code 1000} (bytes). */
  static int size(String option, String value, int min, int max) throws UsageException {
    String v = value.trim().toLowerCase(Locale.ROOT);
    long unit = 1;
    for (String[] suffix : new String[][] {{"mib", "1048576"}, {"kib", "1024"}, {"m", "1048576"},
        {"k", "1024"}, {"b", "1"}}) {
      if (v.endsWith(suffix[0])) {
        unit = Long.parseLong(suffix[1]);
        v = v.substring(0, v.length() - suffix[0].length());
        break;
      }
    }
    try {
      long bytes = Long.parseLong(v.trim()) * unit;
      if (bytes >= min && bytes <= max) {
        return (int) bytes;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new UsageException(option + " takes a size from " + min + " B to " + max + " B (such as 64MiB), not " + value);
  }

  /** Parses a duration such as {@code 20s}, {@code 500ms} or {@code 20} (seconds). */
  static long millis(String option, String value, long min) throws UsageException {
    String v = value.trim().toLowerCase(Locale.ROOT);
    long unit = 1000;
    if (v.endsWith("ms")) {
      unit = 1;
      v = v.substring(0, v.length() - 2);
    } else if (v.endsWith("s")) {
      v = v.substring(0, v.length() - 1);
    }
    try {
      long ms = Long.parseLong(v.trim()) * unit;
      if (ms >= min && ms <= 3_600_000) {
        return ms;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new UsageException(option + " takes a duration of at least " + min + " ms and at most 1 h (such as 20s), not " + value);
  }

  /** The arguments a variant's own JVM gets for the phases. */
  List<String> childArgs() {
    return List.of(
        "--phases", String.join(",", phases),
        "--transport", transport.name,
        "--clients", Integer.toString(clients),
        "--idle-connections", Integer.toString(idleConnections),
        "--object-size", Integer.toString(objectBytes),
        "--message-size", Integer.toString(messageBytes),
        "--marshaller", marshaller.name,
        "--small-size", Integer.toString(smallBytes),
        "--in-flight", Integer.toString(inFlight),
        "--duration", durationMillis + "ms",
        "--warmup", warmupMillis + "ms",
        "--settle", settleMillis + "ms");
  }
}
