package io.pinless.testing;

import io.grpc.MethodDescriptor;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/** Messages that are plain byte arrays, for the test services. */
public final class ByteArrays {
  /** Sends a byte array as it is; parses a message into a new one. */
  public static final MethodDescriptor.Marshaller<byte[]> MARSHALLER =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
          return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
          try {
            return stream.readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };

  private ByteArrays() {}
}
