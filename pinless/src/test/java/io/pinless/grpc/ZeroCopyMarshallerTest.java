package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.CallOptions;
import io.grpc.Drainable;
import io.grpc.HasByteBuffer;
import io.grpc.KnownLength;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.buffer.ByteBuf;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkService;
import io.pinless.testing.LeakDetection;
import io.pinless.testing.LeakRecorder;
import io.pinless.testing.NettyTransports;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.ref.WeakReference;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** ZeroCopyMarshaller over streams of test buffers and over real gRPC calls. */
class ZeroCopyMarshallerTest {
  private static final int MIB = 1 << 20;

  private final ZeroCopyMarshaller<Chunk> marshaller =
      ZeroCopyMarshaller.of(Chunk.getDefaultInstance());

  @Test
  void runsWithTheLeakDetectorAtParanoid() {
    assertTrue(LeakDetection.paranoid());
  }

  @Test
  void parsesBytesFieldSpanningSeveralDirectBuffersAsViewsOfThem() throws IOException {
    Chunk sent = ChunkService.chunk(3, 2 * MIB);
    byte[] bytes = sent.toByteArray();
    int dataStart = bytes.length - sent.getData().size();
    int[] cuts = {300_000, 1_000_000, 1_500_000};
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, cuts));
    long aliasedBefore = Metric.MESSAGE_BYTES_ALIASED.value();
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));

      assertEquals(sent, chunk);
      assertTrue(ChunkService.matches(chunk));
      assertTrue(marshaller.isZeroCopy(chunk));
      assertEquals(bytes.length, Metric.MESSAGE_BYTES_ALIASED.value() - aliasedBefore);
      List<ByteBuffer> views = chunk.getData().asReadOnlyByteBufferList();
      assertEquals(pieces.size(), views.size(), "one view per buffer the field spans");
      for (ByteBuffer view : views) {
        assertTrue(view.isDirect(), "view " + view + " is direct");
      }
      // A byte changed in each of the test's buffers shows through the parsed field: it aliases.
      int pieceStart = 0;
      for (int i = 0; i < pieces.size(); i++) {
        ByteBuf piece = pieces.get(i);
        int index = Math.max(pieceStart, dataStart) + 17 - pieceStart;
        byte flipped = (byte) ~piece.getByte(index);
        piece.setByte(index, flipped);
        assertEquals(flipped, chunk.getData().byteAt(pieceStart + index - dataStart), "piece " + i);
        pieceStart += piece.readableBytes();
      }
      assertFalse(ChunkService.matches(chunk));
      for (ByteBuf piece : pieces) {
        assertEquals(2, piece.refCnt(), "held by the message and the test");
      }

      marshaller.release(chunk);

      assertFalse(marshaller.isZeroCopy(chunk));
      for (ByteBuf piece : pieces) {
        assertEquals(1, piece.refCnt(), "only the test's reference is left");
      }
    } finally {
      PieceStreams.release(pieces);
    }
  }

  /** An empty piece inside a message (a peer's empty DATA frame) is stepped over. */
  @Test
  void emptyPieceInsideAMessageIsSteppedOver() throws IOException {
    Chunk sent = ChunkService.chunk(4, 50_000);
    byte[] bytes = sent.toByteArray();
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 20_000, 20_000));
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));

      assertEquals(sent, chunk);
      assertTrue(marshaller.isZeroCopy(chunk));
      releaseAndCheckReturned(chunk, pieces);
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void secondReleaseThrows() throws IOException {
    byte[] bytes = ChunkService.chunk(0, 4096).toByteArray();
    Chunk chunk = parseLikeGrpc(PieceStreams.open(PieceStreams.direct(bytes)));
    assertTrue(marshaller.isZeroCopy(chunk));
    marshaller.release(chunk);

    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> marshaller.release(chunk));
    assertTrue(e.getMessage().contains("released twice"), e.getMessage());
  }

  @Test
  void releaseOfAnEqualMessageDoesNotReleaseTheOther() throws IOException {
    byte[] bytes = ChunkService.chunk(0, 4096).toByteArray();
    Chunk first = parseLikeGrpc(PieceStreams.open(PieceStreams.direct(bytes)));
    Chunk second = parseLikeGrpc(PieceStreams.open(PieceStreams.direct(bytes)));
    assertEquals(first, second);

    marshaller.release(first);

    assertFalse(marshaller.isZeroCopy(first));
    assertTrue(marshaller.isZeroCopy(second));
    marshaller.release(second);
  }

  @Test
  void leaseReleasesAtTheEndOfTry() throws IOException {
    byte[] bytes = ChunkService.chunk(1, 64 * 1024).toByteArray();
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 9000));
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));
      try (ZeroCopyMarshaller.Lease lease = marshaller.lease(chunk)) {
        assertTrue(marshaller.isZeroCopy(chunk));
        assertTrue(ChunkService.matches(chunk));
      }
      assertFalse(marshaller.isZeroCopy(chunk));
      assertEquals(1, pieces.get(0).refCnt());
      assertEquals(1, pieces.get(1).refCnt());
      assertThrows(IllegalStateException.class, () -> marshaller.release(chunk));
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void plainStreamIsParsedByCopyingAndNeedsNoRelease() {
    Chunk sent = ChunkService.chunk(2, 100_000);
    byte[] bytes = sent.toByteArray();
    long copiedBefore = Metric.MESSAGE_BYTES_COPIED.value();

    Chunk chunk = marshaller.parse(new ByteArrayInputStream(bytes));

    assertEquals(sent, chunk);
    assertFalse(marshaller.isZeroCopy(chunk));
    assertEquals(bytes.length, Metric.MESSAGE_BYTES_COPIED.value() - copiedBefore);
    marshaller.release(chunk);
    marshaller.release(chunk);
  }

  @Test
  void piecesWithoutNioBuffersAreParsedByCopying() throws IOException {
    Chunk sent = ChunkService.chunk(5, 100_000);
    byte[] bytes = sent.toByteArray();
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.heap(bytes, 40_000));
    long copiedBefore = Metric.MESSAGE_BYTES_COPIED.value();
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces, false));

      assertEquals(sent, chunk);
      assertFalse(marshaller.isZeroCopy(chunk));
      assertEquals(bytes.length, Metric.MESSAGE_BYTES_COPIED.value() - copiedBefore);
      assertEquals(1, pieces.get(0).refCnt(), "gRPC's close of its stream released the pieces");
      assertEquals(1, pieces.get(1).refCnt());
      marshaller.release(chunk);
    } finally {
      PieceStreams.release(pieces);
    }
  }

  /**
   * A message that starts in the last 700 bytes of one piece, followed by a 1-byte piece (a
   * peer's window-limited DATA frame): grpc-core 1.84 on joins the two into a heap array without
   * an NIO buffer. That part is copied; the rest is still aliased (all of it on older grpc-core).
   */
  @Test
  void aPartGrpcCopiedToTheHeapIsCopiedAndTheRestAliased() throws IOException {
    Chunk sent = ChunkService.chunk(8, 300_000);
    byte[] bytes = sent.toByteArray();
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 700, 701));
    long aliasedBefore = Metric.MESSAGE_BYTES_ALIASED.value();
    long copiedBefore = Metric.MESSAGE_BYTES_COPIED.value();
    try {
      InputStream stream = PieceStreams.open(pieces);
      boolean joined = PieceStreams.GRPC_JOINS_SMALL_PIECES;
      assertEquals(!joined, ((HasByteBuffer) stream).byteBufferSupported(),
          "grpc-core joins the two small pieces into a heap array from 1.84 on");
      Chunk chunk = parseLikeGrpc(stream);

      assertEquals(sent, chunk);
      assertTrue(marshaller.isZeroCopy(chunk));
      long aliased = Metric.MESSAGE_BYTES_ALIASED.value() - aliasedBefore;
      long copied = Metric.MESSAGE_BYTES_COPIED.value() - copiedBefore;
      assertEquals(bytes.length, aliased + copied);
      if (joined) {
        assertTrue(copied >= 701 && copied <= 2 * 701, "the heap part and little more: " + copied);
      } else {
        assertTrue(copied <= 701, "at most the two small pieces: " + copied);
      }
      assertDataViews(chunk, pieces.get(2), 200_000, 701 + 200_000 - (bytes.length - 300_000));
      releaseAndCheckReturned(chunk, pieces);
    } finally {
      PieceStreams.release(pieces);
    }
  }

  /** More than 1/8 of a message without NIO buffers: parsed by copying, nothing held. */
  @Test
  void aMessageMostlyInPartsWithoutNioBuffersIsParsedByCopying() throws IOException {
    Chunk sent = ChunkService.chunk(9, 100_000);
    byte[] bytes = sent.toByteArray();
    List<ByteBuf> pieces = new ArrayList<>(PieceStreams.heap(Arrays.copyOf(bytes, 20_000)));
    pieces.addAll(PieceStreams.direct(Arrays.copyOfRange(bytes, 20_000, bytes.length)));
    PieceStreams.retain(pieces);
    long copiedBefore = Metric.MESSAGE_BYTES_COPIED.value();
    try {
      List<ByteBuf> opened = new ArrayList<>(pieces);
      Chunk chunk = parseLikeGrpc(PieceStreams.open(opened.subList(0, 1), false, opened.get(1)));

      assertEquals(sent, chunk);
      assertFalse(marshaller.isZeroCopy(chunk));
      assertEquals(bytes.length, Metric.MESSAGE_BYTES_COPIED.value() - copiedBefore);
      for (ByteBuf piece : pieces) {
        assertEquals(1, piece.refCnt(), "released at once");
      }
      marshaller.release(chunk);
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void heapAndSmallPiecesAreStagedAndTheRestAliased() throws IOException {
    Chunk sent = ChunkService.chunk(7, 300_000);
    byte[] bytes = sent.toByteArray();
    // Pieces: direct 100 KiB, heap 2000 B, direct 60 B, direct rest. Only the large direct
    // pieces can be aliased; the heap and small ones are copied into one staging buffer.
    List<ByteBuf> pieces = new ArrayList<>();
    pieces.addAll(PieceStreams.direct(Arrays.copyOfRange(bytes, 0, 100_000)));
    pieces.addAll(PieceStreams.heap(Arrays.copyOfRange(bytes, 100_000, 102_000)));
    pieces.addAll(PieceStreams.direct(Arrays.copyOfRange(bytes, 102_000, 102_060)));
    pieces.addAll(PieceStreams.direct(Arrays.copyOfRange(bytes, 102_060, bytes.length)));
    PieceStreams.retain(pieces);
    long aliasedBefore = Metric.MESSAGE_BYTES_ALIASED.value();
    long copiedBefore = Metric.MESSAGE_BYTES_COPIED.value();
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));

      assertEquals(sent, chunk);
      assertTrue(marshaller.isZeroCopy(chunk));
      assertEquals(bytes.length - 2060, Metric.MESSAGE_BYTES_ALIASED.value() - aliasedBefore);
      assertEquals(2060, Metric.MESSAGE_BYTES_COPIED.value() - copiedBefore);
      assertDataViews(chunk, pieces.get(3), 5000, 102_060 + 5000 - (bytes.length - 300_000));
      releaseAndCheckReturned(chunk, pieces);
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void messageWithNothingToAliasIsCopiedAndLetGo() throws IOException {
    Chunk sent = ChunkService.chunk(1, 50);
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(sent.toByteArray()));
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));

      assertEquals(sent, chunk);
      assertFalse(marshaller.isZeroCopy(chunk));
      assertEquals(1, pieces.get(0).refCnt(), "released at once");
      marshaller.release(chunk);
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void emptyMessageIsTheDefaultInstance() throws IOException {
    Chunk chunk = parseLikeGrpc(PieceStreams.open(PieceStreams.direct(new byte[0])));

    assertSame(Chunk.getDefaultInstance(), chunk);
    assertFalse(marshaller.isZeroCopy(chunk));
  }

  @Test
  void aFailedParseLeavesTheApplicationNoViewOfTheFreedBuffers() throws IOException {
    // A whole 8 KiB bytes field, which the parse aliases, then a field claiming 1,000,000 bytes.
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    Chunk.newBuilder().setOffset(7).setData(ByteString.copyFrom(new byte[8192])).build()
        .writeTo(out);
    out.write(new byte[] {0x1a, (byte) 0xc0, (byte) 0x84, 0x3d});
    List<ByteBuf> pieces = PieceStreams.direct(out.toByteArray());
    try (InputStream stream = PieceStreams.open(pieces)) {
      StatusRuntimeException e =
          assertThrows(StatusRuntimeException.class, () -> marshaller.parse(stream));
      // protobuf attaches the half-parsed message to its exception; gRPC hands the status, cause
      // included, to the application once the buffers it aliases are freed.
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t instanceof InvalidProtocolBufferException) {
          assertNull(((InvalidProtocolBufferException) t).getUnfinishedMessage(),
              "the cause carries no message aliasing the received buffers");
        }
      }
      assertTrue(e.getCause() instanceof InvalidProtocolBufferException, "the cause is kept");
    }
  }

  @Test
  void corruptMessageFailsInternalAndHoldsNothing() throws IOException {
    // Field 2 (bytes) claims 5000 bytes; 3000 follow.
    byte[] bytes = new byte[3003];
    bytes[0] = 0x12;
    bytes[1] = (byte) (0x80 | (5000 & 0x7f));
    bytes[2] = (byte) (5000 >>> 7);
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 1500));
    try {
      InputStream stream = PieceStreams.open(pieces);
      StatusRuntimeException e =
          assertThrows(StatusRuntimeException.class, () -> marshaller.parse(stream));
      stream.close();

      assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
      assertEquals("Invalid protobuf byte sequence", e.getStatus().getDescription());
      assertEquals(1, pieces.get(0).refCnt(), "the detached stream was closed");
      assertEquals(1, pieces.get(1).refCnt());
    } finally {
      PieceStreams.release(pieces);
    }
  }

  /**
   * A message dropped unreleased while a {@code ByteString} taken from it is still used: its
   * buffers must not go back to the pool, where other allocations would write over the bytes the
   * view reads. The drop is reported, and the buffers are kept.
   */
  @Test
  void viewOfAMessageDroppedUnreleasedKeepsItsBytes() throws Exception {
    Chunk sent = ChunkService.chunk(9, 64 * 1024);
    byte[] bytes = sent.toByteArray();
    long keptBefore = Metric.UNRELEASED_BYTES_KEPT.value();
    // Owned by the stream alone, as grpc-netty's buffers are: nothing of the test pins them.
    ByteString data = parseAndKeepOnlyTheData(PieceStreams.direct(bytes, 20_000));
    assertEquals(sent.getData(), data);

    byte[] probe = ChunkService.chunk(0, 512).toByteArray();
    // A parse forgets collected messages: the moment a cleaner would free their buffers.
    PieceStreams.probeUntilKept(keptBefore, bytes.length, () -> {
      try {
        marshaller.release(parseLikeGrpc(PieceStreams.open(PieceStreams.direct(probe))));
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    List<ByteBuf> others = PieceStreams.churn((byte) 0x5a, 16, 20_000, bytes.length - 20_000);
    try {
      assertEquals(sent.getData(), data, "the view still reads the message's bytes");
    } finally {
      PieceStreams.release(others);
    }

    assertTrue(Metric.UNRELEASED_BYTES_KEPT.value() - keptBefore >= bytes.length);
    LeakRecorder.collectAndDetect();
    List<String> reports = LeakRecorder.drain();
    assertTrue(reports.stream().anyMatch(r -> r.contains("ZeroCopyMarshaller")), "" + reports);
    for (String report : reports) {
      assertTrue(report.startsWith("LEAK ZeroCopyMarshaller") || report.startsWith("LEAK ByteBuf"),
          "only the dropped message and its buffers: " + report);
    }
  }

  /** Parses {@code pieces} (owned), drops the message and returns its data, once collected. */
  private ByteString parseAndKeepOnlyTheData(List<ByteBuf> pieces) throws Exception {
    Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));
    assertTrue(marshaller.isZeroCopy(chunk));
    ByteString data = chunk.getData();
    WeakReference<Chunk> dropped = new WeakReference<>(chunk);
    chunk = null;
    PieceStreams.awaitCollected(dropped);
    return data;
  }

  /**
   * A release while another thread reads the message's serialized stream frees nothing under it:
   * the stream holds the buffers, staged copy included, until closed. A retry's send after that
   * reads the copy the free made, not the freed buffers.
   */
  @Test
  void releaseWhileAnotherThreadSerializesFreesOnlyAtTheStreamsClose() throws Exception {
    Chunk sent = ChunkService.chunk(6, 300_000);
    byte[] bytes = sent.toByteArray();
    // A 60-byte piece is staged into a pooled copy; the rest is aliased.
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 100_000, 100_060));
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));
      assertTrue(marshaller.isZeroCopy(chunk));
      InputStream serialized = marshaller.stream(chunk);
      CountDownLatch halfRead = new CountDownLatch(1);
      CountDownLatch released = new CountDownLatch(1);
      CompletableFuture<byte[]> read =
          CompletableFuture.supplyAsync(
              () -> {
                try (InputStream in = serialized) {
                  ByteArrayOutputStream out = new ByteArrayOutputStream();
                  out.write(in.readNBytes(bytes.length / 2));
                  halfRead.countDown();
                  assertTrue(released.await(60, TimeUnit.SECONDS));
                  out.write(in.readAllBytes());
                  return out.toByteArray();
                } catch (IOException | InterruptedException e) {
                  throw new IllegalStateException(e);
                }
              });
      assertTrue(halfRead.await(60, TimeUnit.SECONDS));

      marshaller.release(chunk);
      assertFalse(marshaller.isZeroCopy(chunk));
      assertEquals(2, pieces.get(2).refCnt(), "the reading stream still holds the buffers");
      released.countDown();

      assertArrayEquals(bytes, read.get(60, TimeUnit.SECONDS));
      for (ByteBuf piece : pieces) {
        assertEquals(1, piece.refCnt(), "freed once the stream closed");
      }
      PieceStreams.overwrite(pieces);
      try (InputStream retry = marshaller.stream(chunk)) {
        assertArrayEquals(bytes, retry.readAllBytes(), "a retry sends the copy the free made");
      }
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void messageReleasedBeforeItsFirstSendIsNotSerialized() throws IOException {
    byte[] bytes = ChunkService.chunk(7, 20_000).toByteArray();
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 10_000));
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));
      long copiedBefore = Metric.SENT_BYTES_COPIED.value();
      marshaller.release(chunk);
      assertEquals(copiedBefore, Metric.SENT_BYTES_COPIED.value(), "nothing sent, nothing copied");
      StatusRuntimeException e =
          assertThrows(StatusRuntimeException.class, () -> marshaller.stream(chunk));
      assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode());
      assertTrue(e.getStatus().getDescription().contains("released before gRPC serialized it"));
    } finally {
      PieceStreams.release(pieces);
    }
  }

  /** The serialized stream drains the message's bytes and gives back its hold once closed. */
  @Test
  void serializedStreamDrainsAndClosesOnce() throws Exception {
    byte[] bytes = ChunkService.chunk(2, 50_000).toByteArray();
    List<ByteBuf> pieces = PieceStreams.retain(PieceStreams.direct(bytes, 25_000));
    try {
      Chunk chunk = parseLikeGrpc(PieceStreams.open(pieces));
      InputStream serialized = marshaller.stream(chunk);
      assertTrue(serialized instanceof KnownLength && serialized instanceof Drainable);
      assertEquals(bytes.length, serialized.available());
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      assertEquals(bytes.length, ((Drainable) serialized).drainTo(out));
      assertArrayEquals(bytes, out.toByteArray());
      marshaller.release(chunk);
      assertEquals(2, pieces.get(0).refCnt());

      serialized.close();
      serialized.close();

      assertEquals(-1, serialized.read());
      for (ByteBuf piece : pieces) {
        assertEquals(1, piece.refCnt());
      }
    } finally {
      PieceStreams.release(pieces);
    }
  }

  @Test
  void downloadsChunksOverPinlessPlaintext() throws Exception {
    try (Endpoints ends = new Endpoints(ChunkService.service())) {
      List<Chunk> chunks =
          download(ends.channel, 4, 2 * MIB, (index, chunk) -> {
            // Recorded, not asserted: whether gRPC hands over a message zero-copy depends on how
            // its pieces arrived (grpc-core copies runs of pieces under 1 KiB to the heap).
            System.out.println("chunk " + index + " zero-copy " + marshaller.isZeroCopy(chunk));
            marshaller.release(chunk);
          });
      assertEquals(4, chunks.size());
    }
  }

  @Test
  void gzipDownloadIsParsedByCopyingAndNeedsNoRelease() throws Exception {
    ServerInterceptor compress =
        new ServerInterceptor() {
          @Override
          public <Q, A> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
            call.setCompression("gzip");
            return next.startCall(call, headers);
          }
        };
    ServerServiceDefinition gzip = ServerInterceptors.intercept(ChunkService.service(), compress);
    long copiedBefore = Metric.MESSAGE_BYTES_COPIED.value();
    try (Endpoints ends = new Endpoints(gzip)) {
      List<Chunk> chunks = download(ends.channel, 4, 2 * MIB, (index, chunk) -> {
        assertFalse(marshaller.isZeroCopy(chunk), "chunk " + index + " was decompressed");
        marshaller.release(chunk);
        marshaller.release(chunk);
      });
      assertEquals(4, chunks.size());
    }
    assertTrue(Metric.MESSAGE_BYTES_COPIED.value() - copiedBefore >= 4L * 2 * MIB);
  }

  private interface ChunkCheck {
    void check(int index, Chunk chunk);
  }

  private List<Chunk> download(ManagedChannel channel, int count, int size, ChunkCheck check) {
    Iterator<Chunk> it =
        ClientCalls.blockingServerStreamingCall(
            channel, ChunkService.download(marshaller), CallOptions.DEFAULT,
            ChunkService.request(count, size));
    List<Chunk> chunks = new ArrayList<>();
    while (it.hasNext()) {
      Chunk chunk = it.next();
      int index = chunks.size();
      assertEquals((long) index * size, chunk.getOffset());
      assertEquals(size, chunk.getData().size());
      assertTrue(ChunkService.matches(chunk), "chunk " + index + " has the download's bytes");
      check.check(index, chunk);
      chunks.add(chunk);
    }
    return chunks;
  }

  /** Parses as gRPC does: the marshaller gets the stream, gRPC closes it after. */
  /**
   * Checks that {@code chunk}'s data is direct views, and a view of {@code piece}: a byte written
   * there at {@code pieceIndex} is read at {@code dataIndex} of the data.
   */
  private static void assertDataViews(Chunk chunk, ByteBuf piece, int pieceIndex, int dataIndex) {
    for (ByteBuffer view : chunk.getData().asReadOnlyByteBufferList()) {
      assertTrue(view.isDirect(), "view " + view + " is direct");
    }
    byte flipped = (byte) ~piece.getByte(pieceIndex);
    piece.setByte(pieceIndex, flipped);
    assertEquals(flipped, chunk.getData().byteAt(dataIndex), "a view, not a copy");
  }

  /** Releases {@code chunk} and checks that it gave back its reference of every piece. */
  private void releaseAndCheckReturned(Chunk chunk, List<ByteBuf> pieces) {
    marshaller.release(chunk);
    for (ByteBuf piece : pieces) {
      assertEquals(1, piece.refCnt());
    }
  }

  private Chunk parseLikeGrpc(InputStream stream) throws IOException {
    try (InputStream s = stream) {
      return marshaller.parse(s);
    }
  }

  /** A pinless plaintext server of {@code service} and a pinless channel to it, over NIO. */
  private static final class Endpoints implements AutoCloseable {
    final EventLoopGroup group = NettyTransports.nio(2);
    final Server server;
    final ManagedChannel channel;

    Endpoints(ServerServiceDefinition service) throws IOException {
      server =
          NettyServerBuilder.forAddress(
                  new InetSocketAddress("127.0.0.1", 0), PinlessServerCredentials.insecure())
              .bossEventLoopGroup(group)
              .workerEventLoopGroup(group)
              .channelType(NioServerSocketChannel.class)
              .addService(service)
              .build()
              .start();
      channel =
          NettyChannelBuilder.forAddress(
                  server.getListenSockets().get(0), PinlessChannelCredentials.insecure())
              .eventLoopGroup(group)
              .channelType(NioSocketChannel.class)
              .build();
    }

    @Override
    public void close() throws InterruptedException {
      channel.shutdownNow();
      server.shutdownNow();
      channel.awaitTermination(10, TimeUnit.SECONDS);
      server.awaitTermination(10, TimeUnit.SECONDS);
      group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }
  }
}
