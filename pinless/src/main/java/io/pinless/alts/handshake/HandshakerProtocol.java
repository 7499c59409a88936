package io.pinless.alts.handshake;

import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;

/**
 * The names of the public ALTS handshaker protocol ({@code grpc.gcp.HandshakerService}): the one
 * method, a bidirectional stream per connection being secured, and the values both ends of it use.
 */
public final class HandshakerProtocol {
  /** The service's full name. */
  public static final String SERVICE_NAME = "grpc.gcp.HandshakerService";

  /**
   * {@code DoHandshake}: one {@code client_start} or {@code server_start}, then {@code next}s.
   * Built here rather than generated, so that it keeps the public method name while the messages
   * live in pinless's own proto package ({@code pinless.alts.handshaker}).
   */
  public static final MethodDescriptor<HandshakerReq, HandshakerResp> DO_HANDSHAKE =
      MethodDescriptor.<HandshakerReq, HandshakerResp>newBuilder()
          .setType(MethodDescriptor.MethodType.BIDI_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE_NAME, "DoHandshake"))
          .setRequestMarshaller(ProtoUtils.marshaller(HandshakerReq.getDefaultInstance()))
          .setResponseMarshaller(ProtoUtils.marshaller(HandshakerResp.getDefaultInstance()))
          .build();

  /** The application protocol gRPC negotiates over ALTS. */
  public static final String APPLICATION_PROTOCOL = "grpc";
  /** The record protocol every handshaker negotiates: AES-128-GCM with a key change every 2^16. */
  public static final String RECORD_PROTOCOL_REKEY = "ALTSRP_GCM_AES128_REKEY";
  /** The key of the handshake parameters for ALTS ({@code HandshakeProtocol.ALTS}). */
  public static final int ALTS_PARAMETERS_KEY = 2;
  /** The RPC protocol version gRPC speaks over ALTS is 2.1: its major part. */
  public static final int RPC_MAJOR = 2;
  /** The RPC protocol version gRPC speaks over ALTS is 2.1: its minor part. */
  public static final int RPC_MINOR = 1;

  /**
   * The attribute of a result's peer identity in which pinless's local handshaker says how the
   * peer was authenticated: {@link #AUTHENTICATED_BY_DEPLOYMENT_KEY} or {@link #UNAUTHENTICATED}.
   * Other handshakers (the metadata server's) do not set it: their peers are authenticated.
   */
  public static final String AUTHENTICATION_ATTRIBUTE = "pinless.authentication";
  /** The peer's handshaker proved it holds the same deployment key. */
  public static final String AUTHENTICATED_BY_DEPLOYMENT_KEY = "deployment-key";
  /** Nothing about the peer is authenticated: its identity is only claimed. */
  public static final String UNAUTHENTICATED = "none";

  private HandshakerProtocol() {}
}
