package io.pinless.grpc;

import io.grpc.Attributes;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Metadata;
import io.grpc.Status;
import io.pinless.alts.AeadCost;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkService;
import io.pinless.testing.TlsPeer;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;

/**
 * The floor under a download's receive path, measured beside pinless and stock in one JVM: how
 * much CPU per payload byte the client's event loop and the whole process spend, against what
 * the bytes cost with nothing but a socket (and, over TLS and ALTS, the cipher) in the way.
 *
 * <pre>
 *   java -Xms1g -Xmx1g -Dio.netty.leakDetection.level=disabled \
 *       -Dio.grpc.netty.shaded.io.netty.leakDetection.level=disabled \
 *       -cp tools/target/benchmarks.jar io.pinless.grpc.Floor \
 *       [rounds (10)] [window seconds (2)] [warm-up rounds (3)] \
 *       [transports (plaintext,tls-openssl,alts)] [chunk bytes (2097152)]
 * </pre>
 *
 * <p>Sources, each one window per round, the order rotating ({@link ChunkInterleaved#turn}):
 * <ul>
 *   <li>{@code raw}: a loopback TCP connection read by plain blocking NIO into one direct buffer
 *       of {@value RawSocket#READ_BYTES} bytes, its sender a thread writing one direct buffer; the
 *       reading thread is its "loop". This is the floor.
 *   <li>{@code raw-held}: the same, each read landing after the one before in a direct area of
 *       two chunks, as a receiver that keeps each message whole in memory (a zero-copy one) must.
 *       Shown beside the floor, not in it; a cache larger than the area holds it all the same.
 *   <li>per transport, pinless with the zero-copy marshaller and stock with protobuf's, as {@link
 *       ChunkInterleaved} runs them ({@code plaintext}: {@code pinless}, {@code stock}; {@code
 *       tls} and {@code tls-openssl}: the JDK's and OpenSSL's engine; {@code alts});
 *   <li>per transport with a cipher, {@code cipher}: AES-GCM alone ({@link AeadCost}) at the key
 *       size and record size pinless's client of that transport negotiated, one thread sealing
 *       and one opening the same bytes at once; the opening thread is its "loop".
 * </ul>
 * A transport's floor is {@code raw}'s figure plus its cipher's, round by round: for the loop,
 * the reading thread's CPU per byte plus the opening thread's; for the process, the raw
 * process's plus the cipher's sealing and opening. The targets read: pinless's client loop
 * at most 1.5 times its floor, its process at most 1.7 times.
 *
 * <p>It prints each window's figures, then per transport the medians of every source's MB/s,
 * loop and process CPU ns per byte, and each variant's ratio to the floor ({@link
 * Interleaved#summarize}).
 */
public final class Floor {
  private Floor() {}

  /** Runs the comparison; see the class comment for the arguments. */
  public static void main(String[] args) throws Throwable {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 2;
    int warmupRounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    String[] transports = (args.length > 3 ? args[3] : "plaintext,tls-openssl,alts").split(",");
    int chunkBytes = args.length > 4 ? Integer.parseInt(args[4]) : 2 << 20;
    if (rounds < 2 || chunkBytes < 1 || chunkBytes > ChunkInterleaved.BYTES_PER_CALL) {
      throw new IllegalArgumentException("at least two rounds, chunks of 1 byte to 64 MiB");
    }
    int count = ChunkInterleaved.BYTES_PER_CALL / chunkBytes;
    long bytesPerCall = (long) count * chunkBytes;
    Map<String, Source> sources = new LinkedHashMap<>();
    List<AutoCloseable> closing = new ArrayList<>();
    try (ChunkInterleaved.Servers servers = new ChunkInterleaved.Servers()) {
      RawSocket raw = new RawSocket(RawSocket.READ_BYTES);
      closing.add(raw);
      sources.put("raw", new Source(() -> raw.download(bytesPerCall), raw.loopThread));
      RawSocket held = new RawSocket(2 * chunkBytes);
      closing.add(held);
      sources.put("raw-held", new Source(() -> held.download(bytesPerCall), held.loopThread));
      for (String transport : transports) {
        String[] variants = variants(transport);
        for (String variant : variants) {
          ChunkInterleaved.Client client = ChunkInterleaved.open(variant, servers);
          closing.add(client::close);
          client.download(count, chunkBytes); // connects, and checks one call end to end
          sources.put(variant, new Source(() -> client.download(count, chunkBytes),
              client.loopThread()));
        }
        if (!transport.equals("plaintext")) {
          CipherSource cipher = cipherOf(transport,
              probe(variants[0], servers), bytesPerCall);
          closing.add(cipher);
          sources.put("cipher-" + transport, new Source(cipher::run, cipher.opener));
        }
      }
      List<String> names = new ArrayList<>(sources.keySet());
      System.out.printf(Locale.ROOT,
          "sources: %s; %d-byte chunks, %d per call; windows of %.1f s, %d warm-up rounds%n",
          String.join(", ", names), chunkBytes, count, seconds, warmupRounds);
      for (int r = 0; r < warmupRounds; r++) {
        for (int k = 0; k < names.size(); k++) {
          sources.get(names.get(ChunkInterleaved.turn(r, k, names.size()))).window(seconds);
        }
      }
      Map<String, List<ChunkInterleaved.Window>> got = new LinkedHashMap<>();
      for (String name : names) {
        got.put(name, new ArrayList<>());
      }
      for (int r = 0; r < rounds; r++) {
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "round %2d:", r + 1));
        for (int k = 0; k < names.size(); k++) {
          String name = names.get(ChunkInterleaved.turn(r, k, names.size()));
          got.get(name).add(sources.get(name).window(seconds));
        }
        for (String name : names) {
          ChunkInterleaved.Window w = got.get(name).get(r);
          line.append(String.format(Locale.ROOT, " %s %.0f MB/s %.3f/%.3f;",
              name, w.megabytesPerSecond(), w.loopCpuPerByte(), w.cpuPerByte()));
        }
        System.out.println(line);
      }
      System.out.println("(per source: MB/s, CPU ns per byte by its loop / by the process)");
      for (String transport : transports) {
        report(transport, got, rounds);
      }
    } finally {
      for (int i = closing.size() - 1; i >= 0; i--) {
        closing.get(i).close();
      }
    }
  }

  /** pinless's and stock's variant of {@code transport}, in that order. */
  private static String[] variants(String transport) {
    switch (transport) {
      case "plaintext":
        return new String[] {"pinless", "stock"};
      case "tls":
      case "tls-openssl":
      case "alts":
        return new String[] {"pinless-" + transport, "stock-" + transport};
      default:
        throw new IllegalArgumentException(
            "unknown transport " + transport + " (plaintext, tls, tls-openssl or alts)");
    }
  }

  /** Prints {@code transport}'s medians and each variant's ratios to its floor. */
  private static void report(String transport, Map<String, List<ChunkInterleaved.Window>> got,
      int rounds) {
    String[] variants = variants(transport);
    List<ChunkInterleaved.Window> raw = got.get("raw");
    List<ChunkInterleaved.Window> cipher = got.get("cipher-" + transport);
    double[] floorLoop = new double[rounds];
    double[] floorProcess = new double[rounds];
    for (int r = 0; r < rounds; r++) {
      floorLoop[r] = raw.get(r).loopCpuPerByte()
          + (cipher == null ? 0 : cipher.get(r).loopCpuPerByte());
      floorProcess[r] = raw.get(r).cpuPerByte()
          + (cipher == null ? 0 : cipher.get(r).cpuPerByte());
    }
    System.out.printf(Locale.ROOT, "%n%s: medians (MB/s; CPU ns per byte, loop / process)%n",
        transport);
    List<String> shown = new ArrayList<>(List.of("raw", "raw-held"));
    if (cipher != null) {
      shown.add("cipher-" + transport);
    }
    shown.addAll(List.of(variants));
    for (String name : shown) {
      List<ChunkInterleaved.Window> w = got.get(name);
      System.out.printf(Locale.ROOT, "  %-22s %6.0f MB/s  %.4f / %.4f%n", name,
          median(w, 0), median(w, 1), median(w, 2));
    }
    System.out.printf(Locale.ROOT, "  %-22s %11s  %.4f / %.4f%n", "floor", "",
        ChunkInterleaved.median(floorLoop), ChunkInterleaved.median(floorProcess));
    for (String variant : variants) {
      double[] loop = new double[rounds];
      double[] process = new double[rounds];
      for (int r = 0; r < rounds; r++) {
        loop[r] = got.get(variant).get(r).loopCpuPerByte() / floorLoop[r];
        process[r] = got.get(variant).get(r).cpuPerByte() / floorProcess[r];
      }
      Interleaved.summarize(variant + " loop CPU/B over the floor's", loop);
      Interleaved.summarize(variant + " process CPU/B over the floor's", process);
    }
  }

  private static double median(List<ChunkInterleaved.Window> windows, int figure) {
    double[] values = new double[windows.size()];
    for (int i = 0; i < values.length; i++) {
      values[i] = windows.get(i).get(figure);
    }
    return ChunkInterleaved.median(values);
  }

  /** One source of windows: what one download runs, and the thread that is its loop. */
  private record Source(ChunkInterleaved.Download download, long loopThread) {
    ChunkInterleaved.Window window(double seconds) throws Exception {
      return ChunkInterleaved.window(download, loopThread, seconds);
    }
  }

  /**
   * The attributes of a call on {@code variant}'s client (one small download): its negotiated TLS state or
   * ALTS context, which tell the cipher it runs.
   */
  private static Attributes probe(String variant, ChunkInterleaved.Servers servers) throws Exception {
    ChunkInterleaved.Client client = ChunkInterleaved.open(variant, servers);
    try {
      ClientCall<io.pinless.testing.ChunkRequest, Chunk> call =
          client.channel().newCall(ChunkService.DOWNLOAD, CallOptions.DEFAULT);
      CompletableFuture<Status> closed = new CompletableFuture<>();
      call.start(new ClientCall.Listener<>() {
        @Override
        public void onClose(Status status, Metadata trailers) {
          closed.complete(status);
        }
      }, new Metadata());
      call.request(1);
      call.sendMessage(ChunkService.request(1, 1));
      call.halfClose();
      Status status = closed.get(60, TimeUnit.SECONDS);
      if (!status.isOk()) {
        throw status.asException();
      }
      return call.getAttributes();
    } finally {
      client.close();
    }
  }

  /** AES-GCM at the key and record size a call on {@code transport} showed in {@code attrs}. */
  private static CipherSource cipherOf(String transport, Attributes attrs, long bytesPerCall)
      throws Throwable {
    int keyBytes;
    int recordBytes;
    if (transport.equals("alts")) {
      PinlessAltsContext alts = PinlessAltsContext.from(attrs);
      keyBytes = 16;
      recordBytes = alts.maxFrameSize() - AeadCost.ALTS_FRAME_OVERHEAD_BYTES;
    } else {
      String suite = TlsPeer.cipherSuite(attrs);
      if (!suite.contains("_GCM_")) {
        throw new IllegalStateException("the floor measures AES-GCM, not " + suite);
      }
      keyBytes = suite.contains("AES_256") ? 32 : 16;
      recordBytes = 16 * 1024;
    }
    System.out.printf(Locale.ROOT, "%s's cipher: AES-%d-GCM, records of %d bytes of plaintext%n",
        transport, keyBytes * 8, recordBytes);
    return new CipherSource(keyBytes, recordBytes, bytesPerCall);
  }

  /** AES-GCM alone: one thread seals, one opens, the same bytes per download. */
  private static final class CipherSource implements AutoCloseable {
    private final ExecutorService sealing = Executors.newSingleThreadExecutor();
    private final ExecutorService opening = Executors.newSingleThreadExecutor();
    private final AeadCost sealer;
    private final AeadCost openerCost;
    private final long bytes;
    /** The opening thread. */
    final long opener;

    CipherSource(int keyBytes, int recordBytes, long bytes) throws Throwable {
      sealer = new AeadCost(keyBytes, recordBytes);
      openerCost = new AeadCost(keyBytes, recordBytes);
      this.bytes = bytes;
      opener = opening.submit(() -> Thread.currentThread().getId()).get();
    }

    long run() throws Exception {
      Future<Long> sealed = sealing.submit(() -> sealer.seal(bytes));
      long opened = opening.submit(() -> openerCost.open(bytes)).get();
      sealed.get();
      return opened;
    }

    @Override
    public void close() {
      sealing.shutdownNow();
      opening.shutdownNow();
    }
  }

  /**
   * The floor's transport: one loopback TCP connection, a thread writing each download's bytes
   * from one direct buffer and a thread reading them into another, blocking NIO, nothing else.
   * Reads ask for up to {@link #READ_BYTES}, each after the one before in an area of {@code
   * areaBytes}, from its start again once it is full.
   */
  static final class RawSocket implements AutoCloseable {
    /** The reader's buffer: every read asks for up to this much. */
    static final int READ_BYTES = 128 * 1024;
    private static final int WRITE_BYTES = 2 * 1024 * 1024;

    private final ServerSocketChannel listener;
    private final SocketChannel reading;
    private final SocketChannel sending;
    private final SynchronousQueue<Long> requests = new SynchronousQueue<>();
    private final ExecutorService reader = Executors.newSingleThreadExecutor();
    private final ByteBuffer area;
    private final Thread sender;
    final long loopThread;

    RawSocket(int areaBytes) throws Exception {
      area = ByteBuffer.allocateDirect(areaBytes);
      listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
      reading = SocketChannel.open(listener.getLocalAddress());
      sending = listener.accept();
      ByteBuffer out = ByteBuffer.allocateDirect(WRITE_BYTES);
      while (out.hasRemaining()) {
        out.put((byte) out.position());
      }
      sender = new Thread(() -> send(out.flip()), "raw-sender");
      sender.setDaemon(true);
      sender.start();
      loopThread = reader.submit(() -> Thread.currentThread().getId()).get();
    }

    /** Writes each request's bytes until a negative request comes. */
    private void send(ByteBuffer out) {
      try {
        for (long n = requests.take(); n >= 0; n = requests.take()) {
          while (n > 0) {
            ByteBuffer piece = out.duplicate();
            piece.limit((int) Math.min(WRITE_BYTES, n));
            while (piece.hasRemaining()) {
              n -= sending.write(piece);
            }
          }
        }
      } catch (Exception e) {
        // Closed under it: the run is over.
      }
    }

    /** Has {@code bytes} sent and reads them all on the reading thread; returns the bytes. */
    long download(long bytes) throws Exception {
      return reader.submit(() -> {
        requests.put(bytes);
        long got = 0;
        while (got < bytes) {
          if (!area.hasRemaining()) {
            area.clear();
          }
          area.limit(Math.min(area.capacity(), area.position() + READ_BYTES));
          int n = reading.read(area);
          if (n < 0) {
            throw new IllegalStateException("the raw connection closed");
          }
          got += n;
        }
        return got;
      }).get();
    }

    @Override
    public void close() throws Exception {
      requests.offer(-1L, 1, TimeUnit.SECONDS);
      reader.shutdownNow();
      reading.close();
      sending.close();
      listener.close();
    }
  }
}
