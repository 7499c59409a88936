package io.pinless.tls;

import io.grpc.StatusRuntimeException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.ssl.ReferenceCountedOpenSslEngine;
import io.netty.util.ReferenceCounted;
import io.netty.util.concurrent.FastThreadLocal;
import io.pinless.connection.RecordFraming;
import io.pinless.connection.RecordStage;
import io.pinless.read.ReadPolicy;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.util.function.BiConsumer;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;

/**
 * TLS records after the handshake: the {@link SSLEngine} the handshake used, driven directly and
 * handed only whole records. The framing is {@link RecordFraming}'s: whole records are unwrapped
 * out of the buffer the socket read into, into a pooled buffer per 64 KiB, with no cumulation; a
 * record a read cuts short keeps only its own bytes; a header is checked before anything is
 * allocated from it (a length above 2^14 + 2048 is refused). OpenSSL's engine reads each record
 * in place; the JDK's AES-GCM works on arrays, so for it each record goes through a pooled heap
 * copy, which it decrypts in place before copying the plaintext out. The plaintext is direct with
 * either engine, so a zero-copy marshaller can read it where it is. A read's plaintext buffer is
 * sized from its records' lengths less what the peer's last record added (never less than the
 * suite's least overhead; at most 2^14 each), so 16 KiB of plaintext takes a 16 KiB buffer with
 * room for a frame header in front. A record that carries more (a TLS 1.3 peer padding less than
 * before, RFC 8446 5.4) spills into a spare or makes the engine ask for room: the buffer grows
 * (a copy) and the record is unwrapped again, so any legal padding decodes.
 *
 * <p>Writes are queued until flush ({@link PendingWrites}) and sealed a record's worth at a time
 * (16 KiB; 16,367 bytes with the JDK's engine, which seals no more into a TLS 1.3 record): small
 * writes gathered into one pooled buffer, a large one sealed from its own bytes. A write's promise
 * completes when the record holding its last byte is written.
 *
 * <p>Memory: idle it holds no buffer; the engine keeps what it keeps (the JDK engine's handshake
 * state on the heap; OpenSSL's SSL object, whose record buffers BoringSSL frees when empty).
 * Mid-record it holds at most 4 times what has come of the record (64 bytes for a header alone),
 * and the whole record's size once a quarter of it has come.
 *
 * <p>Errors: a bad header, a record that fails to decrypt or authenticate, an alert from the peer,
 * or the peer's close in the middle of a record are fatal: the plaintext before it is handed on,
 * then a {@code StatusRuntimeException} (UNAVAILABLE, with the reason) is thrown and later input is
 * dropped. The peer's close_notify ends the input: this end answers it and closes. Records after
 * the handshake that the engine answers (TLS 1.3 key updates) are answered on the spot. A
 * handshake record after the handshake is a renegotiation (TLS 1.2) or out of place (TLS 1.3):
 * it is refused before the engine sees it, a connection error under HTTP/2 (RFC 9113 9.2.1). A
 * record the engine rejects after it (OpenSSL's engine only asks to send its alert) fails the
 * connection at once, with the engine's reason.
 *
 * <p>A write's promise succeeds only when all its bytes were sealed: an engine that takes less
 * than offered is asked again, and one that takes nothing fails the connection.
 */
public final class TlsRecordStage extends RecordFraming implements RecordStage {
  /** Fresh reads hold about three full records. */
  static final int RECORDS_PER_READ = 3;

  private final SSLEngine engine;
  /**
   * The engine is given records and plaintext to seal in pooled heap buffers, and seals into
   * them: the JDK's engine, whose AES-GCM works on arrays and copies direct buffers through
   * temporary ones (as {@code SslHandler} gives it heap buffers). OpenSSL's engine works on direct
   * buffers in place. Received plaintext is direct either way: the JDK's engine decrypts in the
   * record's buffer and copies out, and a direct destination costs it nothing more.
   */
  private final boolean heapOutput;
  /** What each record of the negotiated suite adds to its plaintext at least. */
  private final int minRecordOverhead;
  /**
   * What the peer's last record added to its plaintext (the JDK's engine pads each TLS 1.3 record
   * by 16 bytes), never below {@link #minRecordOverhead}: plaintext buffers are sized with it.
   */
  private int recordOverhead;
  /** The plaintext the engine seals into one record: 16 KiB, or the JDK's 16,367 with TLS 1.3. */
  private int recordPlaintextBytes = TlsRecords.MAX_PLAINTEXT_BYTES;
  /** Writes not yet sealed; made on the first write. */
  private PendingWrites queue;
  /** The engine asked for a whole packet buffer of room per wrap (the JDK's does). */
  private boolean wrapsIntoPacketBuffers;
  /** The first fatal error of the sending side; every later write fails with it. */
  private Throwable failure;
  /** The last unwrap asked for a wrap, which the engine's status may not say. */
  private boolean mustWrap;
  /** This end sent (or tried to send) its close_notify. */
  private boolean closeSent;
  private boolean released;

  /** Plaintext opened with the handshake's last record, handed on first; null when none. */
  private ByteBuf early;

  /**
   * A stage over {@code engine}, whose handshake has finished.
   *
   * @param engine owned: a reference-counted engine (OpenSSL's) is released by {@link #release}
   * @param early owned: plaintext the engine opened with the handshake's last record, or null
   */
  TlsRecordStage(SSLEngine engine, ByteBuf early) {
    super(TlsRecords.HEADER_BYTES);
    this.engine = engine;
    this.early = early;
    this.heapOutput = !(engine instanceof ReferenceCountedOpenSslEngine);
    this.minRecordOverhead = TlsRecords.minRecordOverhead(
        TlsRecords.protocol(engine), TlsRecords.cipherSuite(engine));
    this.recordOverhead = minRecordOverhead;
  }

  /**
   * Room after each plaintext buffer: the engines ask for a little more room than a record's
   * plaintext can take (its length, or its length less the tag), and a buffer sized to that would
   * fall into the pool's next size class. The spare makes up the difference and takes nothing in
   * practice.
   */
  private static final FastThreadLocal<ByteBuffer[]> DESTINATIONS =
      new FastThreadLocal<ByteBuffer[]>() {
        @Override
        protected ByteBuffer[] initialValue() {
          return new ByteBuffer[] {null, ByteBuffer.allocateDirect(SPARE_BYTES)};
        }
      };
  /** 64 bytes: more than any suite's overhead that {@link TlsRecords#minRecordOverhead} counts. */
  private static final int SPARE_BYTES = 64;
  /** The record type of handshake messages, which only the handshake may carry. */
  private static final int HANDSHAKE = 22;

  /**
   * The plaintext a whole record is expected to carry (at least 1): its length less what the
   * peer's last record added, and never above 2^14. One that carries more grows its buffer.
   */
  @Override
  protected int plaintextBound(int recordBytes) {
    int expected = recordBytes - TlsRecords.HEADER_BYTES - recordOverhead;
    return Math.max(1, Math.min(TlsRecords.MAX_PLAINTEXT_BYTES, expected));
  }

  @Override
  protected int recordBytes(long header) {
    return TlsRecords.HEADER_BYTES + TlsRecords.checkHeader((int) (header >>> 32) & 0xff,
        (int) (header >>> 24) & 0xff, (int) (header >>> 16) & 0xff, (int) header & 0xffff);
  }

  /**
   * Headroom only where it stays in the pool's size class: 16 KiB of plaintext and 9 bytes would
   * take a 20 KiB buffer (the slicer then puts a cut frame's header in front itself).
   *
   * @return owned by the caller: pooled direct, with either engine
   */
  @Override
  protected ByteBuf allocateOutput(ChannelHandlerContext ctx, int headroom, int plaintextBytes) {
    int size = ReadPolicy.sizeClass(plaintextBytes);
    int front = ReadPolicy.sizeClass(headroom + plaintextBytes) == size ? headroom : 0;
    return ctx.alloc().directBuffer(front + plaintextBytes).writerIndex(front).readerIndex(front);
  }

  @Override
  protected RuntimeException truncated(String what) {
    return TlsRecords.refused("the connection closed after " + what + " (TLS)");
  }

  /** About three full records, plus the rest of a cut one. */
  @Override
  protected int freshReadBytes(int largestRecordBytes) {
    return RECORDS_PER_READ * (TlsRecords.HEADER_BYTES + TlsRecords.MAX_PLAINTEXT_BYTES + 22);
  }

  /** @return owned by the caller: a pooled buffer to seal from or into (heap for the JDK's) */
  private ByteBuf allocate(ChannelHandlerContext ctx, int capacity) {
    return heapOutput ? ctx.alloc().heapBuffer(capacity) : ctx.alloc().directBuffer(capacity);
  }

  /** The engine, for the peer's certificates and the application protocol. */
  SSLEngine engine() {
    return engine;
  }

  /**
   * Unwraps every record {@code in} completes and hands their plaintext to {@code out}.
   *
   * @param in borrowed: its reader index is advanced past everything consumed; it may be the
   *     partial record itself, when the socket read straight into it
   * @param out takes ownership of each plaintext buffer
   */
  @Override
  public void open(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> out) {
    if (stopped()) {
      in.skipBytes(in.readableBytes());
      return;
    }
    if (early != null) {
      handOnEarly(ctx, headroom, out);
    }
    try {
      openRecords(ctx, in, headroom, out);
    } catch (RuntimeException e) {
      if (mustWrap) {
        // OpenSSL's engine takes no record after one it rejected and gives its reason only on
        // the wrap after its alert: the alert goes out, and that reason replaces the refusal.
        mustWrap = false;
        writeWhatTheEngineSends(ctx);
        writeWhatTheEngineSends(ctx);
      }
      throw e;
    }
    answerEngine(ctx);
  }

  /** Refuses a handshake record: the handshake is over, and HTTP/2 forbids a renegotiation. */
  private void refuseHandshakeRecord(ByteBuf record, int start) {
    if (record.getUnsignedByte(start) != HANDSHAKE) {
      return;
    }
    String protocol = TlsRecords.protocol(engine);
    throw TlsRecords.refused("TLS: the peer sent a handshake record after the handshake ("
        + ("TLSv1.3".equals(protocol) ? "TLS 1.3 sends none in plaintext" : "a renegotiation")
        + "), a PROTOCOL_ERROR connection error under HTTP/2 (RFC 9113 9.2.1)");
  }

  /**
   * Unwraps one whole record into {@code out}; after the peer's close_notify, ends the input.
   *
   * @param record borrowed: indexes are not moved
   * @param out borrowed: its writer index is advanced by the plaintext length; it has room for
   *     the record's {@link #plaintextBound}, and grows if the record carries more
   */
  @Override
  protected void openRecord(ByteBuf record, int start, int recordBytes, ByteBuf out) {
    refuseHandshakeRecord(record, start);
    // The JDK's AES-GCM copies a direct record through temporary arrays: a pooled heap copy is
    // the same copy without the garbage.
    ByteBuf copy = heapOutput && !record.hasArray() ? heapCopy(record, start, recordBytes) : null;
    SSLEngineResult result;
    try {
      ByteBuffer src = copy != null
          ? copy.internalNioBuffer(0, recordBytes) : record.internalNioBuffer(start, recordBytes);
      result = unwrap(src, out);
      if (result.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
        // An engine that wants more room than the record can fill: room for its whole length.
        out.ensureWritable(recordBytes);
        result = unwrap(src, out);
      }
    } catch (SSLException e) {
      throw TlsRecords.refused("TLS record rejected: " + e.getMessage(), e);
    } finally {
      if (copy != null) {
        copy.release();
      }
    }
    if (result.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP) {
      // OpenSSL's engine says so only here, when it has an alert or a key update to send.
      mustWrap = true;
    }
    switch (result.getStatus()) {
      case OK:
        if (result.bytesConsumed() != recordBytes) {
          throw TlsRecords.refused("the TLS engine took " + result.bytesConsumed() + " of a "
              + recordBytes + "-byte record");
        }
        recordOverhead = Math.max(minRecordOverhead,
            recordBytes - TlsRecords.HEADER_BYTES - result.bytesProduced());
        break;
      case CLOSED:
        endInput();
        break;
      default:
        throw TlsRecords.refused("the TLS engine could not unwrap a whole " + recordBytes
            + "-byte record: " + result.getStatus());
    }
  }

  /**
   * Unwraps {@code src} into {@code out} and, past its end, the spare destination.
   *
   * @param out borrowed: its writer index is advanced by the plaintext length
   */
  private SSLEngineResult unwrap(ByteBuffer src, ByteBuf out) throws SSLException {
    ByteBuffer[] dsts = DESTINATIONS.get();
    ByteBuffer spare = dsts[1];
    spare.clear();
    SSLEngineResult result;
    try {
      dsts[0] = out.internalNioBuffer(out.writerIndex(), out.writableBytes());
      result = engine.unwrap(src, dsts);
    } finally {
      dsts[0] = null;
    }
    int spilled = spare.position();
    out.writerIndex(out.writerIndex() + result.bytesProduced() - spilled);
    if (spilled > 0) {
      // The record filled the buffer and the spare: the buffer grows (a copy, and only then).
      out.writeBytes(spare.flip());
    }
    return result;
  }

  /**
   * Answers what the engine has to send after records it read (a key update, a close_notify, its
   * alert); after the peer's close_notify, closes the channel.
   */
  private void answerEngine(ChannelHandlerContext ctx) {
    SSLEngineResult.HandshakeStatus status = engine.getHandshakeStatus();
    if (status == SSLEngineResult.HandshakeStatus.NEED_TASK) {
      // Handshake records never reach the engine here: it has no work that belongs on a loop.
      throw TlsRecords.refused("TLS: the engine asked to run a handshake task after the "
          + "handshake, a PROTOCOL_ERROR connection error under HTTP/2 (RFC 9113 9.2.1)");
    }
    boolean askedInResult = mustWrap;
    mustWrap = false;
    if (status == SSLEngineResult.HandshakeStatus.NEED_WRAP || askedInResult) {
      writeWhatTheEngineSends(ctx);
    }
    if (askedInResult) {
      // OpenSSL's engine sends its alert for a record it rejected, then throws on the next wrap.
      writeWhatTheEngineSends(ctx);
    }
    if (inputEnded()) {
      ctx.close();
    } else if (engine.isOutboundDone() && !closeSent) {
      throw TlsRecords.refused("TLS record rejected: the TLS engine closed");
    }
  }

  /** Wraps and writes what the engine has to send by itself. */
  private void writeWhatTheEngineSends(ChannelHandlerContext ctx) {
    ByteBuf records;
    try {
      records = seal(ctx, Unpooled.EMPTY_BUFFER);
    } catch (SSLException e) {
      throw TlsRecords.refused("TLS record rejected: " + e.getMessage(), e);
    }
    if (records.isReadable()) {
      ctx.writeAndFlush(records);
    } else {
      records.release();
    }
  }

  private void handOnEarly(ChannelHandlerContext ctx, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> out) {
    ByteBuf first = early;
    early = null;
    if (first.readerIndex() < headroom) {
      ByteBuf copy = ctx.alloc().directBuffer(headroom + first.readableBytes())
          .writerIndex(headroom).readerIndex(headroom);
      copy.writeBytes(first);
      first.release();
      first = copy;
    }
    out.accept(ctx, first);
  }

  /**
   * Queues {@code plaintext} until the next flush.
   *
   * @param plaintext owned: released once sealed, or on failure
   */
  @Override
  public void write(ChannelHandlerContext ctx, ByteBuf plaintext, ChannelPromise promise) {
    if (failure != null || released) {
      plaintext.release();
      promise.setFailure(failure != null ? failure : new ClosedChannelException());
      return;
    }
    if (queue == null) {
      queue = new PendingWrites();
    }
    queue.add(plaintext, promise);
  }

  /** Seals what is queued, 16 KiB per record, writes the records and flushes. */
  @Override
  public void flush(ChannelHandlerContext ctx) {
    PendingWrites pending = queue;
    if (pending == null) {
      ctx.flush();
      return;
    }
    while (!pending.isEmpty()) {
      ByteBuf chunk = pending.take(recordPlaintextBytes, n -> allocate(ctx, n));
      ByteBuf records;
      try {
        records = seal(ctx, chunk);
      } catch (SSLException | RuntimeException e) {
        StatusRuntimeException error =
            TlsRecords.refused("TLS: sealing failed: " + e.getMessage(), e);
        failure = error;
        pending.failAll(error);
        ctx.flush();
        ctx.fireExceptionCaught(error);
        ctx.close();
        return;
      } finally {
        chunk.release();
      }
      ctx.write(records, pending.promiseOfTaken(ctx));
    }
    ctx.flush();
  }

  /**
   * Wraps all of {@code plaintext} (or, empty, what the engine has to send by itself).
   *
   * @param plaintext borrowed: its reader index is advanced past what was sealed
   * @return owned by the caller: the records
   */
  private ByteBuf seal(ChannelHandlerContext ctx, ByteBuf plaintext) throws SSLException {
    int bytes = plaintext.readableBytes();
    int records = bytes / TlsRecords.MAX_PLAINTEXT_BYTES + 1;
    int room = bytes + records * TlsRecords.MAX_SEAL_OVERHEAD_BYTES;
    if (wrapsIntoPacketBuffers) {
      room = Math.max(room, TlsRecords.packetBytes(engine));
    }
    ByteBuf out = allocate(ctx, room);
    try {
      while (true) {
        boolean oneBuffer = plaintext.nioBufferCount() == 1;
        SSLEngineResult result = heapOutput && !(plaintext.hasArray() && oneBuffer)
            ? wrapHeapCopy(ctx, plaintext, out)
            : oneBuffer
            ? engine.wrap(
                plaintext.internalNioBuffer(plaintext.readerIndex(), plaintext.readableBytes()),
                out.internalNioBuffer(out.writerIndex(), out.writableBytes()))
            : wrapPieces(ctx, plaintext, out);
        out.writerIndex(out.writerIndex() + result.bytesProduced());
        if (result.bytesConsumed() > 0 && result.bytesConsumed() < plaintext.readableBytes()
            && result.bytesConsumed() < recordPlaintextBytes && heapOutput) {
          // The JDK's engine seals less than 16 KiB per record: chunks of that size make no
          // small record after each full one.
          recordPlaintextBytes = result.bytesConsumed();
        }
        plaintext.skipBytes(result.bytesConsumed());
        switch (result.getStatus()) {
          case OK:
            break;
          case BUFFER_OVERFLOW:
            // The JDK's engine wants a whole packet buffer of room for every record.
            wrapsIntoPacketBuffers = true;
            out.ensureWritable(TlsRecords.packetBytes(engine));
            continue;
          case CLOSED:
            if (plaintext.isReadable()) {
              throw new SSLException("the engine is closed");
            }
            return out; // its close_notify, if it had one to send, is in out
          default:
            throw new SSLException("the engine is " + result.getStatus());
        }
        boolean more = plaintext.isReadable()
            || result.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP
            || engine.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_WRAP;
        if (!more) {
          return out;
        }
        if (result.bytesConsumed() == 0 && result.bytesProduced() == 0) {
          if (plaintext.isReadable()) {
            throw new SSLException("the TLS engine sealed " + (bytes - plaintext.readableBytes())
                + " of " + bytes + " bytes and takes no more");
          }
          return out;
        }
      }
    } catch (SSLException | RuntimeException e) {
      out.release();
      throw e;
    }
  }

  /**
   * Wraps plaintext in several pieces. OpenSSL's engine makes a record of each piece, so small
   * pieces (gRPC's frame headers, small messages) are first gathered into one pooled buffer, as
   * {@code SslHandler} does; large pieces are wrapped as they are. The JDK's engine gathers the
   * pieces into one record itself.
   *
   * @param plaintext borrowed: indexes are not moved
   * @param out borrowed: indexes are not moved
   */
  private SSLEngineResult wrapPieces(ChannelHandlerContext ctx, ByteBuf plaintext, ByteBuf out)
      throws SSLException {
    ByteBuffer[] pieces = plaintext.nioBuffers();
    ByteBuffer dst = out.internalNioBuffer(out.writerIndex(), out.writableBytes());
    if (heapOutput || !hasSmallPiece(pieces)) {
      return engine.wrap(pieces, dst);
    }
    ByteBuf gathered = ctx.alloc().directBuffer(plaintext.readableBytes());
    try {
      gathered.writeBytes(plaintext, plaintext.readerIndex(), plaintext.readableBytes());
      return engine.wrap(gathered.internalNioBuffer(0, gathered.readableBytes()), dst);
    } finally {
      gathered.release();
    }
  }

  /**
   * Wraps a pooled heap copy of {@code plaintext}: the JDK's AES-GCM works on arrays and would
   * copy direct or scattered plaintext through temporary ones.
   *
   * @param plaintext borrowed: indexes are not moved
   * @param out borrowed: indexes are not moved
   */
  private SSLEngineResult wrapHeapCopy(ChannelHandlerContext ctx, ByteBuf plaintext, ByteBuf out)
      throws SSLException {
    ByteBuf copy = heapCopy(plaintext, plaintext.readerIndex(), plaintext.readableBytes());
    try {
      return engine.wrap(copy.internalNioBuffer(0, copy.readableBytes()),
          out.internalNioBuffer(out.writerIndex(), out.writableBytes()));
    } finally {
      copy.release();
    }
  }

  /**
   * @param from borrowed: indexes are not moved
   * @return owned by the caller: a pooled heap buffer holding the {@code length} bytes at {@code
   *     index}
   */
  private static ByteBuf heapCopy(ByteBuf from, int index, int length) {
    ByteBuf copy = from.alloc().heapBuffer(length);
    copy.writeBytes(from, index, length);
    return copy;
  }

  /** 1 KiB: a smaller piece costs OpenSSL's engine a record of its own. */
  private static final int SMALL_PIECE_BYTES = 1024;

  private static boolean hasSmallPiece(ByteBuffer[] pieces) {
    for (ByteBuffer piece : pieces) {
      if (piece.remaining() < SMALL_PIECE_BYTES) {
        return true;
      }
    }
    return false;
  }

  /**
   * Fails the writes not yet sealed and, unless the connection already failed or ended, sends
   * close_notify before the channel closes (as {@code SslHandler} does, without waiting for it).
   */
  @Override
  public void close(ChannelHandlerContext ctx) {
    failQueued();
    if (failure != null || released || stopped() || engine.isOutboundDone()
        || !ctx.channel().isActive()) {
      return;
    }
    closeSent = true;
    engine.closeOutbound();
    try {
      ByteBuf alert = seal(ctx, Unpooled.EMPTY_BUFFER);
      if (alert.isReadable()) {
        ctx.writeAndFlush(alert);
      } else {
        alert.release();
      }
    } catch (SSLException | RuntimeException e) {
      // The channel closes anyway: the peer sees it end without close_notify.
    }
  }

  private void failQueued() {
    if (queue != null) {
      PendingWrites pending = queue;
      queue = null;
      pending.failAll(new ClosedChannelException());
    }
  }

  /** Releases the partial record, fails queued writes and releases the engine. */
  @Override
  public void release() {
    releasePartial();
    failQueued();
    if (!released) {
      released = true;
      engine.closeOutbound();
      if (engine instanceof ReferenceCounted) {
        ((ReferenceCounted) engine).release();
      }
    }
  }

  /** Releases the partial record and early plaintext not yet handed on. */
  @Override
  protected void releasePartial() {
    if (early != null) {
      early.release();
      early = null;
    }
    super.releasePartial();
  }
}
