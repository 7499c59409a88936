package io.pinless.tls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.PooledByteBufAllocator;
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
import java.util.Random;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A peer whose first application data comes in the same read as its last handshake flight (as
 * clients that send at once do): the handshake handler and the record stage it installs take it
 * all, on both engines and both sides, whole or a few bytes at a time.
 */
class TlsDataBehindHandshakeTest {
  /** Installs the stage the handshake hands over, as the negotiators do. */
  private static final class Installer extends ChannelInboundHandlerAdapter {
    private final ConnectionHandler connection;

    Installer(ConnectionHandler connection) {
      this.connection = connection;
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof TlsHandshakeResult) {
        connection.install(((TlsHandshakeResult) evt).takeRecordStage(), null);
        return;
      }
      ctx.fireUserEventTriggered(evt);
    }
  }

  /** 50,000 bytes: full records, so the first one behind the handshake is a full one. */
  private static final int DATA_BYTES = 50_000;

  @ParameterizedTest
  @CsvSource({
      // the pinless end, its engine, the protocol, the pieces the peer's bytes come in (0: whole)
      "server,OPENSSL,TLSv1.3,0", "server,JDK,TLSv1.3,0", "server,OPENSSL,TLSv1.2,0",
      "server,JDK,TLSv1.2,0", "client,OPENSSL,TLSv1.2,0", "client,JDK,TLSv1.2,0",
      "client,OPENSSL,TLSv1.3,0", "client,JDK,TLSv1.3,0",
      "server,OPENSSL,TLSv1.3,7", "client,OPENSSL,TLSv1.2,3"})
  void dataInTheReadOfTheLastFlightArrives(String side, SslProvider provider, String protocol,
      int piece) throws Exception {
    boolean server = side.equals("server");
    SSLEngine mine = server
        ? TestCertificates.serverContext(provider, TestCertificates.SERVER, ClientAuth.NONE)
            .newEngine(PooledByteBufAllocator.DEFAULT)
        : TestCertificates.clientContext(provider, null)
            .newEngine(PooledByteBufAllocator.DEFAULT, "localhost", 443);
    SSLEngine peer = server
        ? TestCertificates.clientContext(SslProvider.JDK, null)
            .newEngine(PooledByteBufAllocator.DEFAULT, "localhost", 443)
        : TestCertificates.serverContext(SslProvider.JDK, TestCertificates.SERVER,
            ClientAuth.NONE).newEngine(PooledByteBufAllocator.DEFAULT);
    peer.setEnabledProtocols(new String[] {protocol});
    ConnectionHandler connection = new ConnectionHandler(new ReadBudget(1 << 20), false, 32768);
    TlsRecordStageTest.Capture capture = new TlsRecordStageTest.Capture();
    EmbeddedChannel ch = new EmbeddedChannel(connection,
        new TlsHandshakeHandler(mine, Runnable::run, 60_000), new Installer(connection), capture);
    byte[] data = new byte[DATA_BYTES];
    new Random(1).nextBytes(data);
    try {
      peer.beginHandshake();
      boolean sent = false;
      ByteArrayOutputStream answers = new ByteArrayOutputStream();
      for (int round = 0; round < 30 && capture.bytes.size() < data.length; round++) {
        ByteArrayOutputStream wire = answers;
        answers = new ByteArrayOutputStream();
        wire.writeBytes(flight(peer));
        if (!sent && peer.getHandshakeStatus() == HandshakeStatus.NOT_HANDSHAKING) {
          // The peer's data right behind its last flight, in the same read.
          wire.writeBytes(seal(peer, data));
          sent = true;
        }
        feed(ch, wire.toByteArray(), piece);
        ch.checkException();
        answers.writeBytes(take(peer, outbound(ch)));
      }
      assertTrue(ch.isOpen(), "the connection is open");
      assertArrayEquals(data, capture.bytes.toByteArray(), "the data behind the handshake");
    } finally {
      ch.finishAndReleaseAll();
      ReferenceCountUtil.release(peer);
    }
  }

  /** What the peer has to send of its handshake now. */
  private static byte[] flight(SSLEngine peer) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    TlsRecordStageTest.runTasks(peer);
    while (peer.getHandshakeStatus() == HandshakeStatus.NEED_WRAP) {
      out.writeBytes(seal(peer, new byte[0]));
      TlsRecordStageTest.runTasks(peer);
    }
    return out.toByteArray();
  }

  /** The records of {@code payload} (or, empty, one wrap of what the engine sends itself). */
  private static byte[] seal(SSLEngine engine, byte[] payload) throws Exception {
    ByteBuffer records = ByteBuffer.allocate(payload.length + (1 << 17));
    ByteBuffer src = ByteBuffer.wrap(payload);
    do {
      engine.wrap(src, records);
      TlsRecordStageTest.runTasks(engine);
    } while (src.hasRemaining());
    byte[] out = new byte[records.flip().remaining()];
    records.get(out);
    return out;
  }

  /** Writes {@code bytes} into {@code ch} whole, or in pieces of {@code piece} bytes. */
  private static void feed(EmbeddedChannel ch, byte[] bytes, int piece) {
    int step = piece == 0 ? Math.max(1, bytes.length) : piece;
    for (int at = 0; at < bytes.length; at += step) {
      int n = Math.min(step, bytes.length - at);
      ch.writeInbound(ch.alloc().directBuffer(n).writeBytes(bytes, at, n));
      ch.runPendingTasks();
    }
    ch.runPendingTasks();
  }

  /** Everything {@code ch} wrote. */
  private static byte[] outbound(EmbeddedChannel ch) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (Object msg; (msg = ch.readOutbound()) != null; ) {
      ByteBuf buf = (ByteBuf) msg;
      out.writeBytes(ByteBufUtil.getBytes(buf));
      buf.release();
    }
    return out.toByteArray();
  }

  /** Gives {@code bytes} to the peer; returns what it answers. */
  private static byte[] take(SSLEngine peer, byte[] bytes) throws Exception {
    ByteArrayOutputStream answers = new ByteArrayOutputStream();
    ByteBuffer in = ByteBuffer.wrap(bytes);
    ByteBuffer sink = ByteBuffer.allocate(1 << 17);
    while (in.hasRemaining()) {
      sink.clear();
      SSLEngineResult result = peer.unwrap(in, sink);
      answers.writeBytes(flight(peer));
      if (result.bytesConsumed() == 0) {
        throw new AssertionError("the peer takes no more of our records: " + result);
      }
    }
    return answers.toByteArray();
  }
}
