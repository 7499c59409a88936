package io.pinless.alts.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import io.grpc.MethodDescriptor.MethodType;
import io.grpc.alts.internal.HandshakerProto;
import io.grpc.alts.internal.HandshakerServiceGrpc;
import io.pinless.alts.handshake.proto.AltsHandshakerProto;
import io.pinless.alts.handshake.proto.HandshakeProtocol;
import io.pinless.alts.handshake.proto.HandshakerReq;
import io.pinless.alts.handshake.proto.HandshakerResp;
import io.pinless.alts.handshake.proto.HandshakerResult;
import io.pinless.alts.handshake.proto.HandshakerStatus;
import io.pinless.alts.handshake.proto.Identity;
import io.pinless.alts.handshake.proto.LocalHandshakeProto;
import io.pinless.alts.handshake.proto.RpcProtocolVersions;
import io.pinless.alts.handshake.proto.StartClientHandshakeReq;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * pinless's copy of the handshaker protocol: the wire of grpc-alts's {@code grpc.gcp} protocol
 * (method name, field numbers and types), none of its proto names.
 */
class HandshakerProtocolTest {
  @Test
  void callsThePublicDoHandshakeMethod() {
    assertEquals("grpc.gcp.HandshakerService/DoHandshake",
        HandshakerProtocol.DO_HANDSHAKE.getFullMethodName());
    assertEquals(HandshakerServiceGrpc.getDoHandshakeMethod().getFullMethodName(),
        HandshakerProtocol.DO_HANDSHAKE.getFullMethodName());
    assertEquals(MethodType.BIDI_STREAMING, HandshakerProtocol.DO_HANDSHAKE.getType());
  }

  @Test
  void registersNoProtoNameOfGrpcAlts() {
    Set<String> ours = new HashSet<>();
    collectNames(AltsHandshakerProto.getDescriptor(), ours);
    collectNames(LocalHandshakeProto.getDescriptor(), ours);
    Set<String> stock = new HashSet<>();
    collectNames(HandshakerProto.getDescriptor(), stock);
    for (FileDescriptor dependency : HandshakerProto.getDescriptor().getDependencies()) {
      collectNames(dependency, stock);
    }
    assertTrue(stock.contains("grpc.gcp.HandshakerReq"), "grpc-alts's names: " + stock);
    Set<String> shared = new HashSet<>(ours);
    shared.retainAll(stock);
    assertEquals(Set.of(), shared);
  }

  @Test
  void everyFieldHasGrpcAltsNumberAndType() {
    for (Descriptor ours : AltsHandshakerProto.getDescriptor().getMessageTypes()) {
      assertSameWire(ours, stockMessage(ours.getName()));
    }
    for (EnumDescriptor ours : AltsHandshakerProto.getDescriptor().getEnumTypes()) {
      EnumDescriptor stock = stockEnum(ours.getName());
      for (EnumValueDescriptor value : ours.getValues()) {
        assertEquals(value.getName(), stock.findValueByNumber(value.getNumber()).getName(),
            ours.getFullName());
      }
    }
  }

  @Test
  void grpcAltsParsesOurRequestAndResponseToTheSameBytes() throws Exception {
    HandshakerReq req = HandshakerReq.newBuilder()
        .setClientStart(StartClientHandshakeReq.newBuilder()
            .setHandshakeSecurityProtocol(HandshakeProtocol.ALTS)
            .addApplicationProtocols(HandshakerProtocol.APPLICATION_PROTOCOL)
            .addRecordProtocols(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
            .addTargetIdentities(Identity.newBuilder().setServiceAccount("server@example"))
            .setLocalIdentity(Identity.newBuilder().setHostname("client.example")
                .putAttributes("k", "v"))
            .setTargetName("server.example:443")
            .setRpcVersions(versions())
            .setMaxFrameSize(1 << 20))
        .build();
    io.grpc.alts.internal.HandshakerReq stockReq =
        io.grpc.alts.internal.HandshakerReq.parseFrom(req.toByteArray());
    assertEquals(0, stockReq.getClientStart().getUnknownFields().asMap().size());
    assertEquals("server.example:443", stockReq.getClientStart().getTargetName());
    assertEquals(req.toByteString(), stockReq.toByteString());

    HandshakerResp resp = HandshakerResp.newBuilder()
        .setOutFrames(ByteString.copyFromUtf8("frames"))
        .setBytesConsumed(7)
        .setResult(HandshakerResult.newBuilder()
            .setApplicationProtocol(HandshakerProtocol.APPLICATION_PROTOCOL)
            .setRecordProtocol(HandshakerProtocol.RECORD_PROTOCOL_REKEY)
            .setKeyData(ByteString.copyFrom(new byte[44]))
            .setPeerIdentity(Identity.newBuilder().setServiceAccount("peer@example"))
            .setKeepChannelOpen(true)
            .setPeerRpcVersions(versions())
            .setMaxFrameSize(16384))
        .setStatus(HandshakerStatus.newBuilder().setCode(0).setDetails("ok"))
        .build();
    io.grpc.alts.internal.HandshakerResp stockResp =
        io.grpc.alts.internal.HandshakerResp.parseFrom(resp.toByteArray());
    assertEquals("peer@example", stockResp.getResult().getPeerIdentity().getServiceAccount());
    assertEquals(resp.toByteString(), stockResp.toByteString());
    assertEquals(resp, HandshakerResp.parseFrom(stockResp.toByteArray()));
  }

  private static RpcProtocolVersions versions() {
    RpcProtocolVersions.Version v = RpcProtocolVersions.Version.newBuilder()
        .setMajor(HandshakerProtocol.RPC_MAJOR).setMinor(HandshakerProtocol.RPC_MINOR).build();
    return RpcProtocolVersions.newBuilder().setMaxRpcVersion(v).setMinRpcVersion(v).build();
  }

  /** Each of our fields has the number, type and (for messages) shape grpc-alts gives it. */
  private static void assertSameWire(Descriptor ours, Descriptor stock) {
    for (FieldDescriptor field : ours.getFields()) {
      FieldDescriptor other = stock.findFieldByNumber(field.getNumber());
      assertNotNull(other, ours.getFullName() + " field " + field.getNumber());
      String where = ours.getFullName() + "." + field.getName();
      assertEquals(field.getName(), other.getName(), where);
      assertEquals(field.getType(), other.getType(), where);
      assertEquals(field.isRepeated(), other.isRepeated(), where);
      assertEquals(field.isMapField(), other.isMapField(), where);
      if (field.getType() == FieldDescriptor.Type.MESSAGE) {
        assertSameWire(field.getMessageType(), other.getMessageType());
      }
    }
  }

  private static Descriptor stockMessage(String name) {
    for (FileDescriptor file : stockFiles()) {
      Descriptor found = file.findMessageTypeByName(name);
      if (found != null) {
        return found;
      }
    }
    throw new AssertionError("grpc-alts has no message " + name);
  }

  private static EnumDescriptor stockEnum(String name) {
    for (FileDescriptor file : stockFiles()) {
      EnumDescriptor found = file.findEnumTypeByName(name);
      if (found != null) {
        return found;
      }
    }
    throw new AssertionError("grpc-alts has no enum " + name);
  }

  private static List<FileDescriptor> stockFiles() {
    List<FileDescriptor> files = new ArrayList<>();
    files.add(HandshakerProto.getDescriptor());
    files.addAll(HandshakerProto.getDescriptor().getDependencies());
    return files;
  }

  private static void collectNames(FileDescriptor file, Set<String> names) {
    names.add(file.getName());
    for (Descriptor message : file.getMessageTypes()) {
      collectNames(message, names);
    }
    for (EnumDescriptor e : file.getEnumTypes()) {
      names.add(e.getFullName());
    }
    file.getServices().forEach(s -> names.add(s.getFullName()));
  }

  private static void collectNames(Descriptor message, Set<String> names) {
    names.add(message.getFullName());
    for (Descriptor nested : message.getNestedTypes()) {
      collectNames(nested, names);
    }
    for (EnumDescriptor e : message.getEnumTypes()) {
      names.add(e.getFullName());
    }
  }
}
