package io.pinless;

import io.grpc.BindableService;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCredentials;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.grpc.PinlessAltsContext;
import io.pinless.grpc.PinlessChannelCredentials;
import io.pinless.grpc.PinlessServerCredentials;
import io.pinless.grpc.ZeroCopyMarshaller;
import io.pinless.testing.readme.ReadRequest;
import io.pinless.testing.readme.ReadResponse;
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.concurrent.TimeUnit;

/**
 * The README's Java snippets, one method each, exactly as the README shows them; the imports each
 * snippet shows are among this file's, and the parameters are what it takes from around it.
 * Compiled by {@code mvn test-compile}, never run: a snippet that stops compiling fails the
 * build, so the README changes with the API.
 */
@SuppressWarnings("unused")
final class ReadmeSnippets {
  private ReadmeSnippets() {}

  static void plaintext(BindableService myService) throws Exception {
    Server server = NettyServerBuilder.forPort(8080, PinlessServerCredentials.insecure())
        .addService(myService).build().start();
    ManagedChannel channel = NettyChannelBuilder
        .forAddress("localhost", 8080, PinlessChannelCredentials.insecure()).build();
  }

  static void tls(File certChainFile, File keyFile, File clientCaFile, File caFile,
      File clientCertFile, File clientKeyFile) throws Exception {
    SslContext serverContext = GrpcSslContexts.forServer(certChainFile, keyFile)
        .trustManager(clientCaFile)          // for mutual TLS, with:
        .clientAuth(ClientAuth.REQUIRE)
        .build();
    ServerCredentials serverCreds = PinlessServerCredentials.tls(serverContext);
    SslContext clientContext = GrpcSslContexts.forClient()
        .trustManager(caFile)
        .keyManager(clientCertFile, clientKeyFile)  // for mutual TLS
        .build();
    ChannelCredentials channelCreds = PinlessChannelCredentials.tls(clientContext);
  }

  static void altsOnGoogleCloud() throws Exception {
    ServerCredentials serverCreds = PinlessServerCredentials.altsBuilder().build();
    ChannelCredentials channelCreds = PinlessChannelCredentials.altsBuilder()
        .addTargetServiceAccount("backend@my-project.iam.gserviceaccount.com")
        .handshakeTimeout(10, TimeUnit.SECONDS)   // default 20 s
        .build();
  }

  static void altsCaller(ServerCall<?, ?> call) throws Exception {
    PinlessAltsContext alts = PinlessAltsContext.from(call);   // null off ALTS
    String caller = alts.peerServiceAccount();                 // also recordProtocol(), maxFrameSize()
  }

  static void localHandshaker(byte[] deploymentKey) throws Exception {
    // Each process: its own handshaker, for its own identity (loopback only; 0: any port)
    Server handshaker = LocalHandshakerMain.start(0, "frontend", deploymentKey);
    ChannelCredentials channelCreds = PinlessChannelCredentials.altsBuilder()
        .handshakerAddress(LocalHandshakerMain.hostAndPort(handshaker))
        .addTargetServiceAccount("backend")
        .build();
  }

  static void zeroCopy(ManagedChannel channel, CallOptions options, ReadRequest request,
      FileChannel file) throws Exception {
    ZeroCopyMarshaller<ReadResponse> responses = ZeroCopyMarshaller.of(ReadResponse.getDefaultInstance());
    MethodDescriptor<ReadRequest, ReadResponse> read = StorageGrpc.getReadMethod().toBuilder()
        .setResponseMarshaller(responses).build();
    var it = ClientCalls.blockingServerStreamingCall(channel, read, options, request);
    while (it.hasNext()) {
      ReadResponse response = it.next();
      try (ZeroCopyMarshaller.Lease lease = responses.lease(response)) {
        file.write(response.getData().asReadOnlyByteBufferList().toArray(new ByteBuffer[0]));
      }
    }
  }

  /** What protoc's gRPC plugin generates for a service with a server-streaming {@code Read}. */
  private static final class StorageGrpc {
    static MethodDescriptor<ReadRequest, ReadResponse> getReadMethod() {
      return MethodDescriptor.<ReadRequest, ReadResponse>newBuilder()
          .setType(MethodDescriptor.MethodType.SERVER_STREAMING)
          .setFullMethodName("readme.Storage/Read")
          .setRequestMarshaller(ProtoUtils.marshaller(ReadRequest.getDefaultInstance()))
          .setResponseMarshaller(ProtoUtils.marshaller(ReadResponse.getDefaultInstance()))
          .build();
    }
  }
}
