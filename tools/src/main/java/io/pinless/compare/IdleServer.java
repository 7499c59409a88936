package io.pinless.compare;

import io.pinless.testing.TestCertificates;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Base64;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The idle phase's server end, in a JVM of its own: each process then holds one end of each idle
 * connection (one file descriptor each), and each end's memory is measured in its own process.
 * It starts the variant's server (the ALTS variants handshake through the server handshaker at the
 * second address given; the TLS variants present the identity in the file given, which the
 * client's process wrote, so that its test CA is the one the clients trust), prints {@code port
 * N}, and answers each {@code measure} line on its standard input with a {@code measured} line
 * (see {@link Measurement#line}). It stops at the end of its standard input.
 *
 * <pre>
 *   IdleServer --variant pinless-alts --handshakers host:port,host:port [--identity file] [phase options]
 * </pre>
 */
public final class IdleServer {
  /** The line that gives the server's port. */
  static final String PORT = "port ";
  /** The request for a measurement. */
  static final String MEASURE = "measure";
  /** The line that answers it. */
  static final String MEASURED = "measured ";

  private IdleServer() {}

  /** Serves until standard input ends; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length < 4 || !"--variant".equals(args[0]) || !"--handshakers".equals(args[2])
        || Variant.byName(args[1]) == null) {
      System.err.println("usage: IdleServer --variant v --handshakers a,b [options]");
      System.exit(2);
    }
    int rest = 4;
    TestCertificates.Identity identity = TestCertificates.SERVER;
    if (args.length > 5 && "--identity".equals(args[4])) {
      identity = readIdentity(Path.of(args[5]));
      rest = 6;
    }
    Options options = Options.parse(Arrays.copyOfRange(args, rest, args.length));
    try (Variant.Stack stack =
        Variant.byName(args[1]).open(options.transport, args[3].split(","), identity)) {
      stack.start(Workload.service(options.messageBytes));
      System.out.println(PORT + stack.serverPort());
      System.out.flush();
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
      for (String line; (line = in.readLine()) != null; ) {
        if (line.equals(MEASURE)) {
          System.out.println(MEASURED + Measurement.of(stack).line());
          System.out.flush();
        }
      }
    }
    VariantRun.reportLeaks();
    System.out.flush();
    System.exit(0);
  }

  /**
   * Writes {@code identity} to a new file that only this user can read: the key's algorithm and
   * the key (PKCS #8, base64) on the first line, the certificate (DER, base64) on the second.
   */
  static Path writeIdentity(TestCertificates.Identity identity)
      throws IOException, GeneralSecurityException {
    Path file = Files.createTempFile("pinless-compare-identity", ".txt");
    Base64.Encoder base64 = Base64.getEncoder();
    Files.writeString(file, identity.key().getAlgorithm() + " "
        + base64.encodeToString(identity.key().getEncoded()) + "\n"
        + base64.encodeToString(identity.certificate().getEncoded()) + "\n", StandardCharsets.US_ASCII);
    return file;
  }

  /** Reads what {@link #writeIdentity} wrote. */
  static TestCertificates.Identity readIdentity(Path file) throws IOException, GeneralSecurityException {
    List<String> lines = Files.readAllLines(file, StandardCharsets.US_ASCII);
    String[] key = lines.get(0).split(" ");
    Base64.Decoder base64 = Base64.getDecoder();
    PrivateKey privateKey = KeyFactory.getInstance(key[0])
        .generatePrivate(new PKCS8EncodedKeySpec(base64.decode(key[1])));
    X509Certificate certificate = (X509Certificate) CertificateFactory.getInstance("X.509")
        .generateCertificate(new ByteArrayInputStream(base64.decode(lines.get(1))));
    return new TestCertificates.Identity(privateKey, certificate);
  }

  /**
   * What one end's process holds: its live heap after a full collection, the pooled direct bytes
   * its live buffers pin and those buffers (both of its allocators), and its server's ready
   * connections.
   */
  record Measurement(long heapBytes, long pooledBytes, long pooledBuffers, int serverConnections) {
    /** Measures this process, where {@code stack} runs. */
    static Measurement of(Variant.Stack stack) {
      long heap = MemoryMonitor.heapAfterFullCollection();
      return new Measurement(heap, stack.pinnedDirectBytes(), stack.activeDirectBuffers(),
          stack.serverConnections());
    }

    /** The four figures, separated by spaces. */
    String line() {
      return heapBytes + " " + pooledBytes + " " + pooledBuffers + " " + serverConnections;
    }

    /** Parses {@link #line}. */
    static Measurement parse(String line) {
      String[] f = line.trim().split(" ");
      if (f.length != 4) {
        throw new IllegalArgumentException("not a measurement: " + line);
      }
      return new Measurement(Long.parseLong(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2]),
          Integer.parseInt(f[3]));
    }

    /** The growth since {@code before}; the connections are this measurement's. */
    Measurement minus(Measurement before) {
      return new Measurement(heapBytes - before.heapBytes, pooledBytes - before.pooledBytes,
          pooledBuffers - before.pooledBuffers, serverConnections);
    }
  }

  /**
   * The server end as the client's process sees it: the JVM started, its port, and its
   * measurements on request. Lines it prints besides its answers go on to {@code out} with a
   * prefix, so that its leak reports reach the variant's log.
   */
  static final class Remote implements AutoCloseable {
    /** How long the server end has to start, or to measure itself. */
    private static final long ANSWER_MINUTES = 5;

    private final Process process;
    private final Thread reader;
    private final CompletableFuture<Integer> port = new CompletableFuture<>();
    private final Deque<String> tail = new ArrayDeque<>();
    /** The measurement asked for and not yet answered; guarded by this. */
    private CompletableFuture<Measurement> pending;
    /** Why no answer can come any more, once the server end's output has ended; guarded by this. */
    private IOException ended;

    /** The file with the TLS server's identity; null for the other variants. */
    private final Path identity;

    private Remote(Process process, Path identity, PrintStream out) {
      this.process = process;
      this.identity = identity;
      this.reader = new Thread(() -> read(out), "pinless-compare-server-end");
      reader.setDaemon(true);
      reader.start();
    }

    /**
     * Starts the server end of {@code variant} with {@code options} in a JVM of its own;
     * {@code handshakers} are the client's and the server's handshaker addresses, comma separated.
     */
    static Remote start(Variant variant, String handshakers, Options options, PrintStream out)
        throws IOException, GeneralSecurityException {
      List<String> command = Compare.javaCommand(IdleServer.class);
      command.addAll(List.of("--variant", variant.name, "--handshakers", handshakers));
      Path identity = variant.tls() ? writeIdentity(TestCertificates.SERVER) : null;
      if (identity != null) {
        command.addAll(List.of("--identity", identity.toString()));
      }
      command.addAll(options.childArgs());
      try {
        return new Remote(new ProcessBuilder(command).redirectErrorStream(true).start(), identity,
            out);
      } catch (IOException e) {
        if (identity != null) {
          Files.deleteIfExists(identity);
        }
        throw e;
      }
    }

    /** The server's port, once the server end has started. */
    int port() throws IOException, InterruptedException {
      return answer(port, "its port");
    }

    /** Asks the server end to measure itself and returns its answer. */
    CompletableFuture<Measurement> measure() {
      CompletableFuture<Measurement> answer = new CompletableFuture<>();
      synchronized (this) {
        if (ended != null) {
          answer.completeExceptionally(ended);
          return answer;
        }
        if (pending != null) {
          throw new IllegalStateException("a measurement is under way");
        }
        pending = answer;
      }
      try {
        OutputStream in = process.getOutputStream();
        in.write((MEASURE + "\n").getBytes(StandardCharsets.US_ASCII));
        in.flush();
      } catch (IOException e) {
        answer.completeExceptionally(e);
      }
      return answer;
    }

    /** Waits for {@code answer} (at most {@value #ANSWER_MINUTES} minutes). */
    static <T> T answer(CompletableFuture<T> answer, String what)
        throws IOException, InterruptedException {
      try {
        return answer.get(ANSWER_MINUTES, TimeUnit.MINUTES);
      } catch (ExecutionException e) {
        throw new IOException("the server end gave no " + what, e.getCause());
      } catch (TimeoutException e) {
        throw new IOException("the server end gave no " + what + " in " + ANSWER_MINUTES + " minutes");
      }
    }

    private void read(PrintStream out) {
      try (BufferedReader lines = new BufferedReader(
          new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = lines.readLine()) != null; ) {
          if (line.startsWith(PORT) && !port.isDone()) {
            port.complete(Integer.parseInt(line.substring(PORT.length()).trim()));
          } else if (line.startsWith(MEASURED)) {
            CompletableFuture<Measurement> answer;
            synchronized (this) {
              answer = pending;
              pending = null;
            }
            if (answer != null) {
              answer.complete(Measurement.parse(line.substring(MEASURED.length())));
            }
          } else {
            out.println("server end: " + line);
            tail.addLast(line);
            if (tail.size() > 20) {
              tail.removeFirst();
            }
          }
        }
      } catch (IOException | RuntimeException e) {
        tail.addLast(String.valueOf(e));
      }
      IOException end = new IOException(
          "the server end's output ended; its last lines:\n  " + String.join("\n  ", tail));
      CompletableFuture<Measurement> answer;
      synchronized (this) {
        ended = end;
        answer = pending;
        pending = null;
      }
      port.completeExceptionally(end);
      if (answer != null) {
        answer.completeExceptionally(end);
      }
    }

    /** Ends the server end's input, which stops it, and waits for it to exit (killed after 60 s). */
    @Override
    public void close() throws IOException, InterruptedException {
      try {
        process.getOutputStream().close();
      } catch (IOException e) {
        // it has exited already
      }
      if (!process.waitFor(60, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
      reader.join();
      if (identity != null) {
        Files.deleteIfExists(identity);
      }
    }
  }
}
