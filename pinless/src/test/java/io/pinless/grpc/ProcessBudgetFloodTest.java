package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.pinless.BudgetInstruments;
import io.pinless.read.ProcessBudget;
import io.pinless.testing.Flood;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * The process budget against a flood: 12 clients, connected first and then started together,
 * uploading 1 MiB messages to a service that keeps each one 400 ms. With a 16 MiB budget the
 * server's pool pins at most a tenth more, every call either completes with the right bytes or
 * is shed with {@code RESOURCE_EXHAUSTED}, and the OpenTelemetry instruments follow; without one
 * the same flood pins more than 1.5 times as much. The clients never shed move alike (Jain's
 * index at least 0.9).
 */
class ProcessBudgetFloodTest {
  /** 60 s: a hang guard only; every wait ends on an event. */
  private static final long HANG_GUARD_SECONDS = 60;
  private static final int CONNECTIONS = 12;
  private static final int CALLS = 3;
  private static final int MESSAGES = 4;
  private static final int MESSAGE_BYTES = 1 << 20;
  /** How long the service keeps each message: long enough that 12 clients outrun it. */
  private static final long HOLD_MILLIS = 400;
  private static final long BUDGET_BYTES = 16L << 20;
  private static final Attributes NONE = Attributes.empty();

  /** A flood's clients and the most the server's pool pinned meanwhile. */
  private record Run(List<Flood.Client> clients, long serverPinnedPeak) {
    List<Flood.Outcome> outcomes() {
      return clients.stream().flatMap(c -> c.outcomes().stream()).toList();
    }

    /** Jain's fairness index of the throughputs of the clients none of whose calls was shed. */
    double fairness() {
      return Flood.fairness(clients);
    }
  }

  @Test
  void theServersReceivedMemoryStaysNearItsBudgetAndEveryCallEndsWell() throws Exception {
    ProcessBudget budget = new ProcessBudget(BUDGET_BYTES);
    InMemoryMetricReader reader = InMemoryMetricReader.create();
    SdkMeterProvider meters = SdkMeterProvider.builder().registerMetricReader(reader).build();
    AutoCloseable instruments = BudgetInstruments.register(meters, budget);
    Map<String, MetricData> before = collect(reader);
    long[] heldSeen = new long[1];
    Run run;
    Map<String, MetricData> after;
    try {
      run = flood(budget, true, () -> heldSeen[0] = Math.max(heldSeen[0],
          OpenTelemetryExportTest.value(collect(reader), "pinless.process.held", NONE)));
      after = collect(reader);
    } finally {
      instruments.close();
      meters.close();
    }
    long slowed = grew(before, after, "pinless.connection.slowed");
    long shed = grew(before, after, "pinless.call.shed");
    long ok = run.outcomes().stream().filter(Flood.Outcome::completedWithTheRightBytes).count();
    System.out.printf("flood with a %d MiB budget: server pool pinned at most %.1f MiB, the "
        + "budget counted at most %.1f MiB; %d peers slowed, %d of %d calls shed; fairness "
        + "%.3f%n", BUDGET_BYTES >> 20, run.serverPinnedPeak() / 1048576.0,
        budget.peakBytes() / 1048576.0, slowed, shed, run.outcomes().size(), run.fairness());

    for (Flood.Outcome o : run.outcomes()) {
      assertTrue(o.completedWithTheRightBytes()
              || o.status().getCode() == Status.Code.RESOURCE_EXHAUSTED,
          "a call completes with the right bytes or is shed: " + o);
    }
    assertEquals(CONNECTIONS * CALLS, run.outcomes().size());
    assertEquals(shed, run.outcomes().size() - ok, "every call not completed was shed");
    assertTrue(ok > 0, "calls complete");
    assertTrue(slowed > 0, "peers were slowed");
    // Within 10% of the budget, as the process budget promises.
    assertTrue(run.serverPinnedPeak() <= BUDGET_BYTES * 11 / 10,
        "the server's pool pinned " + run.serverPinnedPeak() + " against a budget of "
            + BUDGET_BYTES);
    assertTrue(budget.peakBytes() <= BUDGET_BYTES * 11 / 10,
        "the budget counted " + budget.peakBytes() + " against " + BUDGET_BYTES);
    double fairness = run.fairness();
    assertTrue(Double.isNaN(fairness) || fairness >= 0.9,
        "the clients never shed moved alike: Jain's index " + fairness);
    // What the service released after its connection ended comes off on that connection's timer.
    long releaseGuard = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG_GUARD_SECONDS);
    while (budget.heldBytes() > 0 && System.nanoTime() - releaseGuard < 0) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
    }
    assertEquals(0, budget.heldBytes(), "everything released");
    assertEquals(0, budget.overdraftBytes(), "every loan repaid");
    assertEquals(BUDGET_BYTES, OpenTelemetryExportTest.value(after, "pinless.process.budget",
        NONE), "the budget's instrument");
    assertTrue(heldSeen[0] > BUDGET_BYTES / 2, "the held instrument followed the flood");
  }

  @Test
  void withoutABudgetTheSameFloodPinsFarMore() throws Exception {
    Run run = flood(new ProcessBudget(Long.MAX_VALUE), false, () -> {});
    System.out.printf("flood without a budget: server pool pinned at most %.1f MiB; fairness "
        + "%.3f%n", run.serverPinnedPeak() / 1048576.0, run.fairness());
    assertTrue(run.outcomes().stream().allMatch(Flood.Outcome::completedWithTheRightBytes));
    // 28-43 MiB here; how many uploads overlap follows scheduling, so the bound leaves room.
    assertTrue(run.serverPinnedPeak() > 5 * BUDGET_BYTES / 4,
        "the flood pins more than 1.25 times the budget unbounded: " + run.serverPinnedPeak());
  }

  private static Map<String, MetricData> collect(InMemoryMetricReader reader) {
    Map<String, MetricData> byName = new HashMap<>();
    for (MetricData m : reader.collectAllMetrics()) {
      byName.put(m.getName(), m);
    }
    return byName;
  }

  private static long grew(Map<String, MetricData> before, Map<String, MetricData> after,
      String name) {
    return OpenTelemetryExportTest.value(after, name, NONE)
        - OpenTelemetryExportTest.value(before, name, NONE);
  }

  /**
   * Runs the flood against a server whose connections report to {@code budget}, reading the
   * server's pool and calling {@code sample} between short waits until every client is done.
   */
  private static Run flood(ProcessBudget budget, boolean shed, Runnable sample)
      throws Exception {
    List<byte[]> bodies = new ArrayList<>();
    for (int i = 0; i < MESSAGES; i++) {
      bodies.add(TestService.message(MESSAGE_BYTES, i));
    }
    long crc = Flood.crc(bodies);
    try (Flood flood = new Flood(NettyNegotiators.serverCredentials(() -> null, budget),
        shed ? LoadShedding.interceptor(budget) : null, HOLD_MILLIS, 2)) {
      List<ManagedChannel> channels = new ArrayList<>();
      for (int i = 0; i < CONNECTIONS; i++) {
        channels.add(flood.connect());
      }
      // Every connection first, so that the clients start together and compete from their first
      // byte.
      Flood.awaitReady(channels, HANG_GUARD_SECONDS);
      List<CompletableFuture<Flood.Client>> clients = new ArrayList<>();
      for (ManagedChannel channel : channels) {
        clients.add(flood.uploads(channel, CALLS, bodies, crc));
      }
      CompletableFuture<Void> all =
          CompletableFuture.allOf(clients.toArray(new CompletableFuture<?>[0]));
      long pinned = 0;
      long guard = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG_GUARD_SECONDS);
      while (!all.isDone() && System.nanoTime() - guard < 0) {
        pinned = Math.max(pinned, flood.serverPinnedBytes());
        sample.run();
        try {
          all.get(5, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
          // Sample again.
        }
      }
      List<Flood.Client> done = new ArrayList<>();
      for (CompletableFuture<Flood.Client> c : clients) {
        done.add(c.get(HANG_GUARD_SECONDS, TimeUnit.SECONDS));
      }
      return new Run(done, pinned);
    }
  }
}
