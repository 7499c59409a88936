package io.pinless.alts;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.pinless.testing.Hex;
import org.junit.jupiter.api.Test;

class AltsCounterTest {
  private static final JsonObject VECTORS = Hex.vectors("grpc-go_counter_test.json");

  @Test
  void startsAtZeroWithTheDirectionBit() {
    assertEquals("000000000000000000000000", Hex.encode(new AltsCounter(5, false).current()));
    assertEquals("000000000000000000000080", Hex.encode(new AltsCounter(8, true).current()));
  }

  @Test
  void incrementsLikeGrpcGo() {
    int checked = 0;
    for (JsonElement e : VECTORS.getAsJsonArray("increment_vectors")) {
      JsonObject v = e.getAsJsonObject();
      AltsCounter c = new AltsCounter(v.get("overflow_len").getAsInt(), false);
      c.set(Hex.decode(v.get("counter").getAsString()));
      c.increment();
      assertArrayEquals(Hex.decode(v.get("after_inc").getAsString()), c.current());
      checked++;
    }
    assertTrue(checked >= 6);
  }

  @Test
  void overflowsLikeGrpcGo() {
    int checked = 0;
    for (JsonElement e : VECTORS.getAsJsonArray("rollover_vectors")) {
      JsonObject v = e.getAsJsonObject();
      AltsCounter c = new AltsCounter(v.get("overflow_len_actually_used").getAsInt(), false);
      c.set(Hex.decode(v.get("value").getAsString()));
      c.increment();
      assertFalse(c.isSpent(), v.get("desc").getAsString());
      c.current();
      c.increment();
      assertTrue(c.isSpent(), v.get("desc").getAsString());
      AltsRecordException x = assertThrows(AltsRecordException.class, c::current);
      assertEquals(AltsRecordException.Reason.COUNTER_OVERFLOW, x.reason());
      checked++;
    }
    assertTrue(checked >= 2);
  }

  @Test
  void rekeyCounterCarriesThroughEightBytes() {
    AltsCounter c = new AltsCounter(8, true);
    c.set(Hex.decode("ffffffffffffff0000000080"));
    c.increment();
    assertEquals("000000000000000100000080", Hex.encode(c.current()));
    c.set(Hex.decode("ffffffffffffffff00000080"));
    c.increment();
    assertTrue(c.isSpent());
  }
}
