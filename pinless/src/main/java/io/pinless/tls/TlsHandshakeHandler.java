package io.pinless.tls;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.util.ReferenceCounted;
import io.netty.util.concurrent.ScheduledFuture;
import io.pinless.PinlessMetrics.Metric;
import java.nio.ByteBuffer;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLException;

/**
 * Runs the TLS handshake of one connection on an {@link SSLEngine}, handing it whole records only.
 * It only handshakes: on success it fires a {@link TlsHandshakeResult} carrying a {@link
 * TlsRecordStage} over the same engine, which a handler behind it installs in front of it
 * ({@code io.pinless.connection.ConnectionHandler#install}); it then removes itself and fires the
 * bytes that came behind the handshake from the head of the pipeline, so they take the normal
 * path through the installed stage.
 *
 * <p>The engine's delegated tasks (certificate checks, key agreement) run on the executor given,
 * never on the event loop; records that arrive meanwhile wait. An executor that refuses them (its
 * queue is full) fails the handshake. Tasks left when the handshake ends (its deadline, the
 * connection's close) are skipped, and the engine is released once the running one returns or
 * throws, whatever it throws. Every record header is checked before the record is awaited: a
 * peer that does not speak TLS fails at its first bytes.
 *
 * <p>Failure: a header that is not TLS, a record above 2^14 + 2048 bytes, an engine error (an
 * untrusted, expired or wrong-host certificate, a missing client certificate, an alert), a peer
 * that selects no {@code h2} with ALPN, a peer that closes or stalls past the deadline: it fires
 * a {@code StatusRuntimeException} with UNAVAILABLE and the reason, sends the engine's alert if it
 * has one, and closes the channel.
 *
 * <p>Memory: the handshake's bytes wait in one buffer, released when it ends.
 */
public final class TlsHandshakeHandler extends ChannelInboundHandlerAdapter {
  /** Handshake bytes from the peer waiting for the engine, at most (a few certificate chains). */
  static final int MAX_PENDING_BYTES = 256 * 1024;
  private static final ByteBuffer[] NOTHING = {ByteBuffer.allocate(0)};
  /** Room before early plaintext, as the frame slicer asks of every plaintext buffer. */
  private static final int EARLY_HEADROOM_BYTES = 16;

  private final SSLEngine engine;
  private final Executor tasks;
  private final long timeoutMillis;
  private ChannelHandlerContext ctx;
  /** The peer's bytes not yet given to the engine; null when there are none. */
  private ByteBuf pending;
  /** Plaintext the engine opened with the handshake's last record; null when none. */
  private ByteBuf early;
  private boolean started;
  /** The handshake ended; the task thread reads it to skip the tasks left. */
  private volatile boolean ended;
  /** Delegated tasks are running on {@link #tasks}: the engine is not touched meanwhile. */
  private boolean taskRunning;
  /** The engine went to the record stage: the stage releases it. */
  private boolean engineHandedOver;
  /** The engine took a record since it was last asked with no input. */
  private boolean tookRecord;
  private ScheduledFuture<?> deadline;

  /**
   * Creates the handshake of one connection.
   *
   * @param engine owned: in client or server mode as the end requires, with ALPN offering {@code
   *     h2}; released if the handshake fails, else handed to the record stage
   * @param tasks where the engine's delegated tasks run
   * @param timeoutMillis how long the whole handshake may take
   */
  public TlsHandshakeHandler(SSLEngine engine, Executor tasks, long timeoutMillis) {
    this.engine = engine;
    this.tasks = tasks;
    this.timeoutMillis = timeoutMillis;
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    deadline = ctx.executor().schedule(
        () -> fail("the TLS handshake did not finish within " + timeoutMillis + " ms", null),
        timeoutMillis, TimeUnit.MILLISECONDS);
    if (ctx.channel().isActive()) {
      start();
    }
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    ctx.fireChannelActive();
    if (!started) {
      start();
    }
  }

  private void start() {
    started = true;
    try {
      engine.beginHandshake();
    } catch (SSLException e) {
      fail("the TLS handshake could not start: " + e.getMessage(), e);
      return;
    }
    advance();
  }

  /**
   * Takes the peer's handshake bytes.
   *
   * @param msg owned: copied and released here
   */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (!(msg instanceof ByteBuf)) {
      ctx.fireChannelRead(msg);
      return;
    }
    ByteBuf in = (ByteBuf) msg;
    try {
      if (ended) {
        return;
      }
      if (pending == null) {
        pending = ctx.alloc().directBuffer(in.readableBytes());
      } else {
        pending.discardReadBytes();
      }
      if (pending.readableBytes() + in.readableBytes() > MAX_PENDING_BYTES) {
        fail("the peer sent over " + MAX_PENDING_BYTES + " bytes the TLS handshake could not use",
            null);
        return;
      }
      pending.writeBytes(in);
    } finally {
      in.release();
    }
    if (started && !taskRunning) {
      advance();
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    fail("the connection closed during the TLS handshake", null);
    ctx.fireChannelInactive();
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    end();
  }

  /**
   * Steps the engine until it needs bytes that have not come, runs a task, or is done. Each step
   * follows the status the engine's last result gave (OpenSSL's engine asks through the result
   * to wrap again, to throw a failure it held back while its alert went out).
   */
  private void advance() {
    ByteBuf out = null;
    try {
      HandshakeStatus status = engine.getHandshakeStatus();
      while (!ended) {
        switch (status) {
          case NEED_WRAP:
            if (out == null) {
              out = ctx.alloc().directBuffer(TlsRecords.packetBytes(engine));
            }
            status = wrap(out);
            break;
          case NEED_UNWRAP:
          case NEED_UNWRAP_AGAIN:
            status = unwrapNextRecord(status == HandshakeStatus.NEED_UNWRAP_AGAIN);
            if (status == null) {
              return;
            }
            break;
          case NEED_TASK:
            runTasks();
            return;
          case FINISHED:
            // The JDK's server still has its resumption ticket to send.
            status = engine.getHandshakeStatus();
            if (status == HandshakeStatus.NEED_WRAP) {
              break;
            }
            // Fall through: done.
          default:
            write(out);
            out = null;
            succeed();
            return;
        }
      }
    } catch (SSLException e) {
      out = alert(out);
      write(out);
      out = null;
      fail("the TLS handshake failed: " + e.getMessage(), e);
    } catch (StatusRuntimeException e) {
      write(out);
      out = null;
      fail(e.getStatus().getDescription(), null);
    } catch (RuntimeException e) {
      write(out);
      out = null;
      fail("the TLS handshake failed: " + e, e);
    } finally {
      write(out);
    }
  }

  /**
   * Wraps what the engine has to send into {@code out}.
   *
   * @param out borrowed: its writer index is advanced past the records
   * @return what the engine needs next
   */
  private HandshakeStatus wrap(ByteBuf out) throws SSLException {
    int room = TlsRecords.packetBytes(engine);
    while (true) {
      out.ensureWritable(room);
      SSLEngineResult result =
          engine.wrap(NOTHING, out.nioBuffer(out.writerIndex(), out.writableBytes()));
      out.writerIndex(out.writerIndex() + result.bytesProduced());
      if (result.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
        room *= 2;
        continue;
      }
      if (result.getStatus() == SSLEngineResult.Status.CLOSED) {
        // The engine failed and produced its alert (OpenSSL's does so first): the next wrap
        // throws the failure itself.
        out.ensureWritable(room);
        engine.wrap(NOTHING, out.nioBuffer(out.writerIndex(), out.writableBytes()));
        throw new SSLException("the TLS engine closed during the handshake");
      }
      return result.getHandshakeStatus();
    }
  }

  /**
   * The engine's alert after a failure, added to {@code out}, if it has one to send.
   *
   * @param out owned: the records so far, or null
   * @return owned by the caller
   */
  private ByteBuf alert(ByteBuf out) {
    try {
      if (engine.getHandshakeStatus() == HandshakeStatus.NEED_WRAP) {
        if (out == null) {
          out = ctx.alloc().directBuffer(TlsRecords.packetBytes(engine));
        }
        wrap(out);
      }
    } catch (SSLException | RuntimeException ignored) {
      // The failure itself is what is reported.
    }
    return out;
  }

  /** @param out owned: written and flushed when readable, else released; null for none */
  private void write(ByteBuf out) {
    if (out == null) {
      return;
    }
    if (out.isReadable() && ctx.channel().isActive()) {
      ctx.writeAndFlush(out);
    } else {
      out.release();
    }
  }

  /**
   * Gives the engine the next whole record, if it has come. With none, an engine that took a
   * record since it was last asked is asked once with no input: OpenSSL's engine finishes a
   * handshake that the client's last flight completed only then, so a client that sends nothing
   * after it (one that selected no protocol the server speaks) is not left waiting.
   *
   * @param again the engine asks to be called without new input
   * @return what the engine needs next; null when the record is not complete yet
   */
  private HandshakeStatus unwrapNextRecord(boolean again) throws SSLException {
    ByteBuffer src;
    int recordBytes = 0;
    if (again) {
      src = NOTHING[0];
    } else if (!wholeRecordPending()) {
      return tookRecord ? askWithNoInput() : null;
    } else {
      int start = pending.readerIndex();
      recordBytes = TlsRecords.HEADER_BYTES + pending.getUnsignedShort(start + 3);
      src = pending.nioBuffer(start, recordBytes);
      tookRecord = true;
    }
    // OpenSSL's engine may open the record behind the handshake's last in the same call, and
    // asks for room for all of that record's length.
    ByteBuf plaintext = ctx.alloc().directBuffer(
        EARLY_HEADROOM_BYTES + Math.max(TlsRecords.plaintextBytes(engine), recordBytes));
    plaintext.setIndex(EARLY_HEADROOM_BYTES, EARLY_HEADROOM_BYTES);
    try {
      SSLEngineResult result = engine.unwrap(src,
          plaintext.nioBuffer(EARLY_HEADROOM_BYTES, plaintext.writableBytes()));
      if (!again) {
        pending.skipBytes(result.bytesConsumed());
      }
      if (result.bytesProduced() > 0) {
        // OpenSSL's engine may end the handshake and open the record behind it in one call.
        plaintext.writerIndex(EARLY_HEADROOM_BYTES + result.bytesProduced());
        keepEarly(plaintext);
        plaintext = null;
      }
      switch (result.getStatus()) {
        case OK:
          return result.getHandshakeStatus();
        case CLOSED:
          throw new SSLException("the peer closed TLS during the handshake");
        default:
          throw new SSLException("the engine could not take a whole " + recordBytes
              + "-byte record: " + result.getStatus());
      }
    } finally {
      if (plaintext != null) {
        plaintext.release();
      }
    }
  }

  /** True when {@link #pending} holds a whole record; its header is checked first. */
  private boolean wholeRecordPending() {
    if (pending == null || pending.readableBytes() < TlsRecords.HEADER_BYTES) {
      return false;
    }
    int start = pending.readerIndex();
    int recordBytes = TlsRecords.HEADER_BYTES + TlsRecords.checkHeader(
        pending.getUnsignedByte(start), pending.getUnsignedByte(start + 1),
        pending.getUnsignedByte(start + 2), pending.getUnsignedShort(start + 3));
    return pending.readableBytes() >= recordBytes;
  }

  /**
   * Asks the engine for its next step with no input, once per record taken.
   *
   * @return what the engine needs next; null when it still waits for the peer
   */
  private HandshakeStatus askWithNoInput() throws SSLException {
    tookRecord = false;
    ByteBuf sink = ctx.alloc().directBuffer(TlsRecords.plaintextBytes(engine));
    try {
      SSLEngineResult result =
          engine.unwrap(NOTHING[0], sink.nioBuffer(0, sink.writableBytes()));
      if (result.getStatus() == SSLEngineResult.Status.CLOSED) {
        throw new SSLException("the peer closed TLS during the handshake");
      }
      if (result.bytesProduced() > 0) {
        keepEarly(sink.writerIndex(result.bytesProduced()).retain());
      }
      HandshakeStatus next = result.getHandshakeStatus();
      return next == HandshakeStatus.NEED_UNWRAP ? null : next;
    } finally {
      sink.release();
    }
  }

  /** @param plaintext owned: kept for the record stage to hand on first */
  private void keepEarly(ByteBuf plaintext) {
    if (early == null) {
      early = plaintext;
    } else {
      early.ensureWritable(plaintext.readableBytes()).writeBytes(plaintext);
      plaintext.release();
    }
  }

  /**
   * Runs the engine's delegated tasks on the executor, then steps on, on the event loop. The
   * engine is not touched on the loop meanwhile.
   */
  private void runTasks() {
    taskRunning = true;
    try {
      tasks.execute(this::runTasksOffLoop);
    } catch (RejectedExecutionException e) {
      taskRunning = false;
      fail("the TLS handshake could not queue its engine's tasks: " + e.getMessage(), e);
    }
  }

  /** On the executor: the engine's tasks until none is left or the handshake has ended. */
  private void runTasksOffLoop() {
    Throwable error = null;
    try {
      Runnable task;
      while (!ended && (task = engine.getDelegatedTask()) != null) {
        task.run();
      }
    } catch (Throwable t) {
      // An Error too: the loop still hears of it, fails the handshake and releases the engine.
      error = t;
    }
    Throwable failed = error;
    try {
      ctx.executor().execute(() -> tasksDone(failed));
    } catch (RejectedExecutionException e) {
      // The event loop has shut down: nothing else will release the engine.
      releaseEngine();
    }
  }

  private void tasksDone(Throwable error) {
    taskRunning = false;
    if (ended) {
      releaseEngine();
      return;
    }
    if (error != null) {
      fail("a TLS handshake task failed: " + error, error);
      return;
    }
    advance();
  }

  private void succeed() {
    String protocol = engine.getApplicationProtocol();
    if (!"h2".equals(protocol)) {
      fail("Failed ALPN negotiation: Unable to find compatible protocol (the peer selected "
          + (protocol == null || protocol.isEmpty() ? "none" : "'" + protocol + "'") + ")", null);
      return;
    }
    ByteBuf records = pending;
    pending = null;
    ByteBuf opened = takeEarly();
    engineHandedOver = true;
    end();
    TlsRecordStage stage = new TlsRecordStage(engine, opened);
    TlsHandshakeResult event = new TlsHandshakeResult(stage);
    ctx.fireUserEventTriggered(event);
    if (event.takeRecordStage() != null) {
      // Nobody behind installed the stage: records would reach HTTP/2 as they are.
      stage.release();
      if (records != null) {
        records.release();
      }
      Metric.TLS_HANDSHAKE_FAILURES.add(1);
      ctx.fireExceptionCaught(Status.UNAVAILABLE
          .withDescription("no handler installed the TLS record stage").asRuntimeException());
      ctx.close();
      return;
    }
    Metric.TLS_HANDSHAKES.add(1);
    ChannelPipeline pipeline = ctx.pipeline();
    pipeline.remove(this);
    if (records != null && records.isReadable()) {
      pipeline.fireChannelRead(records);
      pipeline.fireChannelReadComplete();
      return;
    }
    if (records != null) {
      records.release();
    }
    if (opened != null) {
      // The stage hands on the early plaintext when it next opens input: give it none.
      pipeline.fireChannelRead(Unpooled.EMPTY_BUFFER);
      pipeline.fireChannelReadComplete();
    }
  }

  /** @return owned by the caller: the early plaintext, or null */
  private ByteBuf takeEarly() {
    ByteBuf taken = early;
    early = null;
    return taken;
  }

  private void fail(String reason, Throwable cause) {
    if (ended) {
      return;
    }
    end();
    Metric.TLS_HANDSHAKE_FAILURES.add(1);
    ctx.fireExceptionCaught(
        Status.UNAVAILABLE.withDescription(reason).withCause(cause).asRuntimeException());
    ctx.close();
  }

  /** Ends the handshake: no timer, no bytes held; the engine released unless handed over. */
  private void end() {
    if (ended) {
      return;
    }
    ended = true;
    if (deadline != null) {
      deadline.cancel(false);
    }
    if (pending != null) {
      pending.release();
      pending = null;
    }
    if (early != null) {
      takeEarly().release();
    }
    if (!taskRunning) {
      releaseEngine();
    }
  }

  private void releaseEngine() {
    if (engineHandedOver) {
      return;
    }
    engineHandedOver = true;
    engine.closeOutbound();
    if (engine instanceof ReferenceCounted) {
      ((ReferenceCounted) engine).release();
    }
  }
}
