package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * Property: for any message bytes cut into any pieces, a received Payload holds exactly those
 * bytes, sends them unchanged, gives back every piece once closed, and is never sent after.
 */
class PayloadMarshallerFuzzTest {
  private static final PayloadMarshaller MARSHALLER = PayloadMarshaller.INSTANCE;

  @FuzzTest
  void receivesAnyCutAsTheSameBytes(FuzzedDataProvider data) throws IOException {
    int size = data.consumeInt(0, 70_000);
    byte[] pattern = data.consumeBytes(data.consumeInt(1, 64));
    byte[] bytes = new byte[size];
    for (int i = 0; i < size && pattern.length > 0; i++) {
      bytes[i] = (byte) (pattern[i % pattern.length] + i / pattern.length);
    }
    try (MessagePieces pieces = new MessagePieces(bytes, data)) {
      Payload payload;
      try (InputStream stream = pieces.open()) {
        payload = MARSHALLER.parse(stream);
      }
      assertEquals(bytes.length, payload.size());
      assertArrayEquals(bytes, concat(payload));
      boolean closeWhileSending = data.consumeBoolean();
      try (InputStream sent = MARSHALLER.stream(payload)) {
        if (closeWhileSending) {
          payload.close();
        }
        assertArrayEquals(bytes, sent.readAllBytes());
      }
      if (!closeWhileSending) {
        payload.close();
      }
      assertTrue(pieces.onlyTheTestHolds(), "closed, zero-copy pieces given back");
      pieces.overwriteFreed();
      try (InputStream retry = MARSHALLER.stream(payload)) {
        assertArrayEquals(bytes, retry.readAllBytes(), "a retry after the close");
      }
    }
  }

  private static byte[] concat(Payload payload) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (ByteBuffer b : payload.buffers()) {
      byte[] part = new byte[b.remaining()];
      b.get(part);
      out.writeBytes(part);
    }
    return out.toByteArray();
  }
}
