package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.netty.InternalNettyChannelCredentials;
import io.grpc.netty.InternalProtocolNegotiators;
import io.grpc.netty.NettyChannelBuilder;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class GrpcNettySupportTest {
  private static final String ROOT = "io/pinless/grpc/NettyNegotiators";

  @Test
  void theGrpcNettyOnTheClassPathHasEverythingTheNegotiatorLinks() {
    assertNull(GrpcNettySupport.problem(GrpcNettySupport.ROOTS, getClass().getClassLoader()));
    GrpcNettySupport.check();
  }

  @Test
  void theNegotiatorsReferencesIntoGrpcNettyAreRead() throws IOException {
    Set<GrpcNettySupport.Reference> refs =
        GrpcNettySupport.references(ROOT, getClass().getClassLoader());
    assertTrue(refs.contains(new GrpcNettySupport.Reference(
        "io/grpc/netty/InternalNettyChannelCredentials", "create",
        "(Lio/grpc/netty/InternalProtocolNegotiator$ClientFactory;)Lio/grpc/ChannelCredentials;")),
        refs.toString());
    // Referenced from a nested class only: the nested classes are read too.
    assertTrue(refs.contains(new GrpcNettySupport.Reference(
        "io/grpc/netty/InternalProtocolNegotiators", "grpcNegotiationHandler",
        "(Lio/grpc/netty/GrpcHttp2ConnectionHandler;)Lio/netty/channel/ChannelHandler;")),
        refs.toString());
    assertTrue(refs.contains(new GrpcNettySupport.Reference(
        "io/grpc/netty/InternalProtocolNegotiators$ProtocolNegotiationHandler", null, null)),
        refs.toString());
  }

  @Test
  void theProvidersBuilderAccessorsAreChecked() throws IOException {
    Set<GrpcNettySupport.Reference> refs = GrpcNettySupport.references(
        "io/pinless/grpc/NettyBuilders", getClass().getClassLoader());
    assertTrue(refs.stream().anyMatch(r -> r.owner().equals(
        "io/grpc/netty/InternalNettyChannelBuilder") && "setProtocolNegotiatorFactory".equals(
        r.member())), refs.toString());
  }

  @Test
  void aMissingMethodIsNamedWithTheSupportedRangeAndTheVersionsFound() {
    String problem = GrpcNettySupport.problem(List.of(ROOT), grpcNettyWithout(
        InternalProtocolNegotiators.class, "grpcNegotiationHandler", "grpcNegotiationHandlex"));
    assertTrue(problem.startsWith(GrpcNettySupport.SUPPORTED), problem);
    String version = NettyChannelBuilder.class.getPackage().getImplementationVersion();
    assertTrue(problem.contains("found grpc-netty " + version + " and Netty "), problem);
    assertTrue(problem.endsWith("lack method io.grpc.netty.InternalProtocolNegotiators"
        + ".grpcNegotiationHandler (Lio/grpc/netty/GrpcHttp2ConnectionHandler;)"
        + "Lio/netty/channel/ChannelHandler;"), problem);
    assertEquals(1, problem.lines().count());
  }

  @Test
  void aMissingClassIsNamed() {
    String problem = GrpcNettySupport.problem(List.of(ROOT), grpcNettyWithout(
        InternalNettyChannelCredentials.class, null, null));
    assertTrue(problem.endsWith("lack class io.grpc.netty.InternalNettyChannelCredentials"),
        problem);
  }

  @Test
  void anUnreadableClassIsReportedNotThrown() {
    String problem = GrpcNettySupport.problem(List.of("io/pinless/grpc/NoSuchClass"),
        getClass().getClassLoader());
    assertTrue(problem.startsWith(GrpcNettySupport.SUPPORTED), problem);
    assertTrue(problem.contains("io/pinless/grpc/NoSuchClass"), problem);
  }

  /**
   * A loader that sees the test class path except {@code type}, or, with a {@code method}, sees
   * {@code type} with that method renamed to {@code renamed} (same length, so the class file
   * stays valid).
   */
  private static ClassLoader grpcNettyWithout(Class<?> type, String method, String renamed) {
    String name = type.getName();
    ClassLoader parent = GrpcNettySupportTest.class.getClassLoader();
    return new ClassLoader(null) {
      @Override
      protected Class<?> loadClass(String className, boolean resolve)
          throws ClassNotFoundException {
        synchronized (getClassLoadingLock(className)) {
          Class<?> loaded = findLoadedClass(className);
          if (loaded != null) {
            return loaded;
          }
          if (className.equals(name) && method == null) {
            throw new ClassNotFoundException(className);
          }
          if (!className.startsWith("io.grpc.") && !className.startsWith("io.netty.")
              && !className.startsWith("io.pinless.")) {
            return parent.loadClass(className);
          }
          byte[] bytes = read(parent, className);
          if (className.equals(name)) {
            bytes = rename(bytes, method, renamed);
          }
          return defineClass(className, bytes, 0, bytes.length);
        }
      }

      @Override
      public URL getResource(String resource) {
        return parent.getResource(resource);
      }

      @Override
      public InputStream getResourceAsStream(String resource) {
        return parent.getResourceAsStream(resource);
      }
    };
  }

  private static byte[] read(ClassLoader loader, String className)
      throws ClassNotFoundException {
    try (InputStream in = loader.getResourceAsStream(className.replace('.', '/') + ".class")) {
      if (in == null) {
        throw new ClassNotFoundException(className);
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new ClassNotFoundException(className, e);
    }
  }

  /** The class file with the modified-UTF-8 constant {@code from} replaced by {@code to}. */
  private static byte[] rename(byte[] classFile, String from, String to) {
    byte[] a = from.getBytes(StandardCharsets.UTF_8);
    byte[] b = to.getBytes(StandardCharsets.UTF_8);
    assertEquals(a.length, b.length);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int replaced = 0;
    for (int i = 0; i < classFile.length; i++) {
      // A CONSTANT_Utf8 entry: tag 1, then its length, then the bytes.
      if (i + 3 + a.length <= classFile.length && classFile[i] == 1
          && classFile[i + 1] == 0 && classFile[i + 2] == a.length
          && java.util.Arrays.equals(classFile, i + 3, i + 3 + a.length, a, 0, a.length)) {
        out.write(classFile, i, 3);
        out.write(b, 0, b.length);
        i += 2 + a.length;
        replaced++;
      } else {
        out.write(classFile[i]);
      }
    }
    assertEquals(1, replaced);
    return out.toByteArray();
  }
}
