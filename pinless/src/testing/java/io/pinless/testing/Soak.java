package io.pinless.testing;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.concurrent.EventExecutor;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.grpc.PinlessChannelCredentials;
import io.pinless.grpc.PinlessServerCredentials;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.zip.CRC32;

/**
 * A soak run: clients churn connections through a {@link FaultProxy} to a pinless server over
 * each transport (plaintext, ALTS, TLS on the JDK's engine, and TLS on OpenSSL when netty-tcnative
 * is present) while the proxy's faults change every second or so: bytes cut into small pieces,
 * short delays, and now and then every connection reset, half-closed or closed, in the middle of
 * calls and of handshakes.
 *
 * <p>Each client worker makes a channel through its transport's proxy, makes one to four calls on
 * it (unary echoes and server streams, 0 B to {@code maxMessageBytes} each, every message carrying
 * a CRC32 of its bytes), shuts the channel down, and starts again. Every call has a deadline. A
 * call must end with exactly the bytes expected (the client compares every byte, the server checks
 * every request's checksum) or with a gRPC status; wrong bytes, an exception that is not a status,
 * or a call still open well past its deadline are failures.
 *
 * <p>At even intervals the run samples memory. A sample first quiesces the churn: the workers
 * finish the cycle they are in (their calls end and their channels terminate), the proxies have
 * no connection left and the event loops have run their pending tasks. Then it collects garbage
 * and reads the heap in use and the bytes the dedicated pooled allocators (one for the servers,
 * one for the clients, no thread caches) hand out to live buffers. Quiescing makes samples
 * comparable: without it a sample reads whatever calls happen to be in flight, megabytes apart
 * from one sample to the next. The heap figure is the live objects' bytes by the JVM's class
 * histogram, less the pools' own heap chunks (the dedicated pools' and Netty's shared one's),
 * which the pools keep or free by their own rules and which are not objects of any connection. The
 * pooled figure counts buffers, not the pages of small size classes a pool keeps empty for its
 * next buffers (printed apart, as "pages"). Memory is flat when the last sample (the end of the
 * run) is at most 5% above the sample at a fifth of the run: minute 10 against minute 2 of a
 * ten-minute run. Only growth fails: a leak grows, while the heap may shrink when something
 * outside the run lets go (another allocator's pool chunk, in the test JVM one of an earlier
 * test's), which says nothing about the run. The TLS contexts keep few resumption entries, so
 * their caches are full before the reference sample.
 *
 * <p>A task on every event loop of the servers and the clients is due every 10 ms; how late it
 * runs is a stall. A stall counts what the loop itself caused: its lateness less the time the
 * loop's thread waited for a core (Linux's scheduler statistics), the collections' pauses and
 * the hiccups a probe thread outside the loops sees (safepoints, page faults, a machine short of
 * memory), which the machine or the JVM imposes on every thread alike. The raw
 * lateness is printed too. The samples' own collections are left out, and stalls before the
 * reference sample (classes loading, the JIT compiling) are printed apart, not checked.
 *
 * <p>When {@link LeakRecorder} is installed (the tests install it; {@link #main} does) the run
 * counts the leaks Netty's detector reports; run with {@code -Dio.netty.leakDetection.level=PARANOID}
 * to have every buffer tracked.
 *
 * <pre>
 *   mvn -Ptools,jmh -DskipTests package &amp;&amp; java -Dio.netty.leakDetection.level=PARANOID \
 *       -cp tools/target/benchmarks.jar io.pinless.testing.Soak [duration] [workers] [transports]
 * </pre>
 */
public final class Soak {
  /** Worst event loop lateness a run may show. */
  public static final long STALL_LIMIT_MILLIS = 100;
  /** How far the last memory sample may be above the reference one, as a fraction of it. */
  public static final double FLAT_WITHIN = 0.05;

  private static final long CALL_DEADLINE_SECONDS = 30;
  /** How long past its deadline a call may take to end before it counts as hung. */
  private static final long HANG_GRACE_SECONDS = 15;
  private static final long STALL_PERIOD_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
  /**
   * Resumption entries each TLS context keeps. The engines' default caches hold thousands
   * and take longer than a run's churn to fill: the heap would grow with them all along, bounded
   * but never flat. A small cache is full within seconds.
   */
  private static final int TLS_RESUMPTION_ENTRIES = 64;

  /** The transports a run churns through. */
  public enum Transport {
    PLAINTEXT, ALTS, TLS_JDK, TLS_OPENSSL;

    /** Every transport this process can run: TLS on OpenSSL only with netty-tcnative. */
    public static List<Transport> available() {
      List<Transport> all = new ArrayList<>(List.of(PLAINTEXT, ALTS, TLS_JDK));
      if (OpenSsl.isAvailable()) {
        all.add(TLS_OPENSSL);
      }
      return all;
    }
  }

  /**
   * What a run does.
   *
   * @param duration how long the clients churn
   * @param samples memory samples, evenly spaced, the last at the end
   * @param workersPerTransport client workers, each churning its own channels
   * @param maxMessageBytes the largest payload of a call (a server stream's messages share it)
   * @param transports the transports to run
   * @param seed the seed of the sizes, payloads and faults
   */
  public record Options(Duration duration, int samples, int workersPerTransport,
      int maxMessageBytes, List<Transport> transports, long seed) {
    /** Two workers per transport, payloads up to 2 MiB, every available transport. */
    public static Options of(Duration duration, int samples) {
      return new Options(duration, samples, 2, 2 << 20, Transport.available(),
          System.nanoTime());
    }

    /** The same with {@code workers} per transport. */
    public Options withWorkers(int workers) {
      return new Options(duration, samples, workers, maxMessageBytes, transports, seed);
    }

    /** The same over {@code only} these transports. */
    public Options withTransports(List<Transport> only) {
      return new Options(duration, samples, workersPerTransport, maxMessageBytes,
          List.copyOf(only), seed);
    }
  }

  /**
   * One transport's calls.
   *
   * @param transport the transport
   * @param ok calls that returned exactly the bytes expected
   * @param failedWithStatus calls that ended with a gRPC status, by code
   * @param wrong calls that returned wrong bytes, or whose request reached the server damaged
   * @param otherFailures calls that ended with an exception that is not a status
   * @param hung calls not ended well past their deadline
   * @param channels channels made
   */
  public record Calls(Transport transport, long ok, Map<String, Long> failedWithStatus,
      long wrong, long otherFailures, long hung, long channels) {
    /** Calls that ended with a status, every code. */
    public long statusFailures() {
      return failedWithStatus.values().stream().mapToLong(Long::longValue).sum();
    }
  }

  /**
   * A quiesced memory sample.
   *
   * @param atMillis since the churn started
   * @param heapBytes live heap objects' bytes after collection, the pools' heap chunks left out
   * @param pooledBytes pooled bytes live buffers hold, servers and clients, at the pools' size
   *     classes
   * @param liveBuffers pooled buffers allocated and not released, servers and clients
   * @param pooledPages the pools' pages in use: live buffers, and the pages of small size
   *     classes the pools keep for their next buffers even when empty
   * @param busyPooledBytes pooled bytes live buffers hold just before quiescing, calls in flight
   * @param poolBytes memory the pools hold in chunks, in use or not
   */
  public record Sample(long atMillis, long heapBytes, long pooledBytes, long liveBuffers,
      long pooledPages, long busyPooledBytes, long poolBytes) {}

  /**
   * How late an event loop ran a task due every 10 ms, and why.
   *
   * @param lateMillis the lateness the loop itself caused: {@code rawMillis} less the time the
   *     loop's thread waited for a core and the collections' pauses in the same window
   * @param rawMillis how late the task ran
   * @param busyMillis how long the loop's thread ran on a core in the window
   * @param waitMillis how long the loop's thread was ready to run but waited for a core (Linux's
   *     scheduler statistics; 0 elsewhere)
   * @param gcMillis how long collections, or hiccups every thread saw, stopped the process in the
   *     window
   * @param loop the loop's thread
   * @param atMillis when the task was due, since the rig started
   */
  public record Stall(long lateMillis, long rawMillis, long busyMillis, long waitMillis,
      long gcMillis, String loop, long atMillis) {
    static final Stall NONE = new Stall(0, 0, 0, 0, 0, "none", 0);

    @Override
    public String toString() {
      return String.format(Locale.ROOT, "%d ms (late %d ms: on a core %d, waiting for a core %d,"
          + " paused for all %d) on %s at %d s", lateMillis, rawMillis, busyMillis, waitMillis,
          gcMillis, loop, atMillis / 1000);
    }
  }

  /**
   * A run's outcome.
   *
   * @param options what the run did
   * @param calls each transport's calls
   * @param samples the memory samples, in order
   * @param reference the sample at a fifth of the run, that the end is compared with
   * @param end the last sample, at the end of the run
   * @param leaks leaks Netty's detector reported during the run; -1 when none could be seen
   *     ({@link LeakRecorder} not installed)
   * @param warmupStall the worst lateness of an event loop task before the reference sample,
   *     while classes load and the JIT compiles (reported, not checked)
   * @param stall the worst lateness of an event loop task from the reference sample on
   * @param rawStall the task that ran latest from the reference sample on, whatever the cause
   * @param problems what went wrong beside the calls (a channel or proxy that did not drain),
   *     and the first few unexpected failures
   * @param statusExamples the first call that ended with each transport and status code
   */
  public record Result(Options options, List<Calls> calls, List<Sample> samples,
      Sample reference, Sample end, Stall warmupStall, Stall stall, Stall rawStall, long leaks,
      List<String> problems, List<String> statusExamples) {
    /** The worst lateness of an event loop task from the reference sample on. */
    public long worstStallMillis() {
      return stall.lateMillis();
    }

    /** Calls with wrong bytes, every transport. */
    public long wrong() {
      return calls.stream().mapToLong(Calls::wrong).sum();
    }

    /** Calls that failed with something other than a status, every transport. */
    public long otherFailures() {
      return calls.stream().mapToLong(Calls::otherFailures).sum();
    }

    /** Calls not ended well past their deadline, every transport. */
    public long hung() {
      return calls.stream().mapToLong(Calls::hung).sum();
    }

    /** Whether the heap at the end is at most {@link #FLAT_WITHIN} above the reference sample. */
    public boolean heapFlat() {
      return flat(reference.heapBytes, end.heapBytes);
    }

    /**
     * Whether the pooled bytes at the end are at most {@link #FLAT_WITHIN} above the
     * reference.
     */
    public boolean pooledFlat() {
      return flat(reference.pooledBytes, end.pooledBytes);
    }

    /** Every check the run fails, empty when it passes. */
    public List<String> failures() {
      List<String> failures = new ArrayList<>(problems);
      if (wrong() > 0) {
        failures.add(wrong() + " call(s) with wrong bytes");
      }
      if (otherFailures() > 0) {
        failures.add(otherFailures() + " call(s) failed without a status");
      }
      if (hung() > 0) {
        failures.add(hung() + " call(s) hung past their deadline");
      }
      for (Calls c : calls) {
        if (c.ok == 0) {
          failures.add("no call succeeded over " + c.transport);
        }
      }
      if (calls.stream().mapToLong(Calls::statusFailures).sum() == 0) {
        failures.add("no call failed with a status: the faults did not reach a call");
      }
      if (leaks > 0) {
        failures.add(leaks + " leak(s) reported by Netty's detector");
      }
      if (!heapFlat()) {
        failures.add("heap not flat: " + reference.heapBytes + " -> " + end.heapBytes);
      }
      if (!pooledFlat()) {
        failures.add("pooled bytes not flat: " + reference.pooledBytes + " -> " + end.pooledBytes);
      }
      if (stall.lateMillis() > STALL_LIMIT_MILLIS) {
        failures.add("an event loop stalled " + stall);
      }
      return failures;
    }
  }

  private static boolean flat(long reference, long end) {
    return end - reference <= FLAT_WITHIN * reference;
  }

  private Soak() {}

  /**
   * Runs a soak and prints a line per sample and the verdict; exits 0 when every check passes,
   * 1 when one fails, 2 on bad arguments.
   */
  public static void main(String[] args) throws Exception {
    // Before any buffer class loads: each makes its leak detector once.
    LeakRecorder.install();
    Duration duration;
    int workers;
    List<Transport> transports = new ArrayList<>();
    try {
      duration = args.length > 0 ? parseDuration(args[0]) : Duration.ofMinutes(10);
      workers = args.length > 1 ? Integer.parseInt(args[1]) : 2;
      for (String name : (args.length > 2 ? args[2] : "").split(",")) {
        if (!name.isBlank()) {
          transports.add(Transport.valueOf(name.trim().toUpperCase(Locale.ROOT)));
        }
      }
    } catch (RuntimeException e) {
      System.err.println("usage: Soak [duration, e.g. 10m, 90s] [workers per transport]"
          + " [transports, e.g. plaintext,alts,tls_jdk,tls_openssl]: " + e.getMessage());
      System.exit(2);
      return;
    }
    if (!LeakRecorder.paranoid()) {
      System.out.println("note: leak detection is not at PARANOID; most buffers go untracked");
    }
    int samples = (int) Math.max(5, Math.min(60, duration.toSeconds() / 10));
    Options options = Options.of(duration, samples).withWorkers(workers);
    if (!transports.isEmpty()) {
      options = options.withTransports(transports);
    }
    Result result = run(options, System.out);
    System.exit(result.failures().isEmpty() ? 0 : 1);
  }

  private static Duration parseDuration(String text) {
    String t = text.trim().toLowerCase(Locale.ROOT);
    if (t.endsWith("m")) {
      return Duration.ofMinutes(Long.parseLong(t.substring(0, t.length() - 1)));
    }
    if (t.endsWith("s")) {
      return Duration.ofSeconds(Long.parseLong(t.substring(0, t.length() - 1)));
    }
    return Duration.ofSeconds(Long.parseLong(t));
  }

  /** Runs a soak with {@code options}, printing progress to {@code out}, and returns its outcome. */
  public static Result run(Options options, PrintStream out) throws Exception {
    try (Rig rig = new Rig(options)) {
      return rig.run(out);
    }
  }

  // ---- The service: echo and server stream of checksummed messages. ----

  private static final String SERVICE = "pinless.soak.Checked";

  private static final MethodDescriptor.Marshaller<byte[]> BYTES = ByteArrays.MARSHALLER;

  private static final MethodDescriptor<byte[], byte[]> ECHO = method("Echo",
      MethodDescriptor.MethodType.UNARY);
  private static final MethodDescriptor<byte[], byte[]> STREAM = method("Stream",
      MethodDescriptor.MethodType.SERVER_STREAMING);

  private static MethodDescriptor<byte[], byte[]> method(String name,
      MethodDescriptor.MethodType type) {
    return MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(type)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
        .setRequestMarshaller(BYTES)
        .setResponseMarshaller(BYTES)
        .build();
  }

  /** {@code size} random bytes from {@code seed}, after a CRC32 of them (4 bytes, big-endian). */
  static byte[] checked(int size, long seed) {
    byte[] message = new byte[4 + size];
    byte[] payload = new byte[size];
    new SplittableRandom(seed).nextBytes(payload);
    System.arraycopy(payload, 0, message, 4, size);
    ByteBuffer.wrap(message).putInt(0, crc(message));
    return message;
  }

  /** The CRC32 of a checked message's payload. */
  private static int crc(byte[] message) {
    CRC32 crc = new CRC32();
    crc.update(message, 4, message.length - 4);
    return (int) crc.getValue();
  }

  private static boolean intact(byte[] message) {
    return message.length >= 4 && ByteBuffer.wrap(message).getInt(0) == crc(message);
  }

  /** A request for a server stream of {@code count} messages of {@code size} bytes. */
  private static byte[] streamRequest(int count, int size, long seed) {
    return ByteBuffer.allocate(16).putInt(count).putInt(size).putLong(seed).array();
  }

  /** The server side: checks requests and sends streams only while they are ready. */
  private static ServerServiceDefinition service(LongAdder damaged, int maxMessageBytes) {
    return ServerServiceDefinition.builder(SERVICE)
        .addMethod(ECHO, ServerCalls.asyncUnaryCall((request, reply) -> {
          if (!intact(request)) {
            damaged.increment();
            reply.onError(Status.DATA_LOSS.withDescription("request checksum").asRuntimeException());
            return;
          }
          reply.onNext(request);
          reply.onCompleted();
        }))
        .addMethod(STREAM, ServerCalls.asyncServerStreamingCall((request, reply) -> {
          ByteBuffer r = ByteBuffer.wrap(request);
          if (request.length != 16) {
            damaged.increment();
            reply.onError(Status.DATA_LOSS.withDescription("request size").asRuntimeException());
            return;
          }
          int count = r.getInt();
          int size = r.getInt();
          long seed = r.getLong();
          if (count < 1 || count > 16 || size < 0 || size > maxMessageBytes) {
            damaged.increment();
            reply.onError(Status.DATA_LOSS.withDescription("request fields").asRuntimeException());
            return;
          }
          new Sender(count, size, seed, (ServerCallStreamObserver<byte[]>) reply).start();
        }))
        .build();
  }

  /** Sends a stream's messages while the call is ready; stops when it is cancelled. */
  private static final class Sender implements Runnable {
    private final int count;
    private final int size;
    private final long seed;
    private final ServerCallStreamObserver<byte[]> reply;
    /** Touched only on the call's serialized executor. */
    private int sent;
    private boolean done;

    Sender(int count, int size, long seed, ServerCallStreamObserver<byte[]> reply) {
      this.count = count;
      this.size = size;
      this.seed = seed;
      this.reply = reply;
    }

    void start() {
      reply.setOnCancelHandler(() -> done = true);
      reply.setOnReadyHandler(this);
      run();
    }

    @Override
    public void run() {
      while (!done && sent < count && reply.isReady()) {
        reply.onNext(checked(size, seed + sent));
        sent++;
      }
      if (!done && sent == count) {
        done = true;
        reply.onCompleted();
      }
    }
  }

  // ---- The client side: one call and its outcome. ----

  /** How a call ended. */
  private enum Outcome { OK, WRONG, STATUS, OTHER }

  /** Checks each message of a call against what it must be, and completes with the outcome. */
  private static final class Check implements StreamObserver<byte[]> {
    final CompletableFuture<Outcome> done = new CompletableFuture<>();
    private final byte[][] expected;
    private int received;
    private boolean wrong;
    volatile Throwable error;

    Check(byte[]... expected) {
      this.expected = expected;
    }

    @Override
    public void onNext(byte[] value) {
      if (received >= expected.length || !Arrays.equals(expected[received], value)) {
        wrong = true;
      }
      received++;
    }

    @Override
    public void onError(Throwable t) {
      error = t;
      if (t instanceof StatusRuntimeException || t instanceof StatusException) {
        Status.Code code = Status.fromThrowable(t).getCode();
        // Only this service's server answers DATA_LOSS: a request that arrived damaged.
        done.complete(code == Status.Code.DATA_LOSS ? Outcome.WRONG : Outcome.STATUS);
      } else {
        done.complete(Outcome.OTHER);
      }
    }

    @Override
    public void onCompleted() {
      done.complete(wrong || received != expected.length ? Outcome.WRONG : Outcome.OK);
    }
  }

  /** One transport's counters. */
  private static final class Tally {
    final Transport transport;
    final LongAdder ok = new LongAdder();
    final LongAdder wrong = new LongAdder();
    final LongAdder other = new LongAdder();
    final LongAdder hung = new LongAdder();
    final LongAdder channels = new LongAdder();
    final ConcurrentHashMap<String, LongAdder> statuses = new ConcurrentHashMap<>();

    Tally(Transport transport) {
      this.transport = transport;
    }

    long statusFailures() {
      return statuses.values().stream().mapToLong(LongAdder::sum).sum();
    }

    Calls snapshot(long damagedAtServer) {
      Map<String, Long> byCode = new TreeMap<>();
      statuses.forEach((code, n) -> byCode.put(code, n.sum()));
      return new Calls(transport, ok.sum(), byCode, wrong.sum() + damagedAtServer, other.sum(),
          hung.sum(), channels.sum());
    }
  }

  // ---- Event loop stalls. ----

  /**
   * Records the worst lateness of a task repeated on every event loop watched, apart for the
   * warm-up and for the rest of the run. A tick that ran late keeps the loop's thread's time on
   * a core and waiting for one over its window (from Linux's {@code /proc/thread-self/schedstat},
   * read on the loop itself); collections' pauses arrive later, as notifications, so late ticks
   * are judged when the sampler calls {@link #settle}.
   */
  private static final class StallWatch {
    /** Ticks later than this are judged; the others cannot matter. */
    private static final long JUDGED_NANOS = TimeUnit.MILLISECONDS.toNanos(20);
    private static final java.nio.file.Path SCHEDSTAT =
        java.nio.file.Path.of("/proc/thread-self/schedstat");
    private final long start = System.nanoTime();
    /** {@code System.nanoTime()} when the JVM's uptime was 0, to place collections' pauses. */
    private final long uptimeZero = System.nanoTime()
        - TimeUnit.MILLISECONDS.toNanos(ManagementFactory.getRuntimeMXBean().getUptime());
    private final ConcurrentLinkedQueue<Tick> late = new ConcurrentLinkedQueue<>();
    /**
     * Pauses as [start, end] nanoTime pairs, collections' and the probe's; the ones older than
     * every pending tick go.
     */
    private final ConcurrentLinkedQueue<long[]> pauses = new ConcurrentLinkedQueue<>();
    /** Sleeps 1 ms at a time; a wake-up later than {@link #HICCUP_NANOS} is a pause for all. */
    private final Thread probe = new Thread(this::probe, "soak-hiccup-probe");
    private static final long HICCUP_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
    private final List<Runnable> unsubscribe = new ArrayList<>();
    private Stall warmup = Stall.NONE;
    private Stall steady = Stall.NONE;
    private Stall steadyRaw = Stall.NONE;
    private boolean warm;
    /** Odd while a sample's collections run; a tick that saw it change is not counted. */
    private final AtomicLong epoch = new AtomicLong();
    private volatile boolean stopped;

    /** A late tick: its window and what the loop's thread did in it. */
    private record Tick(long due, long ran, long cpu, long queued, String loop) {}

    StallWatch() {
      for (java.lang.management.GarbageCollectorMXBean gc
          : ManagementFactory.getGarbageCollectorMXBeans()) {
        if (gc instanceof javax.management.NotificationEmitter) {
          javax.management.NotificationEmitter emitter = (javax.management.NotificationEmitter) gc;
          javax.management.NotificationListener listener = (notification, handback) -> {
            if (notification.getType().equals(com.sun.management.GarbageCollectionNotificationInfo
                .GARBAGE_COLLECTION_NOTIFICATION)) {
              com.sun.management.GcInfo info = com.sun.management.GarbageCollectionNotificationInfo
                  .from((javax.management.openmbean.CompositeData) notification.getUserData())
                  .getGcInfo();
              pauses.add(new long[] {
                  uptimeZero + TimeUnit.MILLISECONDS.toNanos(info.getStartTime()),
                  uptimeZero + TimeUnit.MILLISECONDS.toNanos(info.getEndTime() + 1)});
            }
          };
          emitter.addNotificationListener(listener, null, null);
          unsubscribe.add(() -> {
            try {
              emitter.removeNotificationListener(listener);
            } catch (javax.management.ListenerNotFoundException gone) {
              // already removed
            }
          });
        }
      }
      probe.setDaemon(true);
      probe.start();
    }

    /** Runs on {@link #probe}: records as a pause each time it wakes far later than asked. */
    private void probe() {
      while (!stopped) {
        long asleep = System.nanoTime();
        try {
          Thread.sleep(1);
        } catch (InterruptedException e) {
          return;
        }
        long awake = System.nanoTime();
        if (awake - asleep > TimeUnit.MILLISECONDS.toNanos(1) + HICCUP_NANOS) {
          pauses.add(new long[] {asleep + TimeUnit.MILLISECONDS.toNanos(1), awake});
        }
      }
    }

    void watch(EventLoopGroup group) {
      for (EventExecutor loop : group) {
        loop.execute(() -> tick(loop));
      }
    }

    /** Runs on {@code loop}: schedules the next tick. */
    private void tick(EventExecutor loop) {
      long seen = epoch.get();
      long due = System.nanoTime() + STALL_PERIOD_NANOS;
      long[] before = threadTimes();
      loop.schedule(() -> {
        long ran = System.nanoTime();
        if (ran - due > JUDGED_NANOS && (seen & 1) == 0 && epoch.get() == seen) {
          long[] after = threadTimes();
          late.add(new Tick(due, ran, after[0] - before[0], after[1] - before[1],
              Thread.currentThread().getName()));
        }
        if (!stopped) {
          tick(loop);
        }
      }, STALL_PERIOD_NANOS, TimeUnit.NANOSECONDS);
    }

    /** The calling thread's time on a core and waiting for one, in nanoseconds. */
    private static long[] threadTimes() {
      try {
        String[] fields = new String(java.nio.file.Files.readAllBytes(SCHEDSTAT),
            java.nio.charset.StandardCharsets.US_ASCII).trim().split(" ");
        return new long[] {Long.parseLong(fields[0]), Long.parseLong(fields[1])};
      } catch (IOException | RuntimeException notLinux) {
        return new long[] {ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime(), 0};
      }
    }

    /** Judges the late ticks that ran at least a second ago, when their pauses are known. */
    synchronized void settle(boolean all) {
      long before = all ? Long.MAX_VALUE : System.nanoTime() - TimeUnit.SECONDS.toNanos(1);
      long oldestPending = Long.MAX_VALUE;
      for (java.util.Iterator<Tick> it = late.iterator(); it.hasNext(); ) {
        Tick t = it.next();
        if (t.ran > before) {
          oldestPending = Math.min(oldestPending, t.due);
          continue;
        }
        it.remove();
        long gc = pausedWithin(t.due, t.ran);
        long raw = t.ran - t.due;
        Stall stall = new Stall(
            TimeUnit.NANOSECONDS.toMillis(Math.max(0, raw - t.queued - gc)),
            TimeUnit.NANOSECONDS.toMillis(raw), TimeUnit.NANOSECONDS.toMillis(t.cpu),
            TimeUnit.NANOSECONDS.toMillis(t.queued), TimeUnit.NANOSECONDS.toMillis(gc), t.loop,
            TimeUnit.NANOSECONDS.toMillis(t.due - start));
        if (!warm) {
          warmup = stall.lateMillis() > warmup.lateMillis() ? stall : warmup;
        } else {
          steady = stall.lateMillis() > steady.lateMillis() ? stall : steady;
          steadyRaw = stall.rawMillis() > steadyRaw.rawMillis() ? stall : steadyRaw;
        }
      }
      long keepFrom = Math.min(oldestPending, before);
      pauses.removeIf(pause -> pause[1] < keepFrom - TimeUnit.SECONDS.toNanos(1));
    }

    /** How long pauses (their union: a collection and the probe's hiccup may overlap) cover. */
    private long pausedWithin(long from, long to) {
      List<long[]> within = new ArrayList<>();
      for (long[] pause : pauses) {
        long start = Math.max(pause[0], from);
        long end = Math.min(pause[1], to);
        if (end > start) {
          within.add(new long[] {start, end});
        }
      }
      within.sort(java.util.Comparator.comparingLong(p -> p[0]));
      long covered = 0;
      long reached = from;
      for (long[] p : within) {
        if (p[1] > reached) {
          covered += p[1] - Math.max(p[0], reached);
          reached = p[1];
        }
      }
      return covered;
    }

    /** Judges what is pending; from now on stalls count as the rest of the run's. */
    synchronized void warmedUp() {
      settle(false);
      warm = true;
    }

    void pause() {
      epoch.incrementAndGet();
    }

    void resume() {
      epoch.incrementAndGet();
    }

    void stop() {
      stopped = true;
      probe.interrupt();
      unsubscribe.forEach(Runnable::run);
    }

    synchronized Stall warmup() {
      return warmup;
    }

    synchronized Stall steady() {
      return steady;
    }

    synchronized Stall steadyRaw() {
      return steadyRaw;
    }
  }

  // ---- The rig: handshakers, servers, proxies, workers, faults, samples. ----

  /** A server of one transport and the proxy in front of it. */
  private static final class Endpoint {
    final Transport transport;
    final Server server;
    final FaultProxy proxy;
    final ChannelCredentials credentials;
    final Tally tally;
    /** Requests this transport's server found damaged. */
    final LongAdder damaged;

    Endpoint(Transport transport, Server server, FaultProxy proxy, ChannelCredentials credentials,
        LongAdder damaged) {
      this.transport = transport;
      this.server = server;
      this.proxy = proxy;
      this.credentials = credentials;
      this.tally = new Tally(transport);
      this.damaged = damaged;
    }
  }

  private static final class Rig implements AutoCloseable {
    private final Options options;
    private final Server clientHandshaker;
    private final Server serverHandshaker;
    private final EventLoopGroup serverGroup =
        NettyTransports.nio(1);
    private final EventLoopGroup clientGroup =
        NettyTransports.nio(1);
    /**
     * The servers' application threads, stopped before the event loops: a call still sending once
     * its loop has terminated hands grpc-netty a frame it never releases.
     */
    private final ExecutorService serverCalls = Executors.newCachedThreadPool();
    /** Direct, one arena of each kind, no thread caches: what the arenas report is what buffers hold. */
    private final PooledByteBufAllocator serverAlloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    private final PooledByteBufAllocator clientAlloc =
        new PooledByteBufAllocator(true, 1, 1, 8192, 9, 0, 0, false);
    private final List<Endpoint> endpoints = new ArrayList<>();
    private final StallWatch stalls = new StallWatch();
    /** Workers hold it shared for a cycle; a sample holds it alone, so no cycle runs then. */
    private final ReentrantReadWriteLock quiet = new ReentrantReadWriteLock(true);
    private final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
    /** The first call that ended with each transport and status code, described. */
    private final Map<String, String> statusExamples = new ConcurrentHashMap<>();
    private final AtomicLong problemCount = new AtomicLong();
    private volatile boolean churning = true;
    private final List<Thread> threads = new ArrayList<>();

    Rig(Options options) throws Exception {
      this.options = options;
      clientHandshaker = LocalHandshakerMain.start(0, "soak-client");
      serverHandshaker = LocalHandshakerMain.start(0, "soak-server");
      for (Transport t : options.transports()) {
        ServerCredentials serverCredentials = serverCredentials(t);
        LongAdder damaged = new LongAdder();
        Server server = NettyServerBuilder.forAddress(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), serverCredentials)
            .bossEventLoopGroup(serverGroup)
            .workerEventLoopGroup(serverGroup)
            .channelType(NioServerSocketChannel.class)
            .withChildOption(ChannelOption.ALLOCATOR, serverAlloc)
            .maxInboundMessageSize(options.maxMessageBytes() + 64)
            .executor(serverCalls)
            .addService(service(damaged, options.maxMessageBytes()))
            .build()
            .start();
        endpoints.add(new Endpoint(t, server, new FaultProxy(server.getPort()),
            channelCredentials(t), damaged));
      }
      stalls.watch(serverGroup);
      stalls.watch(clientGroup);
    }

    private ServerCredentials serverCredentials(Transport t) throws Exception {
      switch (t) {
        case PLAINTEXT:
          return PinlessServerCredentials.insecure();
        case ALTS:
          return PinlessServerCredentials.altsBuilder()
              .handshakerAddress(LocalHandshakerMain.hostAndPort(serverHandshaker)).build();
        default:
          return PinlessServerCredentials.tls(GrpcSslContexts.configure(SslContextBuilder.forServer(
                  TestCertificates.SERVER.key(), TestCertificates.SERVER.certificate()),
                  provider(t))
              .clientAuth(ClientAuth.NONE)
              .sessionCacheSize(TLS_RESUMPTION_ENTRIES)
              .build());
      }
    }

    private ChannelCredentials channelCredentials(Transport t) throws Exception {
      switch (t) {
        case PLAINTEXT:
          return PinlessChannelCredentials.insecure();
        case ALTS:
          return PinlessChannelCredentials.altsBuilder()
              .handshakerAddress(LocalHandshakerMain.hostAndPort(clientHandshaker)).build();
        default:
          return PinlessChannelCredentials.tls(
              GrpcSslContexts.configure(SslContextBuilder.forClient(), provider(t))
                  .trustManager(TestCertificates.CA.certificate())
                  .sessionCacheSize(TLS_RESUMPTION_ENTRIES)
                  .build());
      }
    }

    private static SslProvider provider(Transport t) {
      return t == Transport.TLS_OPENSSL ? SslProvider.OPENSSL : SslProvider.JDK;
    }

    private ManagedChannel channel(Endpoint e) {
      return NettyChannelBuilder.forAddress(
              new InetSocketAddress(InetAddress.getLoopbackAddress(), e.proxy.port()),
              e.credentials)
          .eventLoopGroup(clientGroup)
          .channelType(NioSocketChannel.class)
          .withOption(ChannelOption.ALLOCATOR, clientAlloc)
          .maxInboundMessageSize(options.maxMessageBytes() + 64)
          .build();
    }

    private void problem(String what) {
      if (problemCount.incrementAndGet() <= 20) {
        problems.add(what);
      }
    }

    Result run(PrintStream out) throws Exception {
      out.printf(Locale.ROOT, "soak: %s over %s, %d worker(s) each, calls up to %d B, seed %d,"
              + " leak detection %s%n", options.duration(), options.transports(),
          options.workersPerTransport(), options.maxMessageBytes(), options.seed(),
          io.netty.util.ResourceLeakDetector.getLevel());
      long leaksBefore = LeakRecorder.reported();
      SplittableRandom seeds = new SplittableRandom(options.seed());
      for (Endpoint e : endpoints) {
        for (int w = 0; w < options.workersPerTransport(); w++) {
          SplittableRandom random = seeds.split();
          start(() -> churn(e, random), "soak-" + e.transport.name().toLowerCase(Locale.ROOT)
              + "-" + w);
        }
      }
      SplittableRandom faultRandom = seeds.split();
      start(() -> faults(faultRandom), "soak-faults");

      List<Sample> samples = new ArrayList<>();
      long start = System.nanoTime();
      long total = options.duration().toNanos();
      int referenceIndex = Math.max(1, options.samples() / 5) - 1;
      for (int k = 1; k <= options.samples(); k++) {
        long due = start + total * k / options.samples();
        long wait = due - System.nanoTime();
        if (wait > 0) {
          TimeUnit.NANOSECONDS.sleep(wait); // the sampling interval
        }
        Sample s = sample(start);
        samples.add(s);
        if (k == referenceIndex + 1) {
          stalls.warmedUp();
        } else {
          stalls.settle(false);
        }
        out.printf(Locale.ROOT, "%6ds  heap %7.2f MiB  pooled %d B in %d buffers, pages %d B"
                + " (busy %d B, pools %.0f MiB)  ok %d  status %d  worst stall %d ms%n",
            s.atMillis / 1000, s.heapBytes / 1048576.0, s.pooledBytes, s.liveBuffers,
            s.pooledPages, s.busyPooledBytes, s.poolBytes / 1048576.0,
            endpoints.stream().mapToLong(e -> e.tally.ok.sum()).sum(),
            endpoints.stream().mapToLong(e -> e.tally.statusFailures()).sum(),
            (k <= referenceIndex + 1 ? stalls.warmup() : stalls.steady()).lateMillis());
      }
      stopChurn();
      long leaks = -1;
      if (LeakRecorder.installed()) {
        LeakRecorder.collectAndDetect();
        leaks = LeakRecorder.reported() - leaksBefore;
      }
      List<Calls> calls = new ArrayList<>();
      for (Endpoint e : endpoints) {
        calls.add(e.tally.snapshot(e.damaged.sum()));
      }
      Result result = new Result(options, calls, samples, samples.get(referenceIndex),
          samples.get(samples.size() - 1), stalls.warmup(), stalls.steady(), stalls.steadyRaw(),
          leaks,
          new ArrayList<>(problems), new ArrayList<>(new TreeMap<>(statusExamples).values()));
      print(result, out);
      return result;
    }

    private void start(Runnable body, String name) {
      Thread t = new Thread(body, name);
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }

    /** A worker: channel, a few calls, shutdown, again, until the run ends. */
    private void churn(Endpoint e, SplittableRandom random) {
      try {
        while (churning) {
          quiet.readLock().lockInterruptibly();
          try {
            if (!churning) {
              return;
            }
            cycle(e, random);
          } finally {
            quiet.readLock().unlock();
          }
        }
      } catch (InterruptedException stop) {
        Thread.currentThread().interrupt();
      } catch (RuntimeException bug) {
        problem("worker " + Thread.currentThread().getName() + " died: " + bug);
        e.tally.other.increment();
      }
    }

    private void cycle(Endpoint e, SplittableRandom random) throws InterruptedException {
      ManagedChannel channel = channel(e);
      e.tally.channels.increment();
      try {
        int calls = 1 + random.nextInt(4);
        for (int i = 0; i < calls; i++) {
          call(e, channel, random);
        }
      } finally {
        channel.shutdownNow();
        if (!channel.awaitTermination(30, TimeUnit.SECONDS)) {
          problem(e.transport + ": a channel did not terminate within 30 s of shutdownNow");
        }
      }
    }

    /** A size from 0 to {@code max}, as many of each order of magnitude (log-uniform). */
    private static int size(SplittableRandom random, int max) {
      return (int) Math.min(max, Math.pow(max + 1.0, random.nextDouble()) - 1);
    }

    private void call(Endpoint e, ManagedChannel channel, SplittableRandom random)
        throws InterruptedException {
      CallOptions callOptions =
          CallOptions.DEFAULT.withDeadlineAfter(CALL_DEADLINE_SECONDS, TimeUnit.SECONDS);
      Check check;
      long seed = random.nextLong();
      if (random.nextBoolean()) {
        byte[] request = checked(size(random, options.maxMessageBytes()), seed);
        check = new Check(request);
        ClientCalls.asyncUnaryCall(channel.newCall(ECHO, callOptions), request, check);
      } else {
        int count = 1 + random.nextInt(4);
        int size = size(random, options.maxMessageBytes() / count);
        byte[][] expected = new byte[count][];
        for (int i = 0; i < count; i++) {
          expected[i] = checked(size, seed + i);
        }
        check = new Check(expected);
        ClientCalls.asyncServerStreamingCall(channel.newCall(STREAM, callOptions),
            streamRequest(count, size, seed), check);
      }
      Outcome outcome;
      try {
        outcome = check.done.get(CALL_DEADLINE_SECONDS + HANG_GRACE_SECONDS, TimeUnit.SECONDS);
      } catch (TimeoutException hang) {
        e.tally.hung.increment();
        problem(e.transport + ": a call still open " + HANG_GRACE_SECONDS
            + " s past its deadline");
        return;
      } catch (ExecutionException impossible) {
        throw new IllegalStateException(impossible);
      }
      switch (outcome) {
        case OK:
          e.tally.ok.increment();
          break;
        case WRONG:
          e.tally.wrong.increment();
          problem(e.transport + ": wrong bytes"
              + (check.error == null ? "" : " (" + check.error + ")"));
          break;
        case STATUS:
          Status status = Status.fromThrowable(check.error);
          String key = e.transport + " " + status.getCode();
          e.tally.statuses.computeIfAbsent(status.getCode().name(), k -> new LongAdder())
              .increment();
          statusExamples.computeIfAbsent(key, k -> (key + ": " + status.getDescription()
              + (status.getCause() == null ? "" : " (" + status.getCause() + ")"))
              .replace('\n', ' '));
          break;
        default:
          e.tally.other.increment();
          problem(e.transport + ": failed without a status: " + check.error);
      }
    }

    /** Changes each proxy's faults every 0.25 to 1.5 s, until the run ends. */
    private void faults(SplittableRandom random) {
      try {
        while (churning) {
          for (Endpoint e : endpoints) {
            FaultProxy proxy = e.proxy;
            int mode = random.nextInt(10);
            if (mode < 4) {
              proxy.cutToClients(Integer.MAX_VALUE);
              proxy.delayToClients(0);
            } else if (mode < 7) {
              proxy.cutToClients(1 + random.nextInt(random.nextBoolean() ? 256 : 8192));
              proxy.delayToClients(0);
            } else {
              proxy.cutToClients(16384);
              proxy.delayToClients(1);
            }
            int kill = random.nextInt(12);
            if (kill == 0) {
              proxy.resetAll();
            } else if (kill == 1) {
              proxy.halfCloseToClients();
            } else if (kill == 2) {
              proxy.closeAll();
            }
          }
          Thread.sleep(250 + random.nextInt(1250)); // how long one set of faults lasts
        }
      } catch (InterruptedException stop) {
        Thread.currentThread().interrupt();
      }
    }

    /** Quiesces the churn, collects, reads memory, and lets the churn go on. */
    private Sample sample(long start) throws InterruptedException {
      long busy = PoolBytes.liveBytes(serverAlloc) + PoolBytes.liveBytes(clientAlloc);
      quiet.writeLock().lockInterruptibly();
      try {
        long at = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        for (Endpoint e : endpoints) {
          if (!e.proxy.awaitNoConnections(30_000)) {
            problem(e.transport + ": " + e.proxy.open() + " proxied connection(s) still open"
                + " with no channel left");
          }
        }
        // Closes that the sockets' ends started finish in tasks the loops run next.
        for (int round = 0; round < 2; round++) {
          drain(serverGroup);
          drain(clientGroup);
        }
        stalls.pause();
        try {
          LeakRecorder.collectAndDetect();
          long poolHeap = serverAlloc.metric().usedHeapMemory()
              + clientAlloc.metric().usedHeapMemory();
          // Netty's shared pool keeps or frees its 4 MiB heap chunks by its own rules too, for
          // whatever else in the JVM uses it (in the test JVM, the tests before this one).
          long sharedPoolHeap = PooledByteBufAllocator.DEFAULT.metric().usedHeapMemory();
          long heap = liveHeapBytes() - poolHeap - sharedPoolHeap;
          long pooled = PoolBytes.liveBytes(serverAlloc) + PoolBytes.liveBytes(clientAlloc);
          long pages = PoolBytes.pagesInUse(serverAlloc) + PoolBytes.pagesInUse(clientAlloc);
          long pools = poolHeap + serverAlloc.metric().usedDirectMemory()
              + clientAlloc.metric().usedDirectMemory();
          return new Sample(at, heap, pooled,
              PoolBytes.liveBuffers(serverAlloc) + PoolBytes.liveBuffers(clientAlloc), pages, busy, pools);
        } finally {
          stalls.resume();
        }
      } finally {
        quiet.writeLock().unlock();
      }
    }

    private void drain(EventLoopGroup group) throws InterruptedException {
      for (EventExecutor loop : group) {
        if (!loop.submit(() -> { }).await(10, TimeUnit.SECONDS)) {
          problem("an event loop did not run a task within 10 s");
        }
      }
    }

    private void stopChurn() throws InterruptedException {
      churning = false;
      for (Thread t : threads) {
        if (t.getName().equals("soak-faults")) {
          t.interrupt();
        }
      }
      for (Thread t : threads) {
        t.join(TimeUnit.SECONDS.toMillis(4 * (CALL_DEADLINE_SECONDS + HANG_GRACE_SECONDS)));
        if (t.isAlive()) {
          problem(t.getName() + " did not stop");
        }
      }
      stalls.stop();
      stalls.settle(true);
    }

    @Override
    public void close() throws Exception {
      churning = false;
      stalls.stop();
      for (Endpoint e : endpoints) {
        e.proxy.close();
        e.server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      serverCalls.shutdown();
      serverCalls.awaitTermination(10, TimeUnit.SECONDS);
      clientHandshaker.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      serverHandshaker.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
      serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }

  /**
   * The bytes of the heap's live objects: the total of the JVM's class histogram after a full
   * collection ({@code jmap -histo:live}'s figure, taken in the process). The heap's occupancy
   * would not do: G1 counts an object of a region or more (a pool's 4 MiB chunk) as the whole
   * regions it spans, so one more chunk moves it by twice the chunk's size.
   */
  private static long liveHeapBytes() {
    try {
      String histogram = (String) ManagementFactory.getPlatformMBeanServer().invoke(
          new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand"),
          "gcClassHistogram", new Object[] {new String[0]},
          new String[] {String[].class.getName()});
      java.util.regex.Matcher total =
          java.util.regex.Pattern.compile("Total\\s+\\d+\\s+(\\d+)").matcher(histogram);
      if (total.find()) {
        return Long.parseLong(total.group(1));
      }
      throw new IllegalStateException("no total in the class histogram");
    } catch (javax.management.JMException e) {
      throw new IllegalStateException("no class histogram", e);
    }
  }

  private static void print(Result r, PrintStream out) {
    out.println("calls, per transport:");
    for (Calls c : r.calls()) {
      out.printf(Locale.ROOT, "  %-12s ok %7d  failed with a status %6d %s  wrong %d  other %d"
              + "  hung %d  channels %d%n", c.transport(), c.ok(), c.statusFailures(),
          c.failedWithStatus(), c.wrong(), c.otherFailures(), c.hung(), c.channels());
    }
    out.printf(Locale.ROOT, "heap   at %4ds %10d B, at %4ds %10d B (%+.2f%%)%n",
        r.reference().atMillis() / 1000, r.reference().heapBytes(), r.end().atMillis() / 1000,
        r.end().heapBytes(), change(r.reference().heapBytes(), r.end().heapBytes()));
    out.printf(Locale.ROOT, "pooled at %4ds %10d B (pages %d B), at %4ds %10d B (pages %d B)%n",
        r.reference().atMillis() / 1000, r.reference().pooledBytes(),
        r.reference().pooledPages(), r.end().atMillis() / 1000, r.end().pooledBytes(),
        r.end().pooledPages());
    out.println("worst event loop stall: " + r.stall());
    out.println("  latest task: " + r.rawStall());
    out.println("  in the warm-up: " + r.warmupStall());
    for (String example : r.statusExamples()) {
      out.println("  status example: " + example);
    }
    out.println(r.leaks() < 0 ? "leaks: not recorded (LeakRecorder not installed)"
        : "leaks reported: " + r.leaks());
    List<String> failures = r.failures();
    out.println(failures.isEmpty() ? "PASS" : "FAIL: " + String.join("; ", failures));
  }

  private static double change(long from, long to) {
    return from == 0 ? 0 : 100.0 * (to - from) / from;
  }
}
