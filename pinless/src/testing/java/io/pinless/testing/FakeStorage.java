package io.pinless.testing;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import com.google.storage.v2.ChecksummedData;
import com.google.storage.v2.ContentRange;
import com.google.storage.v2.GetObjectRequest;
import com.google.storage.v2.Object;
import com.google.storage.v2.ObjectChecksums;
import com.google.storage.v2.ReadObjectRequest;
import com.google.storage.v2.ReadObjectResponse;
import com.google.storage.v2.StorageGrpc;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * The read side of the Cloud Storage v2 service, over objects held in memory: {@code GetObject}
 * and {@code ReadObject} as the real service answers them.
 *
 * <p>{@code ReadObject} sends the requested range in chunks of {@link #CHUNK_BYTES}, each with its
 * CRC32C. The first response also carries the object's metadata, the CRC32C of the whole object
 * and the range sent. A negative {@code read_offset} counts back from the end of the object; a
 * {@code read_limit} of 0 means to the end. Chunks go out only while the call is ready, so the
 * server holds at most one chunk beyond what flow control lets through.
 *
 * <p>{@link #corruptChunkAt(long)} makes the next chunk that starts at an offset carry a wrong
 * CRC32C. The call that sent it then sends nothing more and stays open, as a stalled stream
 * would, until the client cancels it or the server shuts down. A client that checks CRC32C drops
 * that chunk and reads it again on a new call. One that does not takes the bytes and waits.
 *
 * <p>Memory: each stored object is held whole on the heap; a response's content is a view of it
 * ({@code UnsafeByteOperations.unsafeWrap}), never a copy. The Storage tests and the Storage
 * download benchmark serve from it.
 */
public final class FakeStorage extends StorageGrpc.StorageImplBase {
  /** Bytes of content per ReadObjectResponse: what the real service sends, 2 MiB. */
  public static final int CHUNK_BYTES = 2 * 1024 * 1024;

  /**
   * An object: its bytes and the metadata GetObject and the first ReadObjectResponse carry.
   *
   * @param bucket the v2 bucket resource name, {@code projects/_/buckets/NAME}
   * @param name the object's name
   * @param generation the object's generation
   * @param data the object's bytes, held by the service: not to be changed
   * @param crc32c the CRC32C of {@code data}
   */
  public record StoredObject(String bucket, String name, long generation, byte[] data, int crc32c) {
    /** The object's metadata, as GetObject returns it. */
    public Object metadata() {
      return Object.newBuilder()
          .setBucket(bucket)
          .setName(name)
          .setGeneration(generation)
          .setMetageneration(1)
          .setSize(data.length)
          .setStorageClass("STANDARD")
          .setContentType("application/octet-stream")
          .setChecksums(ObjectChecksums.newBuilder().setCrc32C(crc32c))
          .build();
    }
  }

  private final Map<String, StoredObject> objects = new ConcurrentHashMap<>();
  private final List<ReadObjectRequest> reads = new CopyOnWriteArrayList<>();
  private final List<GetObjectRequest> gets = new CopyOnWriteArrayList<>();
  /** The object offset of the next chunk to corrupt, or -1 for none. */
  private final AtomicLong corruptAt = new AtomicLong(-1);

  /**
   * Stores a copy of {@code data} as {@code name} in {@code bucket} (the v2 resource name,
   * {@code projects/_/buckets/NAME}) at generation 1, and returns it.
   */
  public StoredObject put(String bucket, String name, byte[] data) {
    StoredObject object =
        new StoredObject(bucket, name, 1, data.clone(), crc32c(data, 0, data.length));
    objects.put(key(bucket, name), object);
    return object;
  }

  /**
   * The next chunk any ReadObject call sends from object offset {@code offset} carries a wrong
   * CRC32C, and its call stalls.
   */
  public void corruptChunkAt(long offset) {
    corruptAt.set(offset);
  }

  /** Every ReadObject request received, in order. */
  public List<ReadObjectRequest> reads() {
    return reads;
  }

  /** Every GetObject request received, in order. */
  public List<GetObjectRequest> gets() {
    return gets;
  }

  /** The CRC32C (Castagnoli) of {@code length} bytes of {@code data} from {@code offset}. */
  public static int crc32c(byte[] data, int offset, int length) {
    CRC32C crc = new CRC32C();
    crc.update(data, offset, length);
    return (int) crc.getValue();
  }

  @Override
  public void getObject(GetObjectRequest request, StreamObserver<Object> responses) {
    gets.add(request);
    StoredObject object = objects.get(key(request.getBucket(), request.getObject()));
    if (object == null || (request.getGeneration() != 0
        && request.getGeneration() != object.generation())) {
      responses.onError(notFound(request.getBucket(), request.getObject()));
      return;
    }
    responses.onNext(object.metadata());
    responses.onCompleted();
  }

  @Override
  public void readObject(ReadObjectRequest request, StreamObserver<ReadObjectResponse> responses) {
    reads.add(request);
    StoredObject object = objects.get(key(request.getBucket(), request.getObject()));
    if (object == null || (request.getGeneration() != 0
        && request.getGeneration() != object.generation())) {
      responses.onError(notFound(request.getBucket(), request.getObject()));
      return;
    }
    long size = object.data().length;
    long offset = request.getReadOffset();
    long start = offset < 0 ? Math.max(0, size + offset) : offset;
    if (start > size) {
      responses.onError(Status.OUT_OF_RANGE
          .withDescription("read_offset " + offset + " is past the object's " + size + " bytes")
          .asRuntimeException());
      return;
    }
    if (request.getReadLimit() < 0) {
      responses.onError(Status.INVALID_ARGUMENT
          .withDescription("read_limit " + request.getReadLimit() + " is negative")
          .asRuntimeException());
      return;
    }
    long end = request.getReadLimit() == 0 ? size : Math.min(size, start + request.getReadLimit());
    new RangeSender(object, (int) start, (int) end,
        (ServerCallStreamObserver<ReadObjectResponse>) responses).start();
  }

  /** Sends one range of an object as chunks, each when the call is ready for it. */
  private final class RangeSender implements Runnable {
    private final StoredObject object;
    private final int end;
    private final ServerCallStreamObserver<ReadObjectResponse> call;
    /** The first byte not yet sent. */
    private int next;
    private boolean first = true;
    /** Set once the call is over: completed, stalled by a corrupt chunk, or cancelled. */
    private boolean done;

    RangeSender(StoredObject object, int start, int end,
        ServerCallStreamObserver<ReadObjectResponse> call) {
      this.object = object;
      this.next = start;
      this.end = end;
      this.call = call;
    }

    void start() {
      call.setOnCancelHandler(() -> done = true);
      call.setOnReadyHandler(this);
      run();
    }

    /** Runs on the call's serialized executor: from start, then on every ready signal. */
    @Override
    public void run() {
      while (!done && call.isReady()) {
        int length = Math.min(CHUNK_BYTES, end - next);
        ReadObjectResponse.Builder response = ReadObjectResponse.newBuilder();
        if (first) {
          response
              .setMetadata(object.metadata())
              .setObjectChecksums(ObjectChecksums.newBuilder().setCrc32C(object.crc32c()))
              .setContentRange(ContentRange.newBuilder()
                  .setStart(next).setEnd(end).setCompleteLength(object.data().length));
          first = false;
        }
        if (length > 0) {
          ByteString content = UnsafeByteOperations.unsafeWrap(object.data(), next, length);
          int crc = crc32c(object.data(), next, length);
          boolean corrupt = corruptAt.compareAndSet(next, -1);
          response.setChecksummedData(
              ChecksummedData.newBuilder().setContent(content).setCrc32C(corrupt ? ~crc : crc));
          next += length;
          call.onNext(response.build());
          if (corrupt) {
            done = true;
            return;
          }
        } else if (response.hasMetadata()) {
          call.onNext(response.build());
        }
        if (next == end) {
          done = true;
          call.onCompleted();
        }
      }
    }
  }

  private static String key(String bucket, String name) {
    return bucket + "\n" + name;
  }

  private static RuntimeException notFound(String bucket, String name) {
    return Status.NOT_FOUND.withDescription("no object " + name + " in " + bucket)
        .asRuntimeException();
  }
}
