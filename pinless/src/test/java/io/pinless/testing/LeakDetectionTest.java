package io.pinless.testing;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.PooledByteBufAllocator;
import org.junit.jupiter.api.Test;

class LeakDetectionTest {
  @Test
  void runsAtParanoid() {
    assertTrue(LeakDetection.paranoid(), "tests must run with io.netty.leakDetection.level=PARANOID");
  }

  @Test
  void reportsABufferThatWasNeverReleased() throws InterruptedException {
    leakOne();
    LeakDetection.collectAndDetect();
    AssertionError e = assertThrows(AssertionError.class, () -> LeakDetection.assertNoLeaks("canary"));
    assertTrue(e.getMessage().contains("LEAK"), e.getMessage());
  }

  private static void leakOne() {
    PooledByteBufAllocator.DEFAULT.directBuffer(64).writeLong(42);
  }
}
