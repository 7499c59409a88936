package io.pinless.testing;

import com.google.api.gax.grpc.GrpcInterceptorProvider;
import com.google.protobuf.ByteString;
import com.google.storage.v2.ReadObjectResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.ForwardingClientCallListener.SimpleForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts where the content of each ReadObject response a Cloud Storage client receives lives,
 * after the client's marshaller parsed it: in direct buffers (what a zero-copy parse of pooled
 * Netty buffers makes) or on the heap (what a copying parse makes).
 *
 * <p>It is a client interceptor, and its own {@link GrpcInterceptorProvider}: give it to {@code
 * StorageOptions.grpc().setGrpcInterceptorProvider} or to gax's {@code
 * InstantiatingGrpcChannelProvider.Builder.setInterceptorProvider}. It looks at each message
 * before the client does and keeps no reference to it.
 */
public final class ReadObjectContentWatch implements GrpcInterceptorProvider, ClientInterceptor {
  private final AtomicLong directBytes = new AtomicLong();
  private final AtomicLong heapBytes = new AtomicLong();

  /** Content bytes of received ReadObject responses that are views of direct buffers. */
  public long directBytes() {
    return directBytes.get();
  }

  /** Content bytes of received ReadObject responses held in heap memory. */
  public long heapBytes() {
    return heapBytes.get();
  }

  /** This watch, the one interceptor it provides. */
  @Override
  public List<ClientInterceptor> getInterceptors() {
    return List.of(this);
  }

  /** Wraps the call so that each ReadObject response is counted before the client sees it. */
  @Override
  public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
      MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
    return new SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<RespT> listener, Metadata headers) {
        super.start(new SimpleForwardingClientCallListener<>(listener) {
          @Override
          public void onMessage(RespT message) {
            if (message instanceof ReadObjectResponse) {
              count((ReadObjectResponse) message);
            }
            super.onMessage(message);
          }
        }, headers);
      }
    };
  }

  /** Looks at the content's buffers; keeps none. */
  private void count(ReadObjectResponse response) {
    ByteString content = response.getChecksummedData().getContent();
    for (ByteBuffer piece : content.asReadOnlyByteBufferList()) {
      (piece.isDirect() ? directBytes : heapBytes).addAndGet(piece.remaining());
    }
  }
}
