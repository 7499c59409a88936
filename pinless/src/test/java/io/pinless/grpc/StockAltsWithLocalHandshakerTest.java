package io.pinless.grpc;

import static io.pinless.grpc.TestService.message;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.StatusRuntimeException;
import io.grpc.alts.AltsChannelCredentials;
import io.grpc.alts.AltsContext;
import io.grpc.alts.AltsContextUtil;
import io.grpc.alts.AltsServerCredentials;
import io.grpc.stub.ClientCalls;
import io.pinless.alts.handshake.LocalHandshakerMain;
import io.pinless.testing.Handshakers;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * grpc-java's own ALTS (grpc-alts, test scope) secured by pinless's {@code LocalHandshakerService}:
 * a stock ALTS client and a stock ALTS server, each pointed at its own local handshaker, connect,
 * call, and see each other's identity; with a deployment key, only when both handshakers hold it.
 */
class StockAltsWithLocalHandshakerTest {
  private Server clientHandshaker;
  private Server serverHandshaker;
  private Server server;
  private final ConcurrentLinkedQueue<AltsContext> seen = new ConcurrentLinkedQueue<>();

  @BeforeEach
  void start() throws Exception {
    clientHandshaker = Handshakers.start("client-sa");
    serverHandshaker = Handshakers.start("server-sa");
    ServerInterceptor recordAlts =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            if (AltsContextUtil.check(call)) {
              seen.add(AltsContextUtil.createFrom(call));
            }
            return next.startCall(call, headers);
          }
        };
    server =
        Grpc.newServerBuilderForPort(
                0,
                AltsServerCredentials.newBuilder()
                    .enableUntrustedAltsForTesting()
                    .setHandshakerAddressForTesting(address(serverHandshaker))
                    .build())
            .addService(ServerInterceptors.intercept(TestService.definition(), recordAlts))
            .build()
            .start();
  }

  @AfterEach
  void stop() throws Exception {
    Handshakers.stop(server, clientHandshaker, serverHandshaker);
  }

  private static String address(Server s) {
    return Handshakers.address(s);
  }

  private ManagedChannel channel(String... acceptedServers) {
    AltsChannelCredentials.Builder creds =
        AltsChannelCredentials.newBuilder()
            .enableUntrustedAltsForTesting()
            .setHandshakerAddressForTesting(address(clientHandshaker));
    for (String account : acceptedServers) {
      creds.addTargetServiceAccount(account);
    }
    ChannelCredentials built = creds.build();
    return Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(), built)
        .maxInboundMessageSize(32 << 20)
        .build();
  }

  @Test
  void stockClientAndServerConnectThroughTheLocalHandshaker() throws Exception {
    ManagedChannel channel = channel("server-sa");
    try {
      for (int size : new int[] {0, 1, 16 << 10, 1 << 20}) {
        byte[] req = message(size, size);
        assertArrayEquals(req,
            ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, req),
            "size " + size);
      }
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    AltsContext alts = seen.peek();
    assertTrue(alts != null, "the server's calls carry an ALTS context");
    assertEquals("client-sa", alts.getPeerServiceAccount());
    assertEquals("server-sa", alts.getLocalServiceAccount());
    assertEquals(AltsContext.SecurityLevel.INTEGRITY_AND_PRIVACY, alts.getSecurityLevel());
  }

  @Test
  void stockEndsWhoseHandshakersShareADeploymentKeyConnectAndOthersDoNot() throws Exception {
    byte[] key = "stock interop deployment key 001".getBytes(StandardCharsets.US_ASCII);
    byte[] other = "stock interop deployment key 002".getBytes(StandardCharsets.US_ASCII);
    Server keyedServerSide = LocalHandshakerMain.start(0, "server-sa", key);
    Server keyedServer =
        Grpc.newServerBuilderForPort(0,
                AltsServerCredentials.newBuilder()
                    .enableUntrustedAltsForTesting()
                    .setHandshakerAddressForTesting(address(keyedServerSide))
                    .build())
            .addService(TestService.definition())
            .build()
            .start();
    Server sameKey = LocalHandshakerMain.start(0, "client-sa", key);
    Server otherKey = LocalHandshakerMain.start(0, "client-sa", other);
    try {
      ManagedChannel channel = stockChannel(keyedServer, sameKey);
      try {
        byte[] req = message(1000, 3);
        assertArrayEquals(req,
            ClientCalls.blockingUnaryCall(channel, TestService.UNARY, CallOptions.DEFAULT, req));
      } finally {
        channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
      for (Server clientSide : new Server[] {otherKey, clientHandshaker}) {
        ManagedChannel refused = stockChannel(keyedServer, clientSide);
        try {
          StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
              () -> ClientCalls.blockingUnaryCall(refused, TestService.UNARY,
                  CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS), message(10, 1)));
          assertTrue(String.valueOf(e.getStatus()).contains("deployment key")
              || String.valueOf(e.getStatus()).contains("MAC does not verify"),
              e.getStatus().toString());
        } finally {
          refused.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
      }
    } finally {
      Handshakers.stop(keyedServer, keyedServerSide, sameKey, otherKey);
    }
  }

  private static ManagedChannel stockChannel(Server server, Server handshaker) {
    return Grpc.newChannelBuilder("127.0.0.1:" + server.getPort(),
            AltsChannelCredentials.newBuilder()
                .enableUntrustedAltsForTesting()
                .setHandshakerAddressForTesting(address(handshaker))
                .build())
        .build();
  }

  @Test
  void aServerTheClientDoesNotAcceptFailsTheCall() throws Exception {
    ManagedChannel channel = channel("someone-else");
    try {
      StatusRuntimeException e = null;
      try {
        ClientCalls.blockingUnaryCall(
            channel, TestService.UNARY, CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS),
            message(10, 1));
      } catch (StatusRuntimeException thrown) {
        e = thrown;
      }
      assertTrue(e != null, "the call must fail");
      // grpc-alts maps a handshaker refusal to UNKNOWN; what matters is that the reason the
      // local handshaker gave reaches the caller.
      assertTrue(String.valueOf(e.getStatus()).contains("not one of the accepted"),
          e.getStatus().toString());
      assertTrue(seen.isEmpty(), "no call reached the server");
    } finally {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }
}
