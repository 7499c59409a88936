package io.pinless.alts.handshake;

import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.util.concurrent.ScheduledFuture;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.alts.AltsRecordProtocol;
import io.pinless.alts.AltsRecordStage;
import io.pinless.alts.handshake.proto.HandshakeProtocol;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.HandshakerResult;
import io.pinless.alts.handshake.proto.Identity;
import io.pinless.alts.handshake.proto.NextHandshakeMessageReq;
import io.pinless.alts.handshake.proto.RpcProtocolVersions;
import io.pinless.alts.handshake.proto.ServerHandshakeParameters;
import io.pinless.alts.handshake.proto.StartClientHandshakeReq;
import io.pinless.alts.handshake.proto.StartServerHandshakeReq;
import io.pinless.read.BufferRing;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Runs the ALTS handshake of one connection through a handshaker service, without ever blocking
 * the event loop. It only handshakes: the record stage it keys is installed by whoever handles its
 * {@link AltsHandshakeResult} event.
 *
 * <p>The client sends {@code client_start} as soon as it is added to an active channel; the
 * server waits for the client's first bytes. The peer's bytes are given to the handshaker as they
 * come (one request outstanding at a time; bytes that arrive meanwhile go with the next), the
 * handshaker's {@code out_frames} are written to the peer, and requests across the process are
 * bounded by {@link HandshakerCalls}. Responses arrive on gRPC's threads and are handled on the
 * channel's event loop.
 *
 * <p>On success it fires an {@link AltsHandshakeResult} user event, from which a handler behind it
 * takes the {@link AltsRecordStage} and installs it in front of this handler ({@code
 * io.pinless.connection.ConnectionHandler#install}). It then removes itself and fires the bytes
 * that arrived behind the handshake (the first records) from the head of the pipeline, so they
 * take the normal path through the installed stage. If nobody takes the stage, the connection
 * fails. On any
 * failure (the handshaker unreachable or refusing, a response that makes no sense, a peer that
 * stalls past the deadline or closes, a record protocol or frame size not supported) it fires a
 * {@code StatusRuntimeException} with {@code UNAVAILABLE} and the reason, and closes the channel.
 *
 * <p>Memory: the handshake's bytes are small heap copies, released when it ends; it holds no
 * {@code ByteBuf} between reads.
 */
public final class AltsHandshakeHandler extends ChannelInboundHandlerAdapter {
  /** Handshake messages larger than this from the peer, in all, are refused (64 KiB). */
  static final int MAX_HANDSHAKE_BYTES = 64 * 1024;
  /**
   * The most held of the peer's bytes the handshaker has not taken (320 KiB). A client that has
   * finished sends its first records behind its last message while the server's handshaker still
   * checks it: up to HTTP/2's initial 64 KiB window of DATA, its HEADERS and record overhead.
   */
  static final int MAX_HELD_BYTES = MAX_HANDSHAKE_BYTES + 256 * 1024;
  /** The largest frame size pinless accepts: ALTS's 1 MiB. */
  static final int MAX_FRAME_SIZE = 1 << 20;
  /** The frame size when the handshake names none, as grpc-java: 16 KiB. */
  static final int DEFAULT_FRAME_SIZE = 16 * 1024;
  /**
   * What this end asks for: 128 KiB, as grpc-java does. Each record costs its sender and its
   * receiver a fixed price besides its bytes (an AEAD call sets up its key, a read, two pooled
   * buffers), so larger records cost both ends less per byte (docs/benchmarks.md has the
   * figures). A record's plaintext is decoded into one buffer, and {@link
   * io.pinless.http2.FrameSlicer} slices a DATA frame out of it only when the frame is at least a
   * quarter of it (32 KiB): a grpc-java peer sends DATA frames of the 64 KiB pinless advertises.
   * A peer that asks for less gets records of its size.
   */
  static final int PREFERRED_FRAME_SIZE = 128 * 1024;
  /**
   * What an end that reads from an io_uring provided-buffer ring asks for: 16 KiB, ALTS's
   * default. The kernel ends such reads where data has arrived, and each record a read cuts is
   * copied: with 2 MiB buffers about 1 in 16 of 128 KiB records would be, 1 in 128 of 16 KiB
   * ones. Both directions use the smaller size the two ends ask for.
   */
  static final int RING_FRAME_SIZE = 16 * 1024;

  private static final ConcurrentHashMap<String, ManagedChannel> HANDSHAKERS =
      new ConcurrentHashMap<>();
  private static final RpcProtocolVersions RPC_VERSIONS =
      RpcProtocolVersions.newBuilder()
          .setMaxRpcVersion(version())
          .setMinRpcVersion(version())
          .build();

  private final boolean client;
  private final String handshakerAddress;
  private final List<String> targetServiceAccounts;
  private final long timeoutMillis;
  private final HandshakerCalls calls;
  private ChannelHandlerContext ctx;
  private ClientCall<HandshakerReq, HandshakerResp> call;
  private StreamObserver<HandshakerReq> requests;
  private boolean started;
  /** The frame size this end asked the handshaker for, once started. */
  private int askedFrameSize = PREFERRED_FRAME_SIZE;
  /**
   * A request of this handshake holds a {@link HandshakerCalls} slot. Set on the thread that
   * grants it, cleared by whichever thread releases it first: the event loop, or gRPC's when a
   * response comes (so a slot comes back even when the event loop is gone).
   */
  private final AtomicBoolean slotHeld = new AtomicBoolean();
  /** The request waiting for a slot, withdrawn if the handshake ends first; null when none. */
  private volatile Runnable waitingSend;
  /** A request is at the handshaker, awaiting its response. */
  private boolean awaiting;
  /** Requests sent to the handshaker and not yet answered: it may answer no more than these. */
  private int unanswered;
  /** Succeeded or failed: nothing more happens. Read by the thread that grants a slot. */
  private volatile boolean ended;
  /** The peer's bytes not yet given to the handshaker. */
  private ByteString unsent = ByteString.EMPTY;
  /** The peer's bytes in the request awaiting its response. */
  private ByteString sent = ByteString.EMPTY;
  /** The peer's bytes the handshaker has consumed as handshake messages. */
  private int consumedTotal;
  private ScheduledFuture<?> deadline;

  /**
   * Creates the handshake of one connection.
   *
   * @param client true on the connecting end
   * @param handshakerAddress {@code host:port} of the handshaker service
   * @param targetServiceAccounts (client) the server identities accepted; empty accepts any
   * @param timeoutMillis how long the whole handshake may take
   */
  public AltsHandshakeHandler(
      boolean client, String handshakerAddress, List<String> targetServiceAccounts,
      long timeoutMillis) {
    this(client, handshakerAddress, targetServiceAccounts, timeoutMillis, HandshakerCalls.SHARED);
  }

  /** As the public constructor, with requests bounded by {@code calls}. */
  AltsHandshakeHandler(
      boolean client, String handshakerAddress, List<String> targetServiceAccounts,
      long timeoutMillis, HandshakerCalls calls) {
    this.calls = calls;
    this.client = client;
    this.handshakerAddress = handshakerAddress;
    this.targetServiceAccounts = List.copyOf(targetServiceAccounts);
    this.timeoutMillis = timeoutMillis;
  }

  private static RpcProtocolVersions.Version version() {
    return RpcProtocolVersions.Version.newBuilder()
        .setMajor(HandshakerProtocol.RPC_MAJOR)
        .setMinor(HandshakerProtocol.RPC_MINOR)
        .build();
  }

  @Override
  public void handlerAdded(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    deadline = ctx.executor().schedule(
        () -> fail("the ALTS handshake did not finish within " + timeoutMillis + " ms"),
        timeoutMillis, TimeUnit.MILLISECONDS);
    if (client && ctx.channel().isActive()) {
      startClient();
    }
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    ctx.fireChannelActive();
    if (client && !started) {
      startClient();
    }
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
      if (sent.size() + unsent.size() + in.readableBytes() > MAX_HELD_BYTES) {
        fail("the peer sent over " + MAX_HELD_BYTES + " bytes the ALTS handshake has not taken");
        return;
      }
      unsent = unsent.concat(ByteString.copyFrom(in.nioBuffer()));
    } finally {
      in.release();
    }
    if (!client && !started) {
      startServer();
    } else if (started && !awaiting) {
      sendNext();
    }
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    fail("the connection closed during the ALTS handshake");
    ctx.fireChannelInactive();
  }

  @Override
  public void handlerRemoved(ChannelHandlerContext ctx) {
    end();
  }

  /** {@link #RING_FRAME_SIZE} when this end reads from a buffer ring, else the preferred. */
  private int frameSizeToAsk() {
    return BufferRing.readsFrom(ctx.channel()) ? RING_FRAME_SIZE : PREFERRED_FRAME_SIZE;
  }

  private void startClient() {
    started = true;
    askedFrameSize = frameSizeToAsk();
    StartClientHandshakeReq.Builder start =
        StartClientHandshakeReq.newBuilder()
            .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
            .addApplicationProtocols(HandshakerProtocol.APPLICATION_PROTOCOL)
            .addRecordProtocols(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
            .setRpcVersions(RPC_VERSIONS)
            .setMaxFrameSize(askedFrameSize);
    for (String account : targetServiceAccounts) {
      start.addTargetIdentities(Identity.newBuilder().setServiceAccount(account));
    }
    send(HandshakerReq.newBuilder().setClientStart(start).build(), ByteString.EMPTY);
  }

  private void startServer() {
    started = true;
    askedFrameSize = frameSizeToAsk();
    ByteString in = takeUnsent();
    send(
        HandshakerReq.newBuilder()
            .setServerStart(
                StartServerHandshakeReq.newBuilder()
                    .addApplicationProtocols(HandshakerProtocol.APPLICATION_PROTOCOL)
                    .putHandshakeParameters(
                        HandshakerProtocol.ALTS_PARAMETERS_KEY,
                        ServerHandshakeParameters.newBuilder()
                            .addRecordProtocols(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
                            .build())
                    .setInBytes(in)
                    .setRpcVersions(RPC_VERSIONS)
                    .setMaxFrameSize(askedFrameSize))
            .build(),
        in);
  }

  private void sendNext() {
    if (unsent.isEmpty()) {
      return;
    }
    ByteString in = takeUnsent();
    send(
        HandshakerReq.newBuilder()
            .setNext(NextHandshakeMessageReq.newBuilder().setInBytes(in))
            .build(),
        in);
  }

  private ByteString takeUnsent() {
    ByteString in = unsent;
    unsent = ByteString.EMPTY;
    return in;
  }

  /** Sends {@code req} (carrying the peer bytes {@code in}) once a slot is free. */
  private void send(HandshakerReq req, ByteString in) {
    awaiting = true;
    sent = in;
    if (call == null) {
      call = handshaker(handshakerAddress)
          .newCall(HandshakerProtocol.DO_HANDSHAKE,
              CallOptions.DEFAULT.withDeadlineAfter(timeoutMillis, TimeUnit.MILLISECONDS));
      requests = ClientCalls.asyncBidiStreamingCall(call, new Responses());
    }
    Runnable grant = () -> granted(req);
    waitingSend = grant;
    calls.submit(grant);
  }

  /** A slot is this handshake's, on whichever thread freed it: send {@code req} on the loop. */
  private void granted(HandshakerReq req) {
    waitingSend = null;
    if (!slotHeld.compareAndSet(false, true)) {
      // A slot already held (the handshaker answered a request twice): one is enough.
      calls.answered();
    }
    if (ended) {
      releaseSlot();
      return;
    }
    try {
      ctx.executor().execute(() -> {
        if (ended) {
          releaseSlot();
        } else {
          unanswered++;
          requests.onNext(req);
        }
      });
    } catch (RejectedExecutionException e) {
      // The connection's event loop is shut down: nothing will send the request.
      releaseSlot();
    }
  }

  /** Frees the slot this handshake holds, if it holds one; any thread. */
  private void releaseSlot() {
    if (slotHeld.compareAndSet(true, false)) {
      calls.answered();
    }
  }

  /**
   * The handshaker's answers. Each frees the slot of the request it answers at once, on gRPC's
   * thread, then is handled on the event loop; with the event loop shut down, the call is
   * cancelled instead.
   */
  private final class Responses implements StreamObserver<HandshakerResp> {
    @Override
    public void onNext(HandshakerResp resp) {
      releaseSlot();
      onLoop(() -> received(resp));
    }

    @Override
    public void onError(Throwable t) {
      releaseSlot();
      onLoop(() -> fail("the handshaker service at " + handshakerAddress + " failed: "
          + Status.fromThrowable(t)));
    }

    @Override
    public void onCompleted() {
      releaseSlot();
      onLoop(() -> fail("the handshaker service ended the handshake early"));
    }

    private void onLoop(Runnable task) {
      try {
        ctx.executor().execute(task);
      } catch (RejectedExecutionException e) {
        call.cancel("the connection's event loop is shut down", e);
      }
    }
  }

  private void received(HandshakerResp resp) {
    awaiting = false;
    if (ended) {
      return;
    }
    if (unanswered == 0) {
      fail("the handshaker answered more requests than it was sent");
      return;
    }
    unanswered--;
    try {
      use(resp);
    } catch (RuntimeException e) {
      // A broken answer fails the handshake: it must not leave the connection waiting.
      String reason = "the handshaker's answer could not be used: " + e;
      if (!ended) {
        fail(reason);
      } else {
        ctx.fireExceptionCaught(Status.UNAVAILABLE.withDescription(reason).asRuntimeException());
        ctx.close();
      }
    }
  }

  private void use(HandshakerResp resp) {
    if (!resp.getOutFrames().isEmpty()) {
      ByteBuf out = ctx.alloc().buffer(resp.getOutFrames().size());
      out.writeBytes(resp.getOutFrames().asReadOnlyByteBuffer());
      ctx.writeAndFlush(out);
    }
    if (resp.getStatus().getCode() != 0) {
      fail("the handshaker refused: " + resp.getStatus().getDetails()
          + " (code " + resp.getStatus().getCode() + ")");
      return;
    }
    int consumed = resp.getBytesConsumed();
    if (consumed < 0 || consumed > sent.size()) {
      fail("the handshaker says it consumed " + Integer.toUnsignedString(consumed) + " of "
          + sent.size() + " bytes");
      return;
    }
    consumedTotal += consumed;
    if (consumedTotal > MAX_HANDSHAKE_BYTES) {
      fail("the peer sent over " + MAX_HANDSHAKE_BYTES + " bytes without finishing the handshake");
      return;
    }
    ByteString left = sent.substring(consumed).concat(unsent);
    sent = ByteString.EMPTY;
    if (resp.hasResult()) {
      succeed(resp.getResult(), left);
    } else {
      unsent = left;
      sendNext();
    }
  }

  private void succeed(HandshakerResult result, ByteString records) {
    AltsRecordProtocol protocol;
    try {
      protocol = AltsRecordProtocol.valueOf(result.getRecordProtocol());
    } catch (IllegalArgumentException e) {
      fail("the handshake chose record protocol '" + result.getRecordProtocol()
          + "', which pinless does not support");
      return;
    }
    int chosen = result.getMaxFrameSize() == 0 ? DEFAULT_FRAME_SIZE : result.getMaxFrameSize();
    if (chosen < DEFAULT_FRAME_SIZE || chosen > MAX_FRAME_SIZE) {
      fail("the handshake chose a frame size of " + chosen + " bytes, outside ["
          + DEFAULT_FRAME_SIZE + ", " + MAX_FRAME_SIZE + "]");
      return;
    }
    // A handshaker may give each end the size the peer asked for (grpc-core and grpc-java read
    // it so): the smaller of that and this end's own is what both ends then use.
    int frameSize = Math.min(chosen, askedFrameSize);
    ByteString keyData = result.getKeyData();
    if (keyData.size() < protocol.keyLength()) {
      fail("the handshake gave " + keyData.size() + " bytes of key data; " + protocol + " needs "
          + protocol.keyLength());
      return;
    }
    // Its first bytes, as grpc-go takes them: a handshaker may give more than the protocol uses.
    byte[] key = keyData.substring(0, protocol.keyLength()).toByteArray();
    AltsRecordStage stage;
    try {
      stage = new AltsRecordStage(protocol, key, client, frameSize);
    } finally {
      Arrays.fill(key, (byte) 0);
    }
    AltsHandshakeResult event = new AltsHandshakeResult(result, frameSize, stage);
    end();
    ctx.fireUserEventTriggered(event);
    if (event.takeRecordStage() != null) {
      // Nobody behind installed the stage: records would reach HTTP/2 as they are.
      stage.release();
      Metric.ALTS_HANDSHAKE_FAILURES.add(1);
      ctx.fireExceptionCaught(Status.UNAVAILABLE
          .withDescription("no handler installed the ALTS record stage").asRuntimeException());
      ctx.close();
      return;
    }
    Metric.ALTS_HANDSHAKES.add(1);
    // The records that came behind the handshake enter at the head of the pipeline, where the
    // installed record stage opens them.
    ChannelPipeline pipeline = ctx.pipeline();
    pipeline.remove(this);
    if (!records.isEmpty()) {
      ByteBuf first = ctx.alloc().directBuffer(records.size());
      first.writeBytes(records.asReadOnlyByteBuffer());
      pipeline.fireChannelRead(first);
      pipeline.fireChannelReadComplete();
    }
  }

  private void fail(String reason) {
    if (ended) {
      return;
    }
    end();
    Metric.ALTS_HANDSHAKE_FAILURES.add(1);
    ctx.fireExceptionCaught(Status.UNAVAILABLE.withDescription(reason).asRuntimeException());
    ctx.close();
  }

  /** Ends the handshake: no more timer, no more handshaker call, no bytes held. */
  private void end() {
    if (ended) {
      return;
    }
    ended = true;
    Runnable waiting = waitingSend;
    if (waiting != null) {
      calls.withdraw(waiting);
    }
    releaseSlot();
    unsent = ByteString.EMPTY;
    sent = ByteString.EMPTY;
    if (deadline != null) {
      deadline.cancel(false);
    }
    if (call != null) {
      if (awaiting) {
        call.cancel("the ALTS handshake ended", null);
      } else {
        requests.onCompleted();
      }
    }
  }

  /** One channel per handshaker address, for the life of the process, as grpc-alts keeps. */
  private static ManagedChannel handshaker(String address) {
    return HANDSHAKERS.computeIfAbsent(address,
        a -> io.grpc.netty.NettyChannelBuilder
            .forTarget(a, io.grpc.InsecureChannelCredentials.create())
            .build());
  }
}
