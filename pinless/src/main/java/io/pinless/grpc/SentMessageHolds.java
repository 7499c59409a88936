package io.pinless.grpc;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.ForwardingClientCallListener.SimpleForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Keeps the received buffers of each zero-copy message a call sends until the call closes.
 * grpc-core serializes a message again for every retry attempt, after {@code sendMessage}
 * returned, so a message released by the application in between would be read from freed memory.
 * A hold taken at {@code sendMessage} and dropped at {@code onClose} keeps those bytes valid.
 *
 * <p>Memory: per open call, one list entry per zero-copy message sent; the messages' buffers stay
 * until the later of the application's release and the call's close.
 */
final class SentMessageHolds implements ClientInterceptor {
  /** The buffers a sent message holds, or null when it holds none. */
  private final Function<Object, ReceivedBuffers> received;

  SentMessageHolds(Function<Object, ReceivedBuffers> received) {
    this.received = received;
  }

  @Override
  public <Q, A> ClientCall<Q, A> interceptCall(
      MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
    return new HoldingCall<>(next.newCall(method, options));
  }

  /** A call that holds what it sends until it closes. */
  private final class HoldingCall<Q, A> extends SimpleForwardingClientCall<Q, A> {
    /** Buffers held for this call; guarded by itself. Null once the call closed. */
    private List<ReceivedBuffers> held = new ArrayList<>();

    HoldingCall(ClientCall<Q, A> call) {
      super(call);
    }

    @Override
    public void start(Listener<A> listener, Metadata headers) {
      super.start(
          new SimpleForwardingClientCallListener<A>(listener) {
            @Override
            public void onClose(Status status, Metadata trailers) {
              // Dropped first: the application may free or check the buffers in its onClose.
              try {
                dropAll();
              } finally {
                super.onClose(status, trailers);
              }
            }
          },
          headers);
    }

    @Override
    public void sendMessage(Q message) {
      ReceivedBuffers buffers = received.apply(message);
      if (buffers != null && buffers.holdForCall() && !keep(buffers)) {
        buffers.unhold();
      }
      super.sendMessage(message);
    }

    /** Keeps {@code buffers} until the close; false when the call closed already. */
    private boolean keep(ReceivedBuffers buffers) {
      synchronized (this) {
        if (held == null) {
          return false;
        }
        held.add(buffers);
        return true;
      }
    }

    private void dropAll() {
      List<ReceivedBuffers> drop;
      synchronized (this) {
        drop = held;
        held = null;
      }
      if (drop != null) {
        for (ReceivedBuffers buffers : drop) {
          buffers.unhold();
        }
      }
    }
  }
}
