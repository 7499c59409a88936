package io.pinless;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.metrics.MeterProvider;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * What pinless counts, process-wide, for an application to read or export. Each value is a sum
 * over every pinless connection of the process since it started. {@link Metric#TRACKED_BYTES} and
 * {@link Metric#CONNECTIONS_OPEN} are gauges: they also go down.
 *
 * <p>{@link #register(OpenTelemetry)} exports them as OpenTelemetry instruments (with {@code
 * io.opentelemetry:opentelemetry-api} on the class path, an optional dependency); {@link
 * #snapshot()} reads them for any other registry:
 *
 * <pre>
 *   for (PinlessMetrics.Metric m : PinlessMetrics.Metric.values()) {
 *     registry.gauge("pinless." + m.key(), m, PinlessMetrics.Metric::value);   // Micrometer
 *   }
 * </pre>
 */
public final class PinlessMetrics {
  /** One value pinless keeps. */
  public enum Metric {
    /** DATA frame bytes (headers included) handed to gRPC as slices of the buffers they came in. */
    DATA_BYTES_SLICED("data_bytes_sliced"),
    /** DATA frame bytes (headers included) copied: too small to pin the buffer they came in. */
    DATA_BYTES_COPIED("data_bytes_copied"),
    /** Record bytes copied out of read buffers into records that a read cut short. */
    RECORD_BYTES_COPIED("record_bytes_copied"),
    /** Connections whose pipeline got the pinless connection handler. */
    CONNECTIONS_INSTALLED("connections_installed"),
    /** Reads held back because a read budget was exceeded or the channel was not writable. */
    READS_HELD("reads_held"),
    /**
     * Buffers handed to gRPC that it did not read to the end. Behind grpc-netty it stays 0: its
     * cumulation never holds a byte.
     */
    UNCONSUMED_HAND_ONS("unconsumed_hand_ons"),
    /** Message bytes a marshaller handed to the application as views of the received buffers. */
    MESSAGE_BYTES_ALIASED("message_bytes_aliased"),
    /** Message bytes a marshaller parsed by copying them out of the received buffers. */
    MESSAGE_BYTES_COPIED("message_bytes_copied"),
    /** Gauge: pooled bytes handed to gRPC and still held there, as the read budgets count them. */
    TRACKED_BYTES("tracked_bytes"),
    /**
     * Times ALTS crypto fell back to a slower provider: Conscrypt did not load, or its native
     * AES-GCM calls did not load or failed their self-test. The first is also logged.
     */
    ALTS_CRYPTO_FALLBACKS("alts_crypto_fallbacks"),
    /**
     * Bytes of zero-copy messages and payloads garbage-collected without a release. They are
     * never freed: a view taken from the message may still read them.
     */
    UNRELEASED_BYTES_KEPT("unreleased_bytes_kept"),
    /**
     * Bytes of sent zero-copy messages and payloads copied to the heap when released, so that a
     * retry of their call sends them again. A channel with {@code keepSentUntilClose} copies none.
     */
    SENT_BYTES_COPIED("sent_bytes_copied"),
    /** Gauge: connections with the pinless connection handler installed and not yet ended. */
    CONNECTIONS_OPEN("connections_open"),
    /** TLS handshakes pinless ran to completion. */
    TLS_HANDSHAKES("tls_handshakes"),
    /** TLS handshakes that failed: a bad peer or certificate, a timeout, a closed connection. */
    TLS_HANDSHAKE_FAILURES("tls_handshake_failures"),
    /** ALTS handshakes pinless ran to completion. */
    ALTS_HANDSHAKES("alts_handshakes"),
    /** ALTS handshakes that failed: the handshaker service, the peer, a timeout, a close. */
    ALTS_HANDSHAKE_FAILURES("alts_handshake_failures"),
    /**
     * Times a connection's peer was slowed: its connection-level flow-control credit withheld
     * because the connection's read budget, or its share of the process budget, was exceeded.
     */
    PEERS_SLOWED("peers_slowed"),
    /** Calls a server refused with RESOURCE_EXHAUSTED while over the process budget. */
    STREAMS_SHED("streams_shed"),
    /** Connections a server closed on arrival while far over the process budget. */
    CONNECTIONS_REFUSED("connections_refused");

    private final String key;
    private final LongAdder total = new LongAdder();

    Metric(String key) {
      this.key = key;
    }

    /** The name {@link #snapshot()} gives this metric. */
    public String key() {
      return key;
    }

    /** The current value. */
    public long value() {
      return total.sum();
    }

    /** Adds {@code n} (negative for the gauge going down); called by pinless's stages. */
    public void add(long n) {
      total.add(n);
    }
  }

  private PinlessMetrics() {}

  /**
   * Exports every metric through {@code openTelemetry}'s meter provider, as {@link
   * #register(MeterProvider)} does.
   *
   * @return closes the instruments: their callbacks stop being called
   */
  public static AutoCloseable register(OpenTelemetry openTelemetry) {
    return OpenTelemetryInstruments.register(openTelemetry);
  }

  /**
   * Exports every metric as an asynchronous OpenTelemetry instrument of the meter {@code
   * io.pinless}: names under {@code pinless.}, UCUM units ({@code By}, {@code {connection}}), byte
   * and event counts as counters, {@link Metric#TRACKED_BYTES} and {@link
   * Metric#CONNECTIONS_OPEN} as up-down counters, handshakes with a {@code pinless.transport}
   * attribute ({@code tls} or {@code alts}). docs/metrics.md lists them. Each collection reads
   * the values then; registering costs the read path nothing.
   *
   * @return closes the instruments: their callbacks stop being called
   */
  public static AutoCloseable register(MeterProvider meterProvider) {
    return OpenTelemetryInstruments.register(meterProvider);
  }

  /** Every metric by its key, in declaration order. */
  public static Map<String, Long> snapshot() {
    Map<String, Long> values = new LinkedHashMap<>();
    for (Metric m : Metric.values()) {
      values.put(m.key(), m.value());
    }
    return values;
  }
}
