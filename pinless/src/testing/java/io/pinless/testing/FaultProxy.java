package io.pinless.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on loopback between clients and one server port, with faults a network or a peer
 * brings: the bytes towards the clients cut into small pieces, held back after a budget (a
 * connection stalled mid-response), or joined by bytes of its own (a forged record); every
 * connection closed at once (a FIN to both ends, a peer going away gracefully). It can keep a
 * copy of what each side sent, for tests that read the bytes on the wire. One thread per
 * direction and connection, blocking I/O.
 */
public final class FaultProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int targetPort;
  private final List<Link> links = new CopyOnWriteArrayList<>();
  private final AtomicInteger accepted = new AtomicInteger();
  /** Where the bytes each side sent are copied to; null when not kept. */
  private final ByteArrayOutputStream fromClients;
  private final ByteArrayOutputStream fromServers;
  /** Largest piece written towards a client at once (pieces are random, 1 to this). */
  private volatile int maxPiece = Integer.MAX_VALUE;
  /** How long each piece towards a client waits before it is written, in milliseconds. */
  private volatile long delayMillis;
  private final Object stallLock = new Object();
  /** Bytes each connection may still forward to its client after {@link #stallAfter}; -1 none. */
  private long stallBudget = -1;
  /** Guarded by stallLock: bytes forwarded to clients since the last {@link #stallAfter}. */
  private long forwarded;
  private volatile boolean closed;

  /** A proxy to {@code targetPort} on the loopback address, listening on a free port. */
  public FaultProxy(int targetPort) throws IOException {
    this(targetPort, false);
  }

  /** As above; if {@code keep}, it keeps a copy of every byte each side sent. */
  public FaultProxy(int targetPort, boolean keep) throws IOException {
    this.targetPort = targetPort;
    this.fromClients = keep ? new ByteArrayOutputStream() : null;
    this.fromServers = keep ? new ByteArrayOutputStream() : null;
    this.listener = new ServerSocket(0, 1024, InetAddress.getLoopbackAddress());
    Thread acceptor = new Thread(this::acceptLoop, "fault-proxy");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** The port clients connect to. */
  public int port() {
    return listener.getLocalPort();
  }

  /** Cuts what servers send into random pieces of 1 to {@code bytes} bytes, each written alone. */
  public void cutToClients(int bytes) {
    if (bytes < 1) {
      throw new IllegalArgumentException("pieces of at least 1 byte: " + bytes);
    }
    maxPiece = bytes;
  }

  /** Delays each piece towards a client by {@code millis} (0: none). */
  public void delayToClients(long millis) {
    if (millis < 0) {
      throw new IllegalArgumentException("a delay of at least 0 ms: " + millis);
    }
    delayMillis = millis;
  }

  /**
   * From now on, each connection forwards {@code bytes} more bytes to its client and then holds
   * the rest (it stops reading from the server) until {@link #resume()}.
   */
  public void stallAfter(long bytes) {
    synchronized (stallLock) {
      stallBudget = bytes;
      forwarded = 0;
      for (Link link : links) {
        link.budget = bytes;
      }
      stallLock.notifyAll();
    }
  }

  /** Forwards everything again. */
  public void resume() {
    synchronized (stallLock) {
      stallBudget = -1;
      for (Link link : links) {
        link.budget = -1;
      }
      stallLock.notifyAll();
    }
  }

  /** Connections that have forwarded their whole budget and hold the rest. */
  public int stalled() {
    int n = 0;
    synchronized (stallLock) {
      for (Link link : links) {
        n += link.budget == 0 ? 1 : 0;
      }
    }
    return n;
  }

  /** Bytes forwarded to clients, all connections, since the last {@link #stallAfter}. */
  public long forwardedSinceStall() {
    synchronized (stallLock) {
      return forwarded;
    }
  }

  /** Connections accepted so far. */
  public int accepted() {
    return accepted.get();
  }

  /** Connections still proxied: those with a direction still forwarding. */
  public int open() {
    return links.size();
  }

  /**
   * Waits until no connection is proxied (every one has ended both ways).
   *
   * @return whether none is left, false when {@code millis} passed first
   */
  public boolean awaitNoConnections(long millis) throws InterruptedException {
    long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(millis);
    synchronized (links) {
      while (!links.isEmpty()) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        java.util.concurrent.TimeUnit.NANOSECONDS.timedWait(links, left);
      }
      return true;
    }
  }

  /** What the clients sent so far (one connection's worth in the tests that keep it). */
  public byte[] fromClients() {
    return copyOf(fromClients);
  }

  /** What the servers sent so far. */
  public byte[] fromServers() {
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

  /** Sends {@code bytes} to every client between two pieces the servers sent. */
  public void injectToClients(byte[] bytes) throws IOException {
    for (Link link : links) {
      link.writeToClient(bytes, 0, bytes.length);
    }
  }

  /** Resets every proxied connection, both ends: an RST to each, as a crashed host or a NAT. */
  public void resetAll() {
    for (Link link : links) {
      link.reset();
    }
  }

  /**
   * Ends the bytes towards every client with a FIN, leaving the other direction open: a peer
   * that half-closes in the middle of what it was sending.
   */
  public void halfCloseToClients() {
    for (Link link : links) {
      synchronized (link.client) {
        try {
          link.client.shutdownOutput();
        } catch (IOException ended) {
          // this connection closed meanwhile: nothing to half-close
        }
      }
    }
  }

  /** Closes every proxied connection, both ends: a FIN to each. */
  public void closeAll() {
    for (Link link : links) {
      link.closeBoth();
    }
  }

  private void acceptLoop() {
    while (!listener.isClosed()) {
      try {
        Socket client = listener.accept();
        Socket server = new Socket(InetAddress.getLoopbackAddress(), targetPort);
        client.setTcpNoDelay(true);
        server.setTcpNoDelay(true);
        Link link = new Link(client, server);
        accepted.incrementAndGet();
        synchronized (stallLock) {
          link.budget = stallBudget;
          links.add(link);
        }
        start(() -> link.toServer(), "fault-proxy-up");
        start(() -> link.toClient(), "fault-proxy-down");
      } catch (IOException e) {
        return; // closed
      }
    }
  }

  private static void start(Runnable pump, String name) {
    Thread t = new Thread(pump, name);
    t.setDaemon(true);
    t.start();
  }

  /** One proxied connection. */
  private final class Link {
    final Socket client;
    final Socket server;
    /** Guarded by stallLock: bytes still to forward to the client, or -1 for no limit. */
    long budget;
    /** Directions still forwarding; the link leaves the list when both have ended. */
    private final AtomicInteger pumping = new AtomicInteger(2);

    Link(Socket client, Socket server) {
      this.client = client;
      this.server = server;
    }

    void toServer() {
      byte[] buf = new byte[16384];
      try (InputStream in = client.getInputStream()) {
        OutputStream out = server.getOutputStream();
        int n;
        while ((n = in.read(buf)) >= 0) {
          keep(fromClients, buf, n);
          out.write(buf, 0, n);
        }
        server.shutdownOutput();
      } catch (IOException e) {
        closeBoth();
      } finally {
        ended();
      }
    }

    void toClient() {
      byte[] buf = new byte[16384];
      try (InputStream in = server.getInputStream()) {
        while (true) {
          int allowed = awaitBudget(buf.length);
          int n = in.read(buf, 0, allowed);
          if (n < 0) {
            break;
          }
          spend(n);
          keep(fromServers, buf, n);
          for (int at = 0; at < n; ) {
            int piece = Math.min(n - at, maxPiece == Integer.MAX_VALUE
                ? n : 1 + ThreadLocalRandom.current().nextInt(maxPiece));
            if (delayMillis > 0) {
              Thread.sleep(delayMillis);
            }
            writeToClient(buf, at, piece);
            at += piece;
          }
        }
        client.shutdownOutput();
      } catch (IOException | InterruptedException e) {
        closeBoth();
      } finally {
        ended();
      }
    }

    /** One direction has ended; after both, the sockets are closed and the link is dropped. */
    private void ended() {
      if (pumping.decrementAndGet() == 0) {
        closeBoth();
        synchronized (links) {
          links.remove(this);
          links.notifyAll();
        }
      }
    }

    /** Writes to the client; the proxy's own bytes and the server's never interleave mid-write. */
    void writeToClient(byte[] bytes, int offset, int length) throws IOException {
      synchronized (client) {
        client.getOutputStream().write(bytes, offset, length);
      }
    }

    private void keep(ByteArrayOutputStream copy, byte[] bytes, int n) {
      if (copy != null) {
        synchronized (copy) {
          copy.write(bytes, 0, n);
        }
      }
    }

    /** Waits until this connection may forward a byte; returns how many it may read at most. */
    private int awaitBudget(int wanted) throws InterruptedException {
      synchronized (stallLock) {
        while (budget == 0 && !closed) {
          stallLock.wait();
        }
        if (closed) {
          throw new InterruptedException("proxy closed");
        }
        return budget < 0 ? wanted : (int) Math.min(wanted, budget);
      }
    }

    private void spend(int n) {
      synchronized (stallLock) {
        forwarded += n;
        if (budget > 0) {
          budget = Math.max(0, budget - n);
        }
      }
    }

    void reset() {
      try {
        client.setSoLinger(true, 0);
        server.setSoLinger(true, 0);
      } catch (IOException ignored) {
        // already closed: nothing to reset
      }
      closeBoth();
    }

    void closeBoth() {
      closeQuietly(client);
      closeQuietly(server);
    }

    private void closeQuietly(Socket socket) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // already closed
      }
    }
  }

  @Override
  public void close() throws IOException {
    closed = true;
    listener.close();
    for (Link link : links) {
      link.closeBoth();
    }
    synchronized (stallLock) {
      stallLock.notifyAll();
    }
  }
}
