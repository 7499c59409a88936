package io.pinless.compare;

import io.pinless.testing.ChunkService;
import io.pinless.testing.TestCertificates;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * A variant's server end, in a JVM of its own, so that each process holds one end of each
 * connection and measures only its own. The download, small and idle phases all connect to one.
 *
 * <p>It starts the variant's server with the phases' services ({@link Workload} and {@link
 * ChunkService}) and prints {@code port N}. The ALTS variants handshake through the server
 * handshaker at the second address given. The TLS variants present the identity in the file
 * given, which the client's process wrote, so that the clients trust it. Then it answers each
 * request line on its standard input with one line, {@code answer ...} or {@code refused ...}:
 *
 * <pre>
 *   measure   answer heap pooled buffers connections   ({@link Measurement#line})
 *   begin     answer begun                             (starts watching this process)
 *   end       answer {"pid":...}                       (stops; this process's figures as JSON)
 *   jit       answer millis                            (the JIT compilers' time so far; -1: unknown)
 * </pre>
 *
 * <p>It stops at the end of its standard input. Every other line it prints (leak reports among
 * them) reaches the variant's log through {@link RemoteServerEnd}.
 *
 * <pre>
 *   ServerEnd --variant pinless-alts --handshakers host:port,host:port [--identity file]
 *       [phase options]
 * </pre>
 */
public final class ServerEnd {
  /** The line that gives the server's port. */
  static final String PORT = "port ";
  /** Starts an answer to a request. */
  static final String ANSWER = "answer ";
  /** Starts the answer to a request not understood. */
  static final String REFUSED = "refused ";
  /** The request for a {@link Measurement}. */
  static final String MEASURE = "measure";
  /** The request to start watching this process through a phase. */
  static final String BEGIN = "begin";
  /** The request for this process's figures since {@link #BEGIN}. */
  static final String END = "end";
  /** The request for the milliseconds this process's JIT compilers have spent. */
  static final String JIT = "jit";

  private ServerEnd() {}

  /** Serves until standard input ends; see the class comment for the arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length < 4 || !"--variant".equals(args[0]) || !"--handshakers".equals(args[2])
        || Variant.byName(args[1]) == null) {
      System.err.println("usage: ServerEnd --variant v --handshakers a,b [options]");
      System.exit(2);
    }
    int rest = 4;
    TestCertificates.Identity identity = TestCertificates.SERVER;
    if (args.length > 5 && "--identity".equals(args[4])) {
      identity = IdentityFile.read(Path.of(args[5]));
      rest = 6;
    }
    Options options = Options.parse(Arrays.copyOfRange(args, rest, args.length));
    try (Variant.Stack stack =
        Variant.byName(args[1]).open(options.transport, args[3].split(","), identity)) {
      stack.start(Workload.service(options.messageBytes), ChunkService.service());
      System.out.println(PORT + stack.serverPort());
      System.out.flush();
      answerRequests(stack, new BufferedReader(
          new InputStreamReader(System.in, StandardCharsets.US_ASCII)), System.out);
    }
    VariantRun.reportLeaks();
    System.out.flush();
    System.exit(0);
  }

  /** Answers each request from {@code in} on {@code out}, until {@code in} ends. */
  static void answerRequests(Variant.Stack stack, BufferedReader in, PrintStream out)
      throws IOException, InterruptedException {
    MemoryMonitor watch = null;
    try {
      for (String line; (line = in.readLine()) != null; ) {
        String answer;
        switch (line) {
          case MEASURE:
            answer = ANSWER + Measurement.of(stack).line();
            break;
          case BEGIN:
            if (watch != null) {
              watch.close();
            }
            watch = new MemoryMonitor(stack::pinnedDirectBytes, stack::reservedDirectBytes);
            answer = ANSWER + "begun";
            break;
          case END:
            if (watch == null) {
              answer = REFUSED + "end without begin";
            } else {
              answer = ANSWER + watch.stop();
              watch = null;
            }
            break;
          case JIT:
            answer = ANSWER + MemoryMonitor.jitMillis();
            break;
          default:
            answer = REFUSED + "unknown request " + line;
        }
        out.println(answer);
        out.flush();
      }
    } finally {
      if (watch != null) {
        watch.close();
      }
    }
  }
}
