package io.pinless.compare;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.pinless.testing.TestCertificates;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A {@link ServerEnd} as the client's process sees it: the JVM it started (with the options its
 * own JVM got, {@link Compare#javaCommand}), the server's port, and answers to requests, one at a
 * time. Lines the server end prints besides its answers go on to {@code out} prefixed {@code
 * server end: }, so that its leak reports reach the variant's log.
 */
final class RemoteServerEnd implements AutoCloseable {
  /** How long the server end has to start, or to answer a request. */
  private static final long ANSWER_MINUTES = 5;

  private final Process process;
  private final Thread reader;
  private final CompletableFuture<Integer> port = new CompletableFuture<>();
  /** The server end's last lines other than answers, for an error message. */
  private final Deque<String> tail = new ArrayDeque<>();
  /** The file with the TLS server's identity; null for the other variants. */
  private final Path identity;
  /** The request sent and not yet answered; guarded by this. */
  private CompletableFuture<String> pending;
  /** Why no answer can come any more, once the server end's output has ended; guarded by this. */
  private IOException ended;

  private RemoteServerEnd(Process process, Path identity, PrintStream out) {
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
  static RemoteServerEnd start(Variant variant, String handshakers, Options options,
      PrintStream out) throws IOException, GeneralSecurityException {
    List<String> command = Compare.javaCommand(ServerEnd.class);
    command.addAll(List.of("--variant", variant.name, "--handshakers", handshakers));
    Path identity = variant.tls() ? IdentityFile.write(TestCertificates.SERVER) : null;
    if (identity != null) {
      command.addAll(List.of("--identity", identity.toString()));
    }
    command.addAll(options.childArgs());
    try {
      return new RemoteServerEnd(
          new ProcessBuilder(command).redirectErrorStream(true).start(), identity, out);
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

  /** Asks the server end to measure what its process holds. */
  CompletableFuture<Measurement> measure() {
    return ask(ServerEnd.MEASURE).thenApply(Measurement::parse);
  }

  /** Has the server end start watching its process; returns once it has. */
  void begin() throws IOException, InterruptedException {
    answer(ask(ServerEnd.BEGIN), "start of its watch");
  }

  /** Has the server end stop watching; returns its process's figures since {@link #begin}. */
  JsonObject end() throws IOException, InterruptedException {
    return JsonParser.parseString(answer(ask(ServerEnd.END), "figures")).getAsJsonObject();
  }

  /** Milliseconds the server end's JIT compilers have spent so far (-1 if its JVM does not say). */
  long jitMillis() throws IOException, InterruptedException {
    return Long.parseLong(answer(ask(ServerEnd.JIT), "JIT time"));
  }

  /** Waits for {@code answer} (at most {@value #ANSWER_MINUTES} minutes). */
  static <T> T answer(CompletableFuture<T> answer, String what)
      throws IOException, InterruptedException {
    try {
      return answer.get(ANSWER_MINUTES, TimeUnit.MINUTES);
    } catch (ExecutionException e) {
      throw new IOException("the server end gave no " + what, e.getCause());
    } catch (TimeoutException e) {
      throw new IOException(
          "the server end gave no " + what + " in " + ANSWER_MINUTES + " minutes");
    }
  }

  /** Sends {@code request}; the future completes with the answer's text. */
  private CompletableFuture<String> ask(String request) {
    CompletableFuture<String> answer = new CompletableFuture<>();
    synchronized (this) {
      if (ended != null) {
        answer.completeExceptionally(ended);
        return answer;
      }
      if (pending != null) {
        throw new IllegalStateException("a request is under way");
      }
      pending = answer;
    }
    try {
      OutputStream in = process.getOutputStream();
      in.write((request + "\n").getBytes(StandardCharsets.US_ASCII));
      in.flush();
    } catch (IOException e) {
      answer.completeExceptionally(e);
    }
    return answer;
  }

  private void read(PrintStream out) {
    try (BufferedReader lines = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line; (line = lines.readLine()) != null; ) {
        if (line.startsWith(ServerEnd.PORT) && !port.isDone()) {
          port.complete(Integer.parseInt(line.substring(ServerEnd.PORT.length()).trim()));
        } else if (line.startsWith(ServerEnd.ANSWER)) {
          takePending().complete(line.substring(ServerEnd.ANSWER.length()));
        } else if (line.startsWith(ServerEnd.REFUSED)) {
          takePending().completeExceptionally(new IOException(
              "the server end refused: " + line.substring(ServerEnd.REFUSED.length())));
        } else {
          out.println("server end: " + line);
          remember(line);
        }
      }
    } catch (IOException | RuntimeException e) {
      remember(String.valueOf(e));
    }
    IOException end;
    synchronized (tail) {
      end = new IOException(
          "the server end's output ended; its last lines:\n  " + String.join("\n  ", tail));
    }
    CompletableFuture<String> answer;
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

  /** The request being answered; a future no one waits for if none was asked. */
  private synchronized CompletableFuture<String> takePending() {
    CompletableFuture<String> answer = pending;
    pending = null;
    return answer != null ? answer : new CompletableFuture<>();
  }

  private void remember(String line) {
    synchronized (tail) {
      tail.addLast(line);
      if (tail.size() > 20) {
        tail.removeFirst();
      }
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
