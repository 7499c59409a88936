package io.pinless;

import io.opentelemetry.api.metrics.MeterProvider;
import io.pinless.read.ProcessBudget;

/** pinless's OpenTelemetry instruments with the process instruments reading a given budget. */
public final class BudgetInstruments {
  private BudgetInstruments() {}

  /** As {@link PinlessMetrics#register(MeterProvider)}, but reading {@code budget}. */
  public static AutoCloseable register(MeterProvider meterProvider, ProcessBudget budget) {
    return OpenTelemetryInstruments.register(meterProvider, budget);
  }
}
