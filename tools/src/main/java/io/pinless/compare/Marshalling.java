package io.pinless.compare;

import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.pinless.grpc.ZeroCopyMarshaller;
import io.pinless.testing.Chunk;
import io.pinless.testing.ChunkDownloads;
import io.pinless.testing.ChunkRequest;
import io.pinless.testing.ChunkService;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * How the download phase's messages are made and parsed ({@code --marshaller}).
 *
 * <ul>
 *   <li>{@code bytes}: plain byte messages, each read once into a scratch array ({@link
 *       Workload}).
 *   <li>{@code proto}: protobuf {@link Chunk} messages ({@code bytes data} of the message size)
 *       from {@link ChunkService}, parsed by protobuf's marshaller ({@code ProtoLiteUtils}) in
 *       every variant.
 *   <li>{@code zero-copy}: the same chunks, parsed by {@link ZeroCopyMarshaller} in the pinless
 *       variants (the data a view of the received buffers, released once checked) and by
 *       protobuf's marshaller in the stock ones.
 * </ul>
 *
 * <p>Each also knows the copies its parse makes of a payload byte, by reading the code, where
 * pinless does not count them: the scratch array's one; protobuf's two ({@code ProtoLiteUtils}
 * reads the message into an array, then the parser copies the data field out of it). The
 * zero-copy marshaller counts its own ({@code MESSAGE_BYTES_COPIED}).
 */
enum Marshalling {
  BYTES("bytes", 1),
  PROTO("proto", 2),
  ZERO_COPY("zero-copy", 2);

  final String name;
  /** Copies of each payload byte made by the parse, unless it is the zero-copy marshaller's. */
  final int parseCopies;

  Marshalling(String name, int parseCopies) {
    this.name = name;
    this.parseCopies = parseCopies;
  }

  static Marshalling byName(String name) {
    for (Marshalling m : values()) {
      if (m.name.equals(name)) {
        return m;
      }
    }
    return null;
  }

  /** What parses the download's messages in {@code variant}. */
  String parser(Variant variant) {
    if (this == BYTES) {
      return "a read into an array";
    }
    return zeroCopy(variant) ? "ZeroCopyMarshaller" : "ProtoLiteUtils";
  }

  /** Whether {@code variant} parses with the zero-copy marshaller (and counts its copies). */
  boolean zeroCopy(Variant variant) {
    return this == ZERO_COPY && variant.pinless();
  }

  /**
   * Bytes of the messages the zero-copy marshaller parsed by copying, in this JVM (which runs one
   * variant). Its {@code MESSAGE_BYTES_COPIED} counts such a byte once, but that path parses as
   * {@code ProtoLiteUtils} does: into an array, then the data field out of it, two copies.
   */
  static final LongAdder COPIED_MESSAGE_BYTES = new LongAdder();

  /** Starts one download of {@code count} messages of {@code size} bytes. */
  interface Download {
    CompletableFuture<Long> start(ManagedChannel channel, int count, int size);
  }

  /** The download the phase runs for {@code variant}. */
  Download download(Variant variant) {
    if (this == BYTES) {
      return Workload::download;
    }
    MethodDescriptor.Marshaller<Chunk> marshaller;
    Consumer<Chunk> release;
    if (zeroCopy(variant)) {
      ZeroCopyMarshaller<Chunk> zeroCopy = ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
      marshaller = zeroCopy;
      release = chunk -> {
        if (!zeroCopy.isZeroCopy(chunk)) {
          COPIED_MESSAGE_BYTES.add(chunk.getSerializedSize());
        }
        zeroCopy.release(chunk);
      };
    } else {
      marshaller = ProtoLiteUtils.marshaller(Chunk.getDefaultInstance());
      release = chunk -> {};
    }
    MethodDescriptor<ChunkRequest, Chunk> method = ChunkService.download(marshaller);
    return (channel, count, size) ->
        ChunkDownloads.download(channel, method, count, size, release);
  }
}
