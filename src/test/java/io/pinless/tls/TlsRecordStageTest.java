package io.pinless.tls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.ReferenceCountUtil;
import io.pinless.connection.ConnectionHandler;
import io.pinless.read.ReadBudget;
import io.pinless.testing.TestCertificates;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The record stage alone over a client engine, against a server engine driven by the test. */
class TlsRecordStageTest {
  /** Collects the plaintext the stage hands on. */
  private static final class Capture extends ChannelInboundHandlerAdapter {
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream();

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ByteBuf buf = (ByteBuf) msg;
      bytes.write(ByteBufUtil.getBytes(buf), 0, buf.readableBytes());
      buf.release();
    }
  }

  /** A client and a server engine over the test certificates, their handshake done. */
  private static SSLEngine[] handshaken(SslProvider provider) throws Exception {
    SSLEngine client = TestCertificates.clientContext(provider, null)
        .newEngine(PooledByteBufAllocator.DEFAULT, "localhost", 443);
    SSLEngine server = TestCertificates.serverContext(provider, TestCertificates.SERVER,
        ClientAuth.NONE).newEngine(PooledByteBufAllocator.DEFAULT);
    ByteBuffer toServer = ByteBuffer.allocate(1 << 16);
    ByteBuffer toClient = ByteBuffer.allocate(1 << 16);
    ByteBuffer sink = ByteBuffer.allocate(1 << 16);
    ByteBuffer none = ByteBuffer.allocate(0);
    for (int round = 0; round < 20; round++) {
      step(client, none, toServer);
      toServer.flip();
      server.unwrap(toServer, sink);
      toServer.compact();
      runTasks(server);
      step(server, none, toClient);
      boolean serverSentNothing = toClient.position() == 0;
      toClient.flip();
      while (toClient.hasRemaining() && client.unwrap(toClient, sink).bytesConsumed() > 0) {
        runTasks(client);
      }
      toClient.compact();
      // Done once the server has nothing more to send (TLS 1.3 session tickets come after).
      if (done(client) && done(server) && serverSentNothing && toServer.position() == 0) {
        // BoringSSL sends its TLS 1.3 session tickets with its first write: one byte, read here.
        step(server, ByteBuffer.wrap(new byte[] {42}), toClient);
        toClient.flip();
        while (toClient.hasRemaining()) {
          client.unwrap(toClient, sink);
        }
        return new SSLEngine[] {client, server};
      }
    }
    throw new AssertionError("no handshake: " + client.getHandshakeStatus() + " / "
        + server.getHandshakeStatus());
  }

  private static void step(SSLEngine engine, ByteBuffer src, ByteBuffer dst) throws Exception {
    runTasks(engine);
    engine.wrap(src, dst);
    runTasks(engine);
  }

  private static boolean done(SSLEngine engine) {
    return engine.getHandshakeStatus() == HandshakeStatus.NOT_HANDSHAKING;
  }

  private static void runTasks(SSLEngine engine) {
    Runnable task;
    while ((task = engine.getDelegatedTask()) != null) {
      task.run();
    }
  }

  /** A channel whose connection handler runs {@code stage}, no frame slicer, then a capture. */
  private static EmbeddedChannel channel(TlsRecordStage stage, Capture capture) {
    ConnectionHandler connection = new ConnectionHandler(new ReadBudget(1 << 20), false, 32768);
    connection.install(stage, null);
    return new EmbeddedChannel(connection, capture);
  }

  private static byte[] random(int n, long seed) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void recordsCarryingMoreThanCountedStillArriveWhole(SslProvider provider) throws Exception {
    SSLEngine[] engines = handshaken(provider);
    Capture capture = new Capture();
    // 60 bytes counted per record, more than either engine adds: each buffer is sized too small
    // at first and the spare destination takes the rest.
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null, 60), capture);
    try {
      byte[] payload = random(3 * 16384 + 100, 1);
      feed(ch, seal(engines[1], payload), 20000);
      assertArrayEquals(payload, capture.bytes.toByteArray());
    } finally {
      ch.finishAndReleaseAll(); // closing writes close_notify
      ReferenceCountUtil.release(engines[1]);
    }
  }

  /** Records of {@code payload} sealed by {@code engine}, ready to read. */
  private static ByteBuffer seal(SSLEngine engine, byte[] payload) throws Exception {
    ByteBuffer records = ByteBuffer.allocate(payload.length + (1 << 16));
    ByteBuffer src = ByteBuffer.wrap(payload);
    while (src.hasRemaining()) {
      SSLEngineResult result = engine.wrap(src, records);
      assertEquals(SSLEngineResult.Status.OK, result.getStatus());
    }
    return records.flip();
  }

  /** Writes {@code records} into {@code ch} in pieces of {@code piece} bytes. */
  private static void feed(EmbeddedChannel ch, ByteBuffer records, int piece) {
    // Pieces that cut records, so some arrive whole in one read and some do not.
    while (records.hasRemaining()) {
      int n = Math.min(piece, records.remaining());
      ByteBuf buf = ch.alloc().directBuffer(n);
      buf.writeBytes(records.slice().limit(n));
      records.position(records.position() + n);
      ch.writeInbound(buf);
    }
  }

  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void smallWritesShareARecordAndEachPromiseCompletesWithItsRecord(SslProvider provider)
      throws Exception {
    SSLEngine[] engines = handshaken(provider);
    Capture capture = new Capture();
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null), capture);
    try {
      List<byte[]> writes = List.of(random(9, 2), random(300, 3), random(5, 4), random(40000, 5),
          random(0, 6), random(20, 7));
      List<ChannelFuture> promises = new ArrayList<>();
      ByteArrayOutputStream sent = new ByteArrayOutputStream();
      for (byte[] w : writes) {
        ByteBuf buf = ch.alloc().directBuffer(Math.max(1, w.length)).writeBytes(w);
        promises.add(ch.write(buf));
        sent.write(w, 0, w.length);
      }
      for (ChannelFuture promise : promises) {
        assertFalse(promise.isDone(), "nothing is written before the flush");
      }
      ch.flush();
      for (ChannelFuture promise : promises) {
        assertTrue(promise.isSuccess());
      }

      ByteArrayOutputStream opened = new ByteArrayOutputStream();
      int records = 0;
      ByteBuffer plain = ByteBuffer.allocate(1 << 16);
      for (Object out; (out = ch.readOutbound()) != null; ) {
        ByteBuf buf = (ByteBuf) out;
        ByteBuffer wire = ByteBuffer.wrap(ByteBufUtil.getBytes(buf));
        buf.release();
        while (wire.hasRemaining()) {
          plain.clear();
          SSLEngineResult result = engines[1].unwrap(wire, plain);
          assertEquals(SSLEngineResult.Status.OK, result.getStatus());
          opened.write(plain.array(), 0, plain.position());
          records++;
        }
      }
      assertArrayEquals(sent.toByteArray(), opened.toByteArray());
      if (provider == SslProvider.OPENSSL) {
        // 40,334 bytes in 16 KiB records: the small writes ride in the first, not one each.
        assertEquals((sent.size() + 16383) / 16384, records);
      }
    } finally {
      ch.finishAndReleaseAll(); // closing writes close_notify
      ReferenceCountUtil.release(engines[1]);
    }
  }

  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void closingSendsCloseNotify(SslProvider provider) throws Exception {
    SSLEngine[] engines = handshaken(provider);
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null), new Capture());
    try {
      ch.close();
      ByteBuf out = ch.readOutbound();
      ByteBuffer wire = ByteBuffer.wrap(ByteBufUtil.getBytes(out));
      out.release();
      SSLEngineResult result = engines[1].unwrap(wire, ByteBuffer.allocate(1 << 16));
      assertEquals(SSLEngineResult.Status.CLOSED, result.getStatus());
      assertTrue(engines[1].isInboundDone());
    } finally {
      ch.finishAndReleaseAll(); // closing writes close_notify
      ReferenceCountUtil.release(engines[1]);
    }
  }
}
