package io.pinless.grpc;

import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.pinless.PinlessMetrics.Metric;
import io.pinless.read.ProcessBudget;

/**
 * Refuses new calls while the process's received memory is over its budget ({@link
 * ProcessBudget#shedsStreams}), with {@code RESOURCE_EXHAUSTED}, before the service sees them: a
 * client may retry elsewhere, and the call's messages are dropped as they arrive instead of being
 * held. Calls already running go on.
 *
 * <p>Servers built through the pinless server provider get it. A server built with {@code
 * NettyServerBuilder} and {@link PinlessServerCredentials} adds it:
 *
 * <pre>
 *   NettyServerBuilder.forPort(port, PinlessServerCredentials.insecure())
 *       .intercept(LoadShedding.interceptor())
 * </pre>
 */
public final class LoadShedding implements ServerInterceptor {
  /** What a refused call's status says. */
  static final String DESCRIPTION = "pinless: the server's received memory is over its process "
      + "budget (pinless.process.budgetBytes); retry later or elsewhere";
  private static final ServerCall.Listener<Object> DROP = new ServerCall.Listener<>() {};

  private final ProcessBudget budget;

  private LoadShedding(ProcessBudget budget) {
    this.budget = budget;
  }

  /** The interceptor for the process's budget; with none, it sheds nothing. */
  public static ServerInterceptor interceptor() {
    return new LoadShedding(ProcessBudget.process());
  }

  /** The interceptor for {@code budget} (null: sheds nothing). */
  static ServerInterceptor interceptor(ProcessBudget budget) {
    return new LoadShedding(budget);
  }

  /** Closes the call with {@code RESOURCE_EXHAUSTED} while the budget sheds; else starts it. */
  @Override
  @SuppressWarnings("unchecked")
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    if (budget == null || !budget.shedsStreams()) {
      return next.startCall(call, headers);
    }
    Metric.STREAMS_SHED.add(1);
    call.close(Status.RESOURCE_EXHAUSTED.withDescription(DESCRIPTION), new Metadata());
    return (ServerCall.Listener<Q>) DROP;
  }
}
