package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import com.google.protobuf.ByteString;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.lite.ProtoLiteUtils;
import io.pinless.testing.Chunk;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;

/**
 * Property: for any message bytes cut into any pieces, ZeroCopyMarshaller parses what
 * ProtoLiteUtils parses (or fails INTERNAL where it fails), sends the same bytes, and gives back
 * every piece once released.
 */
class ZeroCopyMarshallerFuzzTest {
  private static final ZeroCopyMarshaller<Chunk> MARSHALLER =
      ZeroCopyMarshaller.of(Chunk.getDefaultInstance());
  private static final MethodDescriptor.Marshaller<Chunk> REFERENCE =
      ProtoLiteUtils.marshaller(Chunk.getDefaultInstance());
  /** Largest data field built: several of grpc-netty's 16 KiB frames. */
  private static final int MAX_DATA = 70_000;

  @FuzzTest
  void parsesAnyCutLikeTheCopyingParser(FuzzedDataProvider data) throws IOException {
    byte[] bytes = message(data);
    Chunk expected;
    try {
      expected = REFERENCE.parse(new ByteArrayInputStream(bytes));
    } catch (StatusRuntimeException e) {
      expected = null;
    }
    try (MessagePieces pieces = new MessagePieces(bytes, data)) {
      Chunk chunk;
      try (InputStream stream = pieces.open()) {
        chunk = MARSHALLER.parse(stream);
      } catch (StatusRuntimeException e) {
        assertEquals(null, expected, "the copying parser accepted it: " + e);
        assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
        assertTrue(pieces.onlyTheTestHolds(), "a failed parse holds nothing");
        return;
      }
      assertTrue(expected != null, "the copying parser refused it");
      assertEquals(expected, chunk);
      boolean send = data.consumeBoolean();
      if (send) {
        try (InputStream sent = MARSHALLER.stream(chunk)) {
          assertArrayEquals(REFERENCE.stream(expected).readAllBytes(), sent.readAllBytes());
        }
      }
      boolean zeroCopy = MARSHALLER.isZeroCopy(chunk);
      MARSHALLER.release(chunk);
      assertFalse(MARSHALLER.isZeroCopy(chunk));
      assertTrue(pieces.onlyTheTestHolds(), "released, zero-copy " + zeroCopy);
      pieces.overwriteFreed();
      if (send || !zeroCopy) {
        // A retry's send: from the copy the release made, never from the freed pieces.
        try (InputStream retry = MARSHALLER.stream(chunk)) {
          assertEquals(expected, REFERENCE.parse(retry), "a retry after the release");
        }
      } else {
        StatusRuntimeException e =
            assertThrows(StatusRuntimeException.class, () -> MARSHALLER.stream(chunk));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode());
      }
    }
  }

  /** A valid chunk, one with flipped bits, or raw bytes, as {@code data} chooses. */
  private static byte[] message(FuzzedDataProvider data) {
    int kind = data.consumeInt(0, 2);
    if (kind == 2) {
      return data.consumeBytes(data.consumeInt(0, 4096));
    }
    byte[] pattern = data.consumeBytes(data.consumeInt(1, 64));
    int size = data.consumeInt(0, MAX_DATA);
    byte[] field = new byte[size];
    for (int i = 0; i < size && pattern.length > 0; i++) {
      field[i] = (byte) (pattern[i % pattern.length] + i / pattern.length);
    }
    byte[] bytes =
        Chunk.newBuilder()
            .setOffset(data.consumeLong())
            .setData(ByteString.copyFrom(field))
            .build()
            .toByteArray();
    if (kind == 1 && bytes.length > 0) {
      for (int k = data.consumeInt(1, 4); k > 0; k--) {
        int at = data.consumeInt(0, bytes.length - 1);
        bytes[at] ^= (byte) (1 << data.consumeInt(0, 7));
      }
    }
    return bytes;
  }
}
