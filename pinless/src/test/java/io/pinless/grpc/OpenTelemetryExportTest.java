package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslProvider;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.metrics.data.MetricDataType;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.pinless.PinlessMetrics;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.Settings;
import io.pinless.testing.TestCertificates;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link PinlessMetrics#register} as an application reads it, through the OpenTelemetry SDK's
 * in-memory reader: every instrument with its unit and kind, values that move with a TLS call and
 * a failed TLS handshake, every metric in its own instrument and point, and nothing once the
 * registration is closed (twice).
 */
class OpenTelemetryExportTest {
  private static final AttributeKey<String> TRANSPORT = AttributeKey.stringKey("pinless.transport");
  private static final Attributes TLS = Attributes.of(TRANSPORT, "tls");
  private static final Attributes ALTS = Attributes.of(TRANSPORT, "alts");

  /** Every instrument's unit; a sum is monotonic unless named in {@link #UP_DOWN}. */
  private static final Map<String, String> UNITS = new LinkedHashMap<>();
  private static final Set<String> UP_DOWN =
      Set.of("pinless.read.held", "pinless.connection.open");
  /** The instruments that read a value as it is now. */
  private static final Set<String> GAUGES =
      Set.of("pinless.process.budget", "pinless.process.held");

  static {
    for (String bytes : new String[] {"pinless.data.sliced", "pinless.data.copied",
        "pinless.record.copied", "pinless.message.aliased", "pinless.message.copied",
        "pinless.read.held", "pinless.message.unreleased", "pinless.message.sent_copied"}) {
      UNITS.put(bytes, "By");
    }
    UNITS.put("pinless.read.holds", "{read}");
    UNITS.put("pinless.read.unconsumed", "{buffer}");
    UNITS.put("pinless.connection.installed", "{connection}");
    UNITS.put("pinless.connection.open", "{connection}");
    UNITS.put("pinless.handshake.completed", "{handshake}");
    UNITS.put("pinless.handshake.failed", "{handshake}");
    UNITS.put("pinless.alts.crypto_fallbacks", "{fallback}");
    UNITS.put("pinless.process.budget", "By");
    UNITS.put("pinless.process.held", "By");
    UNITS.put("pinless.connection.slowed", "{connection}");
    UNITS.put("pinless.call.shed", "{call}");
    UNITS.put("pinless.connection.refused", "{connection}");
  }

  private InMemoryMetricReader reader;
  private SdkMeterProvider meters;

  @BeforeEach
  void sdk() {
    reader = InMemoryMetricReader.create();
    meters = SdkMeterProvider.builder().registerMetricReader(reader).build();
  }

  @AfterEach
  void closeSdk() {
    meters.close();
  }

  @Test
  void everyInstrumentWithItsUnitMovesWithTrafficAndGoesWhenClosed() throws Exception {
    AutoCloseable registered = PinlessMetrics.register(
        OpenTelemetrySdk.builder().setMeterProvider(meters).build());
    Map<String, MetricData> before = collect();
    assertEquals(UNITS.keySet(), before.keySet(), "the instruments");
    for (MetricData m : before.values()) {
      assertEquals(UNITS.get(m.getName()), m.getUnit(), m.getName() + "'s unit");
      assertTrue(!m.getDescription().isEmpty(), m.getName() + " has a description");
      if (GAUGES.contains(m.getName())) {
        assertEquals(MetricDataType.LONG_GAUGE, m.getType(), m.getName());
        continue;
      }
      assertEquals(MetricDataType.LONG_SUM, m.getType(), m.getName());
      assertEquals(!UP_DOWN.contains(m.getName()), m.getLongSumData().isMonotonic(),
          m.getName() + " is monotonic unless it goes down");
    }
    assertEquals(Settings.processBudgetBytes(),
        value(before, "pinless.process.budget", Attributes.empty()), "the process's budget");

    long open;
    byte[] message = TestService.message(1 << 20, 7);
    try (Loopback tls = new Loopback(Loopback.Transport.NIO,
        PinlessServerCredentials.tls(TestCertificates.serverContext(
            SslProvider.JDK, TestCertificates.SERVER, ClientAuth.NONE)),
        PinlessChannelCredentials.tls(TestCertificates.clientContext(SslProvider.JDK, null)))) {
      byte[] echoed = ClientCalls.blockingUnaryCall(
          tls.channel, TestService.UNARY, CallOptions.DEFAULT, message);
      assertArrayEquals(message, echoed);
      open = value(collect(), "pinless.connection.open", Attributes.empty());
    }
    // A server whose certificate no CA signed: the handshake fails on both ends.
    try (Loopback untrusted = new Loopback(Loopback.Transport.NIO,
        PinlessServerCredentials.tls(TestCertificates.serverContext(
            SslProvider.JDK, TestCertificates.selfSignedServer(), ClientAuth.NONE)),
        PinlessChannelCredentials.tls(TestCertificates.clientContext(SslProvider.JDK, null)))) {
      assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
          untrusted.channel, TestService.UNARY, CallOptions.DEFAULT, message));
    }
    Map<String, MetricData> after = collect();

    assertTrue(grew(before, after, "pinless.data.sliced", Attributes.empty()) >= message.length / 2,
        "a 1 MiB message each way is mostly sliced, not copied");
    assertTrue(grew(before, after, "pinless.connection.installed", Attributes.empty()) >= 2,
        "both ends of the TLS connection installed pinless");
    assertTrue(open >= 2, "both ends were open during the call: " + open);
    assertTrue(grew(before, after, "pinless.handshake.completed", TLS) >= 2,
        "both ends completed a TLS handshake");
    assertTrue(grew(before, after, "pinless.handshake.failed", TLS) >= 1,
        "the handshake with the self-signed server failed");
    assertEquals(0, grew(before, after, "pinless.handshake.completed", ALTS), "no ALTS here");

    assertEveryMetricShowsInItsOwnPoint();

    registered.close();
    registered.close();
    assertTrue(collect().isEmpty(), "no instrument reports once the registration is closed");
  }

  /**
   * A distinct amount added to each metric shows in exactly its instrument and point: no two
   * wired to the same metric, no attribute swapped, no metric left out.
   */
  private void assertEveryMetricShowsInItsOwnPoint() {
    Map<Metric, Point> wiring = new EnumMap<>(Metric.class);
    wiring.put(Metric.DATA_BYTES_SLICED, new Point("pinless.data.sliced", Attributes.empty()));
    wiring.put(Metric.DATA_BYTES_COPIED, new Point("pinless.data.copied", Attributes.empty()));
    wiring.put(Metric.RECORD_BYTES_COPIED, new Point("pinless.record.copied", Attributes.empty()));
    wiring.put(Metric.MESSAGE_BYTES_ALIASED,
        new Point("pinless.message.aliased", Attributes.empty()));
    wiring.put(Metric.MESSAGE_BYTES_COPIED, new Point("pinless.message.copied", Attributes.empty()));
    wiring.put(Metric.TRACKED_BYTES, new Point("pinless.read.held", Attributes.empty()));
    wiring.put(Metric.READS_HELD, new Point("pinless.read.holds", Attributes.empty()));
    wiring.put(Metric.UNCONSUMED_HAND_ONS,
        new Point("pinless.read.unconsumed", Attributes.empty()));
    wiring.put(Metric.UNRELEASED_BYTES_KEPT,
        new Point("pinless.message.unreleased", Attributes.empty()));
    wiring.put(Metric.SENT_BYTES_COPIED,
        new Point("pinless.message.sent_copied", Attributes.empty()));
    wiring.put(Metric.CONNECTIONS_INSTALLED,
        new Point("pinless.connection.installed", Attributes.empty()));
    wiring.put(Metric.CONNECTIONS_OPEN, new Point("pinless.connection.open", Attributes.empty()));
    wiring.put(Metric.TLS_HANDSHAKES, new Point("pinless.handshake.completed", TLS));
    wiring.put(Metric.ALTS_HANDSHAKES, new Point("pinless.handshake.completed", ALTS));
    wiring.put(Metric.TLS_HANDSHAKE_FAILURES, new Point("pinless.handshake.failed", TLS));
    wiring.put(Metric.ALTS_HANDSHAKE_FAILURES, new Point("pinless.handshake.failed", ALTS));
    wiring.put(Metric.ALTS_CRYPTO_FALLBACKS,
        new Point("pinless.alts.crypto_fallbacks", Attributes.empty()));
    wiring.put(Metric.PEERS_SLOWED, new Point("pinless.connection.slowed", Attributes.empty()));
    wiring.put(Metric.STREAMS_SHED, new Point("pinless.call.shed", Attributes.empty()));
    wiring.put(Metric.CONNECTIONS_REFUSED,
        new Point("pinless.connection.refused", Attributes.empty()));
    assertEquals(EnumSet.allOf(Metric.class), wiring.keySet(), "every metric is exported");

    Map<String, MetricData> start = collect();
    Map<Metric, Long> added = new EnumMap<>(Metric.class);
    long amount = 1_000_003;
    for (Metric m : Metric.values()) {
      added.put(m, amount);
      m.add(amount);
      amount += 1_000_003;
    }
    try {
      Map<String, MetricData> moved = collect();
      for (Map.Entry<Metric, Point> e : wiring.entrySet()) {
        Point p = e.getValue();
        assertEquals(added.get(e.getKey()), value(moved, p.name(), p.attributes())
            - value(start, p.name(), p.attributes()), p + " reads " + e.getKey());
      }
    } finally {
      added.forEach((m, n) -> m.add(-n));
    }
  }

  private record Point(String name, Attributes attributes) {}

  private Map<String, MetricData> collect() {
    Map<String, MetricData> byName = new HashMap<>();
    for (MetricData m : reader.collectAllMetrics()) {
      byName.put(m.getName(), m);
    }
    return byName;
  }

  static long value(Map<String, MetricData> metrics, String name, Attributes attributes) {
    MetricData data = metrics.get(name);
    for (LongPointData p : data.getType() == MetricDataType.LONG_GAUGE
        ? data.getLongGaugeData().getPoints() : data.getLongSumData().getPoints()) {
      if (p.getAttributes().equals(attributes)) {
        return p.getValue();
      }
    }
    throw new AssertionError(name + " has no point with " + attributes);
  }

  private static long grew(Map<String, MetricData> before, Map<String, MetricData> after,
      String name, Attributes attributes) {
    return value(after, name, attributes) - value(before, name, attributes);
  }
}
