package io.pinless.tls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
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
  static final class Capture extends ChannelInboundHandlerAdapter {
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
    return handshaken(provider, provider, null);
  }

  /**
   * A client engine of {@code clientProvider} and a server engine of {@code serverProvider}, with
   * only {@code protocol} enabled (null: the defaults), their handshake done.
   */
  static SSLEngine[] handshaken(SslProvider clientProvider, SslProvider serverProvider,
      String protocol) throws Exception {
    SSLEngine client = TestCertificates.clientContext(clientProvider, null)
        .newEngine(PooledByteBufAllocator.DEFAULT, "localhost", 443);
    SSLEngine server = TestCertificates.serverContext(serverProvider, TestCertificates.SERVER,
        ClientAuth.NONE).newEngine(PooledByteBufAllocator.DEFAULT);
    if (protocol != null) {
      client.setEnabledProtocols(new String[] {protocol});
      server.setEnabledProtocols(new String[] {protocol});
    }
    return handshake(client, server);
  }

  /** Runs the handshake of two fresh engines. */
  static SSLEngine[] handshake(SSLEngine client, SSLEngine server) throws Exception {
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
      // Done once the server has nothing more to send (TLS 1.3 resumption tickets come after).
      if (done(client) && done(server) && serverSentNothing && toServer.position() == 0) {
        // BoringSSL sends its TLS 1.3 resumption tickets with its first write: one byte, read here.
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

  static void step(SSLEngine engine, ByteBuffer src, ByteBuffer dst) throws Exception {
    runTasks(engine);
    engine.wrap(src, dst);
    runTasks(engine);
  }

  private static boolean done(SSLEngine engine) {
    return engine.getHandshakeStatus() == HandshakeStatus.NOT_HANDSHAKING;
  }

  static void runTasks(SSLEngine engine) {
    Runnable task;
    while ((task = engine.getDelegatedTask()) != null) {
      task.run();
    }
  }

  /** A channel whose connection handler runs {@code stage}, no frame slicer, then a capture. */
  static EmbeddedChannel channel(TlsRecordStage stage, Capture capture) {
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
  void recordsCutAcrossReadsArriveWhole(SslProvider provider) throws Exception {
    SSLEngine[] engines = handshaken(provider);
    Capture capture = new Capture();
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null), capture);
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

  /** Bytes in one direct buffer, as one read. */
  private static ByteBuf read(EmbeddedChannel ch, byte[]... parts) {
    ByteBuf buf = ch.alloc().directBuffer();
    for (byte[] part : parts) {
      buf.writeBytes(part);
    }
    return buf;
  }

  /** What {@code engine} has to send by itself (a handshake message), as bytes. */
  private static byte[] pending(SSLEngine engine) throws Exception {
    ByteBuffer out = ByteBuffer.allocate(1 << 16);
    step(engine, ByteBuffer.allocate(0), out);
    out.flip();
    byte[] bytes = new byte[out.remaining()];
    out.get(bytes);
    return bytes;
  }

  /** Fails unless {@code ch} is closed and sent no handshake record (an alert is allowed). */
  private static void assertClosedWithoutAnswer(EmbeddedChannel ch) {
    assertFalse(ch.isOpen(), "the connection closed");
    for (Object out; (out = ch.readOutbound()) != null; ) {
      ByteBuf buf = (ByteBuf) out;
      try {
        assertTrue(!buf.isReadable() || buf.getByte(buf.readerIndex()) != 22,
            "no handshake record went out");
      } finally {
        buf.release();
      }
    }
  }

  private static void assertUnavailable(StatusRuntimeException e, String part) {
    assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
    assertTrue(String.valueOf(e.getStatus().getDescription()).contains(part),
        e.getStatus() + " names " + part);
  }

  /**
   * A server's HelloRequest under TLS 1.2 starts a renegotiation, a connection error under HTTP/2
   * (RFC 9113 9.2.1): the client's stage refuses it without answering and closes.
   */
  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void aServerRenegotiationIsAConnectionError(SslProvider provider) throws Exception {
    SSLEngine[] engines = handshaken(provider, SslProvider.JDK, "TLSv1.2");
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null), new Capture());
    try {
      engines[1].beginHandshake();
      byte[] helloRequest = pending(engines[1]);
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
          () -> ch.writeInbound(read(ch, helloRequest)));
      assertUnavailable(e, "renegotiation");
      assertClosedWithoutAnswer(ch);
    } finally {
      ch.finishAndReleaseAll();
      ReferenceCountUtil.release(engines[1]);
    }
  }

  /** A client's new ClientHello under TLS 1.2 is refused the same way by the server's stage. */
  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void aClientRenegotiationIsAConnectionError(SslProvider provider) throws Exception {
    SSLEngine[] engines = handshaken(SslProvider.JDK, provider, "TLSv1.2");
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[1], null), new Capture());
    try {
      engines[0].beginHandshake();
      byte[] clientHello = pending(engines[0]);
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
          () -> ch.writeInbound(read(ch, clientHello)));
      assertUnavailable(e, "renegotiation");
      assertClosedWithoutAnswer(ch);
    } finally {
      ch.finishAndReleaseAll();
      ReferenceCountUtil.release(engines[0]);
    }
  }

  /**
   * A record that does not authenticate, on a connection with nothing else to read, fails it at
   * once: OpenSSL's engine reports such a failure only on the wrap after its alert.
   */
  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void aForgedRecordOnAnIdleConnectionFailsIt(SslProvider provider) throws Exception {
    SSLEngine[] engines = handshaken(provider);
    Capture capture = new Capture();
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null), capture);
    try {
      byte[] payload = random(1000, 8);
      ByteBuffer good = seal(engines[1], payload);
      byte[] forged = forgedRecord();
      byte[] goodBytes = new byte[good.remaining()];
      good.get(goodBytes);
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
          () -> ch.writeInbound(read(ch, goodBytes, forged)));
      assertUnavailable(e, "TLS record rejected");
      assertArrayEquals(payload, capture.bytes.toByteArray(), "the plaintext before it arrived");
      assertClosedWithoutAnswer(ch);
    } finally {
      ch.finishAndReleaseAll();
      ReferenceCountUtil.release(engines[1]);
    }
  }

  /**
   * A record that does not authenticate with more records behind it in the same read fails the
   * connection with the engine's reason: OpenSSL's engine takes nothing after it and gives its
   * reason only on the wrap after its alert.
   */
  @ParameterizedTest
  @EnumSource(names = {"JDK", "OPENSSL"})
  void aForgedRecordWithMoreBehindItFailsWithTheEnginesReason(SslProvider provider)
      throws Exception {
    SSLEngine[] engines = handshaken(provider);
    Capture capture = new Capture();
    EmbeddedChannel ch = channel(new TlsRecordStage(engines[0], null), capture);
    try {
      byte[] payload = random(3000, 9);
      byte[] before = bytes(seal(engines[1], payload));
      byte[] forged = forgedRecord();
      byte[] after = bytes(seal(engines[1], random(3000, 10)));
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
          () -> ch.writeInbound(read(ch, before, forged, after, after)));
      assertUnavailable(e, "TLS record rejected");
      assertArrayEquals(payload, capture.bytes.toByteArray(), "the plaintext before it arrived");
      assertClosedWithoutAnswer(ch);
    } finally {
      ch.finishAndReleaseAll();
      ReferenceCountUtil.release(engines[1]);
    }
  }

  /** An application data record of 40 bytes that no key opens. */
  private static byte[] forgedRecord() {
    byte[] forged = new byte[5 + 40];
    forged[0] = 23;
    forged[1] = 3;
    forged[2] = 3;
    forged[4] = 40;
    return forged;
  }

  private static byte[] bytes(ByteBuffer buffer) {
    byte[] bytes = new byte[buffer.remaining()];
    buffer.get(bytes);
    return bytes;
  }

  /**
   * TLS 1.3 records padded by any amount decode, several in one read, whatever the records before
   * them added (RFC 8446 5.4).
   */
  @org.junit.jupiter.api.Test
  void recordsPaddedByAnyAmountDecode() {
    Capture capture = new Capture();
    EmbeddedChannel ch = channel(new TlsRecordStage(new FakeTls13Engine(), null), capture);
    try {
      ByteArrayOutputStream sent = new ByteArrayOutputStream();
      int[][] reads = {
          {100, 16000}, // a heavily padded record alone: it adds 16,017 bytes
          {16384, 0, 16384, 0, 16384, 0}, // then full records that add only 17
          {10, 16374, 16384, 0, 1, 0, 5000, 11384},
          {16384, 0, 0, 16384, 16384, 0}};
      int seed = 100;
      for (int[] read : reads) {
        ByteBuf buf = ch.alloc().directBuffer();
        for (int i = 0; i < read.length; i += 2) {
          byte[] plaintext = random(read[i], seed++);
          sent.write(plaintext, 0, plaintext.length);
          buf.writeBytes(FakeTls13Engine.record(plaintext, read[i + 1]));
        }
        ch.writeInbound(buf);
      }
      assertArrayEquals(sent.toByteArray(), capture.bytes.toByteArray());
      assertTrue(ch.isOpen());
    } finally {
      ch.finishAndReleaseAll();
    }
  }

  /** An engine that seals a little per call still seals every byte, and each promise completes. */
  @org.junit.jupiter.api.Test
  void anEngineSealingLessThanOfferedStillSealsEverything() throws Exception {
    FakeTls13Engine engine = new FakeTls13Engine();
    engine.wrapLimit = 1000;
    engine.padding = () -> 7;
    EmbeddedChannel ch = channel(new TlsRecordStage(engine, null), new Capture());
    try {
      byte[] payload = random(40000, 9);
      ChannelFuture written = ch.writeAndFlush(ch.alloc().directBuffer().writeBytes(payload));
      assertTrue(written.isSuccess(), String.valueOf(written.cause()));
      FakeTls13Engine peer = new FakeTls13Engine();
      ByteArrayOutputStream opened = new ByteArrayOutputStream();
      ByteBuffer plain = ByteBuffer.allocate(1 << 16);
      for (Object out; (out = ch.readOutbound()) != null; ) {
        ByteBuf buf = (ByteBuf) out;
        ByteBuffer wire = ByteBuffer.wrap(ByteBufUtil.getBytes(buf));
        buf.release();
        while (wire.hasRemaining()) {
          plain.clear();
          peer.unwrap(wire, plain);
          opened.write(plain.array(), 0, plain.position());
        }
      }
      assertArrayEquals(payload, opened.toByteArray());
    } finally {
      ch.finishAndReleaseAll();
    }
  }

  /**
   * An engine that stops sealing part way fails the write and the connection: the promise never
   * reports bytes as written that were not sealed.
   */
  @org.junit.jupiter.api.Test
  void aWriteTheEngineDoesNotSealFailsItsPromise() {
    FakeTls13Engine engine = new FakeTls13Engine();
    engine.sealBudget = 5000;
    EmbeddedChannel ch = channel(new TlsRecordStage(engine, null), new Capture());
    try {
      ChannelFuture written =
          ch.writeAndFlush(ch.alloc().directBuffer().writeBytes(random(10000, 10)));
      assertTrue(written.isDone());
      assertFalse(written.isSuccess(), "5,000 of 10,000 bytes were sealed");
      StatusRuntimeException e = assertThrows(StatusRuntimeException.class, ch::checkException);
      assertUnavailable(e, "sealed 5000 of 10000");
      assertFalse(ch.isOpen(), "the connection closed");
    } finally {
      ch.finishAndReleaseAll();
    }
  }
}
