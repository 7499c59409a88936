package io.pinless.connection;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.http2.ConnectionWindow;
import io.pinless.http2.FrameSlicer;
import io.pinless.http2.InboundMessages;
import io.pinless.read.ReadBudget;
import io.pinless.read.ReadPolicy;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.BiConsumer;

/**
 * The one pinless handler of a connection end: a single pipeline entry, first in the pipeline,
 * that drives plain stages as Netty's {@code Http2ConnectionHandler} drives its frame reader.
 *
 * <pre>
 *   socket --read buffer--> [ReadPolicy] --> [RecordStage, optional] --plaintext--> [FrameSlicer]
 *          --whole frames--> next handler (grpc-netty's Http2ConnectionHandler)
 *   socket &lt;--records-- [RecordStage, optional] &lt;--plaintext writes-- next handlers
 * </pre>
 *
 * <p>Until {@link #install} it passes every message through (a handshake handler behind it sees
 * the raw bytes) while its {@link ReadPolicy} already decides when the socket is read. After it,
 * read buffers go to the record stage, if any, and the plaintext (or, without a record stage, the
 * read buffers themselves) to the {@link FrameSlicer}; writes go to the record stage.
 *
 * <p>Back-pressure: with a frame slicer, the connection reads its HTTP/2 frames both ways ({@link
 * InboundMessages} in, {@link ConnectionWindow} out) and is its {@link ReadPolicy}'s {@link
 * ReadPolicy.Valve}. While the read budget is exceeded by more than what incomplete gRPC
 * messages pin, it withholds the connection-level WINDOW_UPDATE frames grpc-netty writes and goes
 * on reading: the peer may send only the window it holds, and PINGs are still answered. While the
 * process's budget is pressed, it also caps the peer's credit at what the budget allows ({@link
 * ReadBudget#maxCreditBytes}), withholding updates past the cap the same way. A hold gives
 * the messages under way when it began the credit they still need, up to the budget's limit in
 * all (their lengths are the peer's claims), so a message already started completes. Once the
 * budget clears, the withheld credit goes out as one WINDOW_UPDATE. Reads stop only when the peer
 * sends past the window it was granted, or when a write was no buffer (the window is then
 * unknown). While held, the connection holds at most the budget, what incomplete
 * messages pin (bounded by gRPC's own limits on message size and streams), and {@link
 * FrameSlicer#PIN_RATIO} times the peer's window at the hold's start.
 *
 * <p>Errors: a record stage's fatal error is fired as an exception and closes the channel; the
 * plaintext before it has gone on. A record cut short by the peer's close is fired before {@code
 * channelInactive}.
 *
 * <p>Memory: the handler itself holds no buffer; idle, neither does any of its stages. Its frame
 * readers hold none either: a small entry per stream with an incomplete message, and a withheld
 * update's increment only.
 */
public final class ConnectionHandler extends ChannelDuplexHandler {
  /**
   * Hands a record stage's plaintext to the connection's slicer, or on: one object for every
   * connection (each finds its handler through the context), not one per connection.
   */
  private static final BiConsumer<ChannelHandlerContext, ByteBuf> PLAINTEXT =
      (ctx, plaintext) -> ((ConnectionHandler) ctx.handler()).plaintext(ctx, plaintext);

  private final ReadPolicy reads;
  /** The gRPC messages under way, once installed with a slicer; else null. */
  private InboundMessages messages;
  /** The connection window this end grants, once installed with a slicer; else null. */
  private ConnectionWindow window;
  /** This handler's context, once added. */
  private ChannelHandlerContext ctx;
  /** The record stage once installed, or null (plaintext, or before install). */
  private RecordStage records;
  /** The frame slicer once installed, or null (not HTTP/2, or before install). */
  private FrameSlicer slicer;
  private boolean installed;
  /** The connection ended after {@link #install}: it left the open connections. */
  private boolean ended;
  /** The handler left the pipeline: what a read's later records bring is released. */
  private boolean removed;
  /** A task is queued to hand on the joins of streams a write ended. */
  private boolean endedJoinsPending;

  /**
   * Creates the handler of one connection end whose reads are at most {@code maxReadBytes}.
   *
   * @param budget the read budget the connection's reads are held against
   * @param holdWhileUnwritable also hold reads while the channel is not writable
   */
  public ConnectionHandler(ReadBudget budget, boolean holdWhileUnwritable, int maxReadBytes) {
    this.reads = new ReadPolicy(budget, holdWhileUnwritable, maxReadBytes);
  }

  /**
   * Starts the stages: from now on read buffers go to {@code records} (when not null) and on to
   * {@code slicer}, and writes go to {@code records}. Call once, on the channel's event loop.
   *
   * @param records the record stage, or null when the connection has none
   * @param slicer the frame slicer, which must accept read headroom; null when the bytes are not
   *     HTTP/2 (the plaintext then goes to the next handler as it is)
   */
  public void install(RecordStage records, FrameSlicer slicer) {
    if (installed) {
      throw new IllegalStateException("stages already installed");
    }
    installed = true;
    this.records = records;
    this.slicer = slicer;
    if (records != null) {
      reads.target(records);
    } else if (slicer != null) {
      reads.headroom(FrameSlicer.HEADROOM_BYTES);
    }
    if (slicer != null) {
      messages = new InboundMessages(reads.budget().limitBytes());
      window = new ConnectionWindow(messages);
      // The peer's initial window counts from the start, and even the first window update is
      // capped: connections that come in a burst each see what the others were granted.
      reads.budget().credit(window.credit());
      window.maxCredit(reads.budget().maxCreditBytes(messages));
      reads.valve(new Valve());
    }
    Metric.CONNECTIONS_INSTALLED.add(1);
    Metric.CONNECTIONS_OPEN.add(1);
  }

  /** The connection ended: it leaves {@link Metric#CONNECTIONS_OPEN}, once. */
  private void ended() {
    if (installed && !ended) {
      ended = true;
      Metric.CONNECTIONS_OPEN.add(-1);
    }
  }

  /** The read policy this handler drives. */
  public ReadPolicy readPolicy() {
    return reads;
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    reads.attach(ctx);
  }

  /**
   * Opens and slices a read buffer once the stages are installed; else passes {@code msg} on.
   * Before install nothing is set, so every message passes.
   *
   * @param msg owned: released here or handed on
   */
  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (records != null && msg instanceof ByteBuf) {
      ByteBuf in = (ByteBuf) msg;
      try {
        records.open(ctx, in, FrameSlicer.HEADROOM_BYTES, PLAINTEXT);
      } catch (RuntimeException e) {
        ctx.fireExceptionCaught(e);
        ctx.close();
      } finally {
        in.release();
      }
    } else if (slicer != null && msg instanceof ByteBuf) {
      slice(ctx, (ByteBuf) msg);
    } else {
      ctx.fireChannelRead(msg);
    }
  }

  /** @param plaintext owned: sliced, handed on, or released once the handler has left */
  private void plaintext(ChannelHandlerContext ctx, ByteBuf plaintext) {
    if (removed) {
      // Left the pipeline in the middle of a read: the stages are released for good.
      plaintext.release();
    } else if (slicer != null) {
      slice(ctx, plaintext);
    } else {
      ctx.fireChannelRead(plaintext);
    }
  }

  /**
   * Counts {@code in}'s frames as received, then slices them: its bytes count as being received
   * in between, for a credit report that a handler's write makes while they are handed on.
   *
   * @param in owned: sliced
   */
  private void slice(ChannelHandlerContext ctx, ByteBuf in) {
    long counted = reads.budget().receiving(in.readableBytes());
    try {
      messages.read(in);
      slicer.slice(ctx, in);
    } finally {
      reads.budget().received(counted);
    }
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    if (slicer != null) {
      slicer.readComplete(ctx, messages, window);
    }
    ctx.fireChannelReadComplete();
    reads.batchEnded();
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    ctx.fireChannelActive();
    reads.channelActive();
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    try {
      if (records != null) {
        try {
          records.endOfInput();
        } catch (RuntimeException e) {
          ctx.fireExceptionCaught(e);
        }
      }
      releaseSlicer();
      ctx.fireChannelInactive();
    } finally {
      reads.detach();
      ended();
    }
  }

  @Override
  public void channelWritabilityChanged(ChannelHandlerContext ctx) {
    ctx.fireChannelWritabilityChanged();
    reads.writabilityChanged();
  }

  /** @param msg owned: withheld and released here, sealed by the record stage, or written on */
  @Override
  public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
    if (window != null) {
      if (!(msg instanceof ByteBuf)) {
        // The walk ends here: the withheld credit goes out while a frame boundary is known. It
        // counts as credit before the cap's promise is dropped, so that it counts throughout.
        window.unhold();
        window.maxCredit(Long.MAX_VALUE);
        ByteBuf update = window.release(ctx.alloc());
        if (update != null) {
          reads.budget().credit(window.credit());
        }
        reads.budget().stopCapping();
        if (update != null) {
          writeOn(ctx, update, ctx.newPromise());
        }
        window.lost();
      } else {
        long granted = window.granted();
        boolean withheld = window.write((ByteBuf) msg);
        if (window.takeStreamsEnded()) {
          handOnEndedLater(ctx);
        }
        if (withheld) {
          ((ByteBuf) msg).release();
          promise.trySuccess();
          return;
        }
        if (window.granted() != granted) {
          // Credit granted counts at once, so that other connections' caps see it.
          reads.budget().credit(window.credit());
        }
      }
    }
    writeOn(ctx, msg, promise);
  }

  /**
   * Once the write under way is done, hands on the joins of the streams it ended, which would
   * otherwise wait for a read batch a quiet peer never brings; once per event loop turn.
   */
  private void handOnEndedLater(ChannelHandlerContext ctx) {
    if (endedJoinsPending || !slicer.hasOpenJoins()) {
      return;
    }
    endedJoinsPending = true;
    try {
      ctx.executor().execute(() -> {
        endedJoinsPending = false;
        if (slicer.handOnEnded(ctx, messages, window)) {
          ctx.fireChannelReadComplete();
        }
      });
    } catch (RejectedExecutionException e) {
      // The event loop is shutting down: the channel's close releases the joins.
      endedJoinsPending = false;
    }
  }

  /** @param msg owned: sealed by the record stage, or written on */
  private void writeOn(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
    if (records != null && msg instanceof ByteBuf) {
      records.write(ctx, (ByteBuf) msg, promise);
    } else {
      ctx.write(msg, promise);
    }
  }

  @Override
  public void flush(ChannelHandlerContext ctx) {
    flushOn(ctx);
    reads.flushed();
  }

  private void flushOn(ChannelHandlerContext ctx) {
    if (records != null) {
      records.flush(ctx);
    } else {
      ctx.flush();
    }
  }

  @Override
  public void close(ChannelHandlerContext ctx, ChannelPromise promise) {
    if (records != null) {
      records.close(ctx);
    }
    ctx.close(promise);
  }

  /** Swallows read requests from the handlers behind this one: the read policy decides. */
  @Override
  public void read(ChannelHandlerContext ctx) {}

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    removed = true;
    try {
      if (records != null) {
        records.release();
      }
      releaseSlicer();
    } finally {
      reads.handBack();
      ended();
    }
  }

  private void releaseSlicer() {
    if (slicer != null) {
      slicer.release();
    }
  }

  /** The read policy's valve: the connection window, held while the budget is exceeded. */
  private final class Valve implements ReadPolicy.Valve {
    /** Room in a capped read for the frames that take no credit: headers, PINGs, SETTINGS. */
    private static final long MIN_CONTROL_BYTES = 512;

    @Override
    public long allowanceBytes() {
      return FrameSlicer.PIN_RATIO * messages.pendingFrameBytes();
    }

    @Override
    public long creditBytes() {
      return window.credit();
    }

    /**
     * While the peer's credit is capped, what it may send: its credit and a frame header's room
     * for each read; else no bound.
     */
    @Override
    public long readLimitBytes() {
      return window.capped() ? window.credit() + MIN_CONTROL_BYTES : Long.MAX_VALUE;
    }

    /**
     * Caps the peer's credit, holds it back while {@code exceeded}, and sends what may go; true
     * while held or capped with increments kept: the peer may wait for room that another
     * connection's loan gives back at any time, so the policy checks again on its timer.
     */
    @Override
    public boolean holdPeer(boolean exceeded) {
      if (window.tracking()) {
        window.maxCredit(reads.budget().maxCreditBytes(messages));
      }
      if (exceeded && !window.holding()) {
        long credit = Math.max(0, window.granted() - messages.dataBytes());
        // A prefix is only a claim: owe at most one budget, whatever the peer says is to come.
        long owed = Math.min(messages.remainingBytes(), reads.budget().limitBytes());
        window.hold(owed - credit);
      } else if (!exceeded && window.holding()) {
        window.unhold();
      }
      ByteBuf update = window.release(ctx.alloc());
      if (update != null) {
        reads.budget().credit(window.credit());
        writeOn(ctx, update, ctx.newPromise());
        flushOn(ctx);
      }
      return window.holding() || window.withheldBytes() > 0;
    }

    @Override
    public boolean messagesUnderWay() {
      return messages.incompleteMessages() > 0;
    }

    @Override
    public boolean peerOverdrawn() {
      // Without a walk of every write the window is unknown: the budget holds reads, as before.
      return !window.tracking() || messages.dataBytes() > window.granted();
    }
  }
}
