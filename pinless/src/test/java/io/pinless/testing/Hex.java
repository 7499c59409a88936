package io.pinless.testing;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/** Hex strings and the ALTS test vectors (copied from ../shared/alts-vectors into resources). */
public final class Hex {
  private Hex() {}

  /** Decodes lowercase or uppercase hex. */
  public static byte[] decode(String hex) {
    if (hex.length() % 2 != 0) {
      throw new IllegalArgumentException("odd hex length " + hex.length());
    }
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  /** Encodes as lowercase hex. */
  public static String encode(byte[] bytes) {
    StringBuilder sb = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return sb.toString();
  }

  /** Loads one vector file by name, e.g. {@code grpc-go_counter_test.json}. */
  public static JsonObject vectors(String file) {
    try (InputStream in = Hex.class.getResourceAsStream("/alts-vectors/" + file)) {
      if (in == null) {
        throw new IllegalStateException("missing test vectors " + file);
      }
      return JsonParser.parseReader(new InputStreamReader(in, StandardCharsets.UTF_8))
          .getAsJsonObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
