package io.pinless.grpc;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on loopback that copies bytes both ways and, on {@link #closeAll()}, simply closes
 * its connections (a FIN to both ends), as a peer that goes away gracefully. It can also keep a
 * copy of what each side sent, for tests that read the bytes on the wire.
 */
final class ClosingProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int targetPort;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private final List<Socket> clients = new CopyOnWriteArrayList<>();
  private final AtomicInteger accepted = new AtomicInteger();
  private final Thread acceptor;
  /** Where the bytes each side sent are copied to; null when not kept. */
  private final ByteArrayOutputStream fromClients;
  private final ByteArrayOutputStream fromServers;

  ClosingProxy(int targetPort) throws IOException {
    this(targetPort, false);
  }

  /** A proxy that, if {@code keep}, keeps a copy of every byte each side sent. */
  ClosingProxy(int targetPort, boolean keep) throws IOException {
    this.targetPort = targetPort;
    this.fromClients = keep ? new ByteArrayOutputStream() : null;
    this.fromServers = keep ? new ByteArrayOutputStream() : null;
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    this.acceptor = new Thread(this::acceptLoop, "closing-proxy");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  int port() {
    return listener.getLocalPort();
  }

  int accepted() {
    return accepted.get();
  }

  private void acceptLoop() {
    while (!listener.isClosed()) {
      try {
        Socket client = listener.accept();
        Socket server = new Socket(InetAddress.getLoopbackAddress(), targetPort);
        accepted.incrementAndGet();
        sockets.add(client);
        sockets.add(server);
        clients.add(client);
        pump(client, server, fromClients);
        pump(server, client, fromServers);
      } catch (IOException e) {
        return; // closed
      }
    }
  }

  private void pump(Socket from, Socket to, ByteArrayOutputStream copy) {
    Thread t = new Thread(() -> {
      byte[] buf = new byte[16384];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buf)) >= 0) {
          if (copy != null) {
            synchronized (copy) {
              copy.write(buf, 0, n);
            }
          }
          synchronized (to) {
            out.write(buf, 0, n);
          }
        }
      } catch (IOException e) {
        // The other side or closeAll() ended it.
      }
    }, "closing-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  /** What the clients sent so far (one connection's worth in the tests that keep it). */
  byte[] fromClients() {
    return copyOf(fromClients);
  }

  /** What the servers sent so far. */
  byte[] fromServers() {
    return copyOf(fromServers);
  }

  private static byte[] copyOf(ByteArrayOutputStream kept) {
    if (kept == null) {
      throw new IllegalStateException("this proxy keeps no copy: make it with keep = true");
    }
    synchronized (kept) {
      return kept.toByteArray();
    }
  }

  /** Sends {@code bytes} to every client between two pieces the servers sent, as a faulty peer. */
  void injectToClients(byte[] bytes) throws IOException {
    for (Socket client : clients) {
      synchronized (client) {
        client.getOutputStream().write(bytes);
      }
    }
  }

  /** Closes every proxied connection, both ends. */
  void closeAll() throws IOException {
    for (Socket s : sockets) {
      s.close();
    }
    sockets.clear();
    clients.clear();
  }

  @Override
  public void close() throws IOException {
    listener.close();
    closeAll();
  }
}
