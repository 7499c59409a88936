package io.pinless.grpc.storage;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A {@link FakeStorageServer} running in a JVM of its own, as {@link StorageDownloads} starts it:
 * its port, and the size and CRC32C of the object it serves. Closing it ends its standard input,
 * which stops the server, and waits for the JVM to exit.
 */
final class ServerJvm implements AutoCloseable {
  private final Process process;
  private final int port;
  private final long objectBytes;
  private final int crc32c;

  private ServerJvm(Process process, int port, long objectBytes, int crc32c) {
    this.process = process;
    this.port = port;
    this.objectBytes = objectBytes;
    this.crc32c = crc32c;
  }

  /**
   * Starts a server JVM holding an object of {@code objectBytes} and waits until it serves; what
   * it prints after that goes to {@code log}, tagged {@code [server]}.
   */
  static ServerJvm start(int objectBytes, PrintStream log) throws IOException {
    List<String> command = StorageDownloads.javaCommand(FakeStorageServer.class, false);
    command.add(String.valueOf(objectBytes));
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    BufferedReader in = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    StringBuilder before = new StringBuilder();
    for (String line; (line = in.readLine()) != null; ) {
      String[] words = line.split(" ");
      if (words.length == 4 && words[0].equals(FakeStorageServer.READY)) {
        Thread forward = new Thread(() -> forward(in, log), "storage-server-output");
        forward.setDaemon(true);
        forward.start();
        return new ServerJvm(process, Integer.parseInt(words[1]), Long.parseLong(words[2]),
            Integer.parseInt(words[3]));
      }
      before.append("\n  ").append(line);
    }
    process.destroyForcibly();
    throw new IllegalStateException("the server JVM ended before serving:" + before);
  }

  private static void forward(BufferedReader in, PrintStream log) {
    try (in) {
      for (String line; (line = in.readLine()) != null; ) {
        log.println("[server] " + line);
      }
    } catch (IOException e) {
      log.println("[server] output lost: " + e);
    }
  }

  /** The server's port on 127.0.0.1. */
  int port() {
    return port;
  }

  /** The size of the object it serves. */
  long objectBytes() {
    return objectBytes;
  }

  /** The CRC32C of the object it serves. */
  int crc32c() {
    return crc32c;
  }

  /** Stops the server and waits up to a minute for its JVM, then kills it. */
  @Override
  public void close() throws IOException, InterruptedException {
    process.getOutputStream().close();
    if (!process.waitFor(1, TimeUnit.MINUTES)) {
      process.destroyForcibly();
    }
  }
}
