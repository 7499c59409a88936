package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.pinless.testing.LeakRecorder;
import io.pinless.testing.Soak;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A one-minute {@link Soak}: connections churned through faults over every transport end every
 * call with the right bytes or a status, leak nothing (the LeakDetection extension fails the test
 * on a report too), keep heap and pooled bytes flat and never stall an event loop.
 */
class SoakTest {
  @Test
  @Timeout(value = 5, unit = TimeUnit.MINUTES)
  void aMinuteOfChurnThroughFaults() throws Exception {
    Soak.Result r = Soak.run(Soak.Options.of(Duration.ofSeconds(50), 10).withWorkers(1), System.out);

    assertEquals(0, r.wrong(), "calls with wrong bytes");
    assertEquals(0, r.otherFailures(), "calls failed without a status");
    assertEquals(0, r.hung(), "calls hung past their deadline");
    assertTrue(r.problems().isEmpty(), r.problems().toString());
    for (Soak.Calls c : r.calls()) {
      assertTrue(c.ok() > 0, "calls succeeded over " + c.transport());
    }
    assertTrue(r.calls().stream().mapToLong(Soak.Calls::statusFailures).sum() > 0,
        "some calls failed with a status: the faults reached calls");
    assertTrue(LeakRecorder.installed(), "the leak recorder is installed");
    assertEquals(0, r.leaks(), "leaks reported");
    assertTrue(r.heapFlat(), "heap flat: " + r.reference() + " -> " + r.end());
    assertTrue(r.pooledFlat(), "pooled bytes flat: " + r.reference() + " -> " + r.end());
    assertTrue(r.worstStallMillis() <= Soak.STALL_LIMIT_MILLIS,
        "worst event loop stall " + r.stall());
    assertTrue(r.failures().isEmpty(), r.failures().toString());
  }
}
