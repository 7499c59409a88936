package io.pinless.grpc;

import io.grpc.netty.NettyChannelBuilder;
import io.netty.util.Version;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Checks, once, that the grpc-netty and Netty on the class path have every class, method and
 * field pinless's negotiator links to, so that a grpc-java outside the supported range fails
 * building credentials with one line naming the range, never with a {@code LinkageError} at the
 * first connection.
 *
 * <p>What is checked is read from the class files of {@link NettyNegotiators}, {@link
 * NettyBuilders} and their nested classes (the only ones that touch grpc-netty's {@code @Internal}
 * API), not from a list kept by hand: every reference they make into {@code io.grpc} or
 * {@code io.netty} is resolved by reflection, without initializing anything.
 */
final class GrpcNettySupport {
  /** What pinless is built and tested against. */
  static final String SUPPORTED =
      "pinless supports grpc-java 1.76 to 1.85 (grpc-netty on Netty 4.1 or 4.2)";

  /**
   * The classes whose references are checked, with their nested classes: the only two that touch
   * grpc-netty's {@code @Internal} API.
   */
  static final List<String> ROOTS =
      List.of("io/pinless/grpc/NettyNegotiators", "io/pinless/grpc/NettyBuilders");

  /** Null when every reference resolves; else the one line {@link #check()} throws. */
  private static final String PROBLEM = problem(ROOTS, GrpcNettySupport.class.getClassLoader());

  private GrpcNettySupport() {}

  /**
   * Throws unless the grpc-netty and Netty found have what pinless needs.
   *
   * @throws IllegalStateException naming the supported range, the versions found and the first
   *     missing class or member
   */
  static void check() {
    if (PROBLEM != null) {
      throw new IllegalStateException(PROBLEM);
    }
  }

  /**
   * The line {@link #check()} throws for the references of {@code roots} (class file names
   * without {@code .class}) and their nested classes, or null when all resolve in {@code loader}.
   */
  static String problem(List<String> roots, ClassLoader loader) {
    for (String root : roots) {
      try {
        for (Reference ref : references(root, loader)) {
          String missing = ref.missingIn(loader);
          if (missing != null) {
            return SUPPORTED + "; found grpc-netty " + grpcNettyVersion() + " and Netty "
                + nettyVersion() + ", which lack " + missing;
          }
        }
      } catch (IOException e) {
        return SUPPORTED + "; pinless could not read its own class " + root + ": " + e;
      }
    }
    return null;
  }

  private static String grpcNettyVersion() {
    String version = NettyChannelBuilder.class.getPackage().getImplementationVersion();
    return version == null ? "(unknown version)" : version;
  }

  private static String nettyVersion() {
    Version version = Version.identify(Version.class.getClassLoader()).get("netty-transport");
    return version == null ? "(unknown version)" : version.artifactVersion();
  }

  /** Every reference into grpc or Netty that {@code root} and its nested classes make. */
  static Set<Reference> references(String root, ClassLoader loader) throws IOException {
    Set<Reference> refs = new LinkedHashSet<>();
    Set<String> seen = new HashSet<>();
    Deque<String> pending = new ArrayDeque<>(List.of(root));
    while (!pending.isEmpty()) {
      String name = pending.pop();
      if (!seen.add(name)) {
        continue;
      }
      for (Reference ref : ClassFileReferences.read(open(name, loader))) {
        if (ref.owner().startsWith(root + "$")) {
          pending.push(ref.owner());
        } else if (ref.owner().startsWith("io/grpc/") || ref.owner().startsWith("io/netty/")) {
          refs.add(ref);
        }
      }
    }
    return refs;
  }

  private static InputStream open(String name, ClassLoader loader) throws IOException {
    InputStream in = loader.getResourceAsStream(name + ".class");
    if (in == null) {
      throw new IOException("no " + name + ".class");
    }
    return in;
  }

  /**
   * A class (null {@code member}), field or method that a class file refers to.
   *
   * @param owner the internal name of the class ({@code io/grpc/netty/Foo$Bar})
   * @param member a field or method name, or null for the class itself
   * @param descriptor the member's JVM descriptor, or null for the class itself
   */
  record Reference(String owner, String member, String descriptor) {
    /** What is missing of this reference in {@code loader}, or null when it resolves. */
    String missingIn(ClassLoader loader) {
      Class<?> type;
      try {
        type = Class.forName(owner.replace('/', '.'), false, loader);
      } catch (ClassNotFoundException | LinkageError e) {
        return "class " + owner.replace('/', '.');
      }
      if (member == null) {
        return null;
      }
      String where = owner.replace('/', '.') + "." + member + " " + descriptor;
      try {
        if (descriptor.startsWith("(")) {
          MethodType wanted = MethodType.fromMethodDescriptorString(descriptor, loader);
          return hasMethod(type, wanted) ? null : "method " + where;
        }
        return hasField(type, descriptor) ? null : "field " + where;
      } catch (TypeNotPresentException | IllegalArgumentException | LinkageError e) {
        return "a type of " + where;
      }
    }

    private boolean hasMethod(Class<?> type, MethodType wanted) {
      if (member.equals("<init>")) {
        for (var c : type.getDeclaredConstructors()) {
          if (MethodType.methodType(void.class, c.getParameterTypes()).equals(wanted)) {
            return true;
          }
        }
        return false;
      }
      for (Class<?> c : hierarchy(type)) {
        for (Method m : c.getDeclaredMethods()) {
          if (m.getName().equals(member)
              && MethodType.methodType(m.getReturnType(), m.getParameterTypes()).equals(wanted)) {
            return true;
          }
        }
      }
      return false;
    }

    private boolean hasField(Class<?> type, String fieldDescriptor) {
      for (Class<?> c : hierarchy(type)) {
        for (Field f : c.getDeclaredFields()) {
          if (f.getName().equals(member)
              && f.getType().descriptorString().equals(fieldDescriptor)) {
            return true;
          }
        }
      }
      return false;
    }

    /** {@code type}, its superclasses and every interface they implement. */
    private static List<Class<?>> hierarchy(Class<?> type) {
      List<Class<?>> all = new ArrayList<>();
      Deque<Class<?>> pending = new ArrayDeque<>(List.of(type));
      while (!pending.isEmpty()) {
        Class<?> c = pending.pop();
        if (all.contains(c)) {
          continue;
        }
        all.add(c);
        if (c.getSuperclass() != null) {
          pending.add(c.getSuperclass());
        }
        pending.addAll(List.of(c.getInterfaces()));
      }
      return all;
    }
  }

  /** Reads the class, field and method references from a class file's constant pool. */
  private static final class ClassFileReferences {
    private static final int UTF8 = 1;
    private static final int CLASS = 7;
    private static final int FIELD = 9;
    private static final int METHOD = 10;
    private static final int INTERFACE_METHOD = 11;
    private static final int NAME_AND_TYPE = 12;

    private ClassFileReferences() {}

    /** The references in the class file {@code in} (read and closed here). */
    static List<Reference> read(InputStream in) throws IOException {
      try (DataInputStream data = new DataInputStream(in)) {
        if (data.readInt() != 0xCAFEBABE) {
          throw new IOException("not a class file");
        }
        data.readUnsignedShort(); // minor version
        data.readUnsignedShort(); // major version
        int count = data.readUnsignedShort();
        int[] tags = new int[count];
        int[] first = new int[count];
        int[] second = new int[count];
        String[] utf8 = new String[count];
        for (int i = 1; i < count; i++) {
          int tag = data.readUnsignedByte();
          tags[i] = tag;
          switch (tag) {
            case UTF8 -> utf8[i] = data.readUTF();
            case CLASS, 8, 16, 19, 20 -> first[i] = data.readUnsignedShort();
            case 15 -> {
              data.readUnsignedByte();
              data.readUnsignedShort();
            }
            case FIELD, METHOD, INTERFACE_METHOD, NAME_AND_TYPE, 17, 18 -> {
              first[i] = data.readUnsignedShort();
              second[i] = data.readUnsignedShort();
            }
            case 3, 4 -> data.readInt();
            case 5, 6 -> {
              data.readLong();
              i++; // a long or double takes two entries
            }
            default -> throw new IOException("constant pool tag " + tag + " at entry " + i);
          }
        }
        List<Reference> refs = new ArrayList<>();
        for (int i = 1; i < count; i++) {
          if (tags[i] == CLASS && !utf8[first[i]].startsWith("[")) {
            refs.add(new Reference(utf8[first[i]], null, null));
          } else if (tags[i] == FIELD || tags[i] == METHOD || tags[i] == INTERFACE_METHOD) {
            String owner = utf8[first[first[i]]];
            int nameAndType = second[i];
            if (!owner.startsWith("[")) {
              refs.add(new Reference(owner, utf8[first[nameAndType]], utf8[second[nameAndType]]));
            }
          }
        }
        return refs;
      }
    }
  }
}
