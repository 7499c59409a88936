package io.pinless;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.api.metrics.MeterProvider;
import io.opentelemetry.api.metrics.ObservableLongMeasurement;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.read.ProcessBudget;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * {@link PinlessMetrics} as OpenTelemetry instruments. The only class that names OpenTelemetry's
 * types in a body, so pinless loads and runs without the API on the class path until an
 * application calls {@link PinlessMetrics#register(MeterProvider)}.
 *
 * <p>Every instrument is asynchronous: a collection reads the metrics' sums, and nothing is
 * recorded on the read path.
 */
final class OpenTelemetryInstruments {
  /** The meter's name: the instrumentation scope of every instrument here. */
  static final String METER = "io.pinless";
  /** Which security a handshake ran: {@code tls} or {@code alts}. */
  static final AttributeKey<String> TRANSPORT = AttributeKey.stringKey("pinless.transport");

  private OpenTelemetryInstruments() {}

  /** How an instrument's values behave. */
  private enum Kind {
    /** A sum that only grows. */
    COUNTER,
    /** A sum that also goes down. */
    UP_DOWN,
    /** A value read as it is now. */
    GAUGE
  }

  /** One instrument: its name, unit, description, and what it reads at each collection. */
  private record Instrument(String name, String unit, String description, Kind kind,
      Consumer<ObservableLongMeasurement> read) {}

  /**
   * Every instrument, {@code process} the budget read (null: none, read as 0), in the order
   * docs/metrics.md lists.
   */
  static List<Instrument> instruments(ProcessBudget process) {
    Attributes tls = Attributes.of(TRANSPORT, "tls");
    Attributes alts = Attributes.of(TRANSPORT, "alts");
    return List.of(
        counter("pinless.data.sliced", "By",
            "DATA frame bytes handed to gRPC as slices of the buffers they were read into",
            Metric.DATA_BYTES_SLICED),
        counter("pinless.data.copied", "By",
            "DATA frame bytes copied, too small to pin the buffer they were read into",
            Metric.DATA_BYTES_COPIED),
        counter("pinless.record.copied", "By",
            "TLS and ALTS record bytes copied out of read buffers that cut them",
            Metric.RECORD_BYTES_COPIED),
        counter("pinless.message.aliased", "By",
            "message bytes handed to the application as views of the received buffers",
            Metric.MESSAGE_BYTES_ALIASED),
        counter("pinless.message.copied", "By",
            "message bytes a zero-copy marshaller parsed by copying", Metric.MESSAGE_BYTES_COPIED),
        new Instrument("pinless.read.held", "By",
            "received pooled bytes gRPC and the application hold, as the read budgets count them",
            Kind.UP_DOWN, m -> m.record(Metric.TRACKED_BYTES.value())),
        counter("pinless.read.holds", "{read}",
            "reads held back by a read budget or an unwritable channel", Metric.READS_HELD),
        counter("pinless.read.unconsumed", "{buffer}",
            "buffers handed to gRPC that it did not read to the end", Metric.UNCONSUMED_HAND_ONS),
        counter("pinless.message.unreleased", "By",
            "zero-copy message bytes collected without a release, kept for the views taken",
            Metric.UNRELEASED_BYTES_KEPT),
        counter("pinless.message.sent_copied", "By",
            "sent zero-copy message bytes copied to the heap for a retry of their call",
            Metric.SENT_BYTES_COPIED),
        counter("pinless.connection.installed", "{connection}",
            "connections that got the pinless connection handler", Metric.CONNECTIONS_INSTALLED),
        new Instrument("pinless.connection.open", "{connection}",
            "connections with the pinless connection handler, not yet ended", Kind.UP_DOWN,
            m -> m.record(Metric.CONNECTIONS_OPEN.value())),
        new Instrument("pinless.handshake.completed", "{handshake}",
            "TLS and ALTS handshakes run to completion", Kind.COUNTER, m -> {
              m.record(Metric.TLS_HANDSHAKES.value(), tls);
              m.record(Metric.ALTS_HANDSHAKES.value(), alts);
            }),
        new Instrument("pinless.handshake.failed", "{handshake}",
            "TLS and ALTS handshakes that failed", Kind.COUNTER, m -> {
              m.record(Metric.TLS_HANDSHAKE_FAILURES.value(), tls);
              m.record(Metric.ALTS_HANDSHAKE_FAILURES.value(), alts);
            }),
        counter("pinless.alts.crypto_fallbacks", "{fallback}",
            "times ALTS crypto fell back to a slower AES-GCM", Metric.ALTS_CRYPTO_FALLBACKS),
        new Instrument("pinless.process.budget", "By",
            "received bytes all pinless connections of the process may hold", Kind.GAUGE,
            m -> m.record(process == null ? 0 : process.limitBytes())),
        new Instrument("pinless.process.held", "By",
            "received bytes the pinless connections of the process hold, against its budget",
            Kind.GAUGE, m -> m.record(process == null ? 0 : process.heldBytes())),
        counter("pinless.connection.slowed", "{connection}",
            "times a peer was slowed by withheld flow-control credit, for a read budget or the "
                + "process budget", Metric.PEERS_SLOWED),
        counter("pinless.call.shed", "{call}",
            "calls refused with RESOURCE_EXHAUSTED while over the process budget",
            Metric.STREAMS_SHED),
        counter("pinless.connection.refused", "{connection}",
            "connections closed on arrival while far over the process budget",
            Metric.CONNECTIONS_REFUSED));
  }

  private static Instrument counter(String name, String unit, String description, Metric metric) {
    return new Instrument(name, unit, description, Kind.COUNTER, m -> m.record(metric.value()));
  }

  /** As {@link #register(MeterProvider)}, on {@code openTelemetry}'s meter provider. */
  static AutoCloseable register(OpenTelemetry openTelemetry) {
    return register(openTelemetry.getMeterProvider());
  }

  /** Builds every instrument on the meter {@value #METER}; the handle closes them all. */
  static AutoCloseable register(MeterProvider meterProvider) {
    return register(meterProvider, ProcessBudget.process());
  }

  /** As {@link #register(MeterProvider)}, the process instruments reading {@code process}. */
  static AutoCloseable register(MeterProvider meterProvider, ProcessBudget process) {
    Meter meter = meterProvider.get(METER);
    List<AutoCloseable> built = new ArrayList<>();
    try {
      for (Instrument i : instruments(process)) {
        built.add(switch (i.kind()) {
          case COUNTER -> meter.counterBuilder(i.name()).setUnit(i.unit())
              .setDescription(i.description()).buildWithCallback(i.read());
          case UP_DOWN -> meter.upDownCounterBuilder(i.name()).setUnit(i.unit())
              .setDescription(i.description()).buildWithCallback(i.read());
          case GAUGE -> meter.gaugeBuilder(i.name()).ofLongs().setUnit(i.unit())
              .setDescription(i.description()).buildWithCallback(i.read());
        });
      }
    } catch (RuntimeException | Error e) {
      closeAll(built);
      throw e;
    }
    return () -> closeAll(built);
  }

  /**
   * Closes every instrument in {@code built} once, each even when an earlier one throws, and
   * empties it; rethrows the first failure.
   */
  private static void closeAll(List<AutoCloseable> built) {
    RuntimeException first = null;
    synchronized (built) {
      for (AutoCloseable c : built) {
        try {
          c.close();
        } catch (Exception e) {
          if (first == null) {
            first = new IllegalStateException("closing an OpenTelemetry instrument failed", e);
          } else {
            first.addSuppressed(e);
          }
        }
      }
      built.clear();
    }
    if (first != null) {
      throw first;
    }
  }
}
