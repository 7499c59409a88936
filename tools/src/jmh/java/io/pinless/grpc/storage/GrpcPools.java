package io.pinless.grpc.storage;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * The pooled direct memory of this process's Netty pools, in both Netty copies: grpc-netty's
 * (unshaded, which pinless runs on) and grpc-netty-shaded's (the Cloud Storage client's own
 * transport). Each copy has two pools that matter:
 *
 * <ul>
 *   <li>the allocator grpc-netty gives every channel it builds ({@code Utils.getByteBufAllocator},
 *       a pool of its own with 2 MiB chunks, not Netty's default), unless the application sets
 *       {@code ChannelOption.ALLOCATOR} (gax does not);
 *   <li>{@code PooledByteBufAllocator.DEFAULT}, for anything else that pools.
 * </ul>
 *
 * <p>Only one copy carries the downloads in a process; the other's pools stay empty and add
 * nothing, so the pinless and stock variants are summed over the same pools.
 */
final class GrpcPools {
  private static final List<io.netty.buffer.PooledByteBufAllocator> UNSHADED = unshaded();
  private static final List<io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator> SHADED =
      shaded();

  private GrpcPools() {}

  /** Bytes of pooled direct memory that live buffers pin, both copies, every pool. */
  static long pinnedDirectBytes() {
    long bytes = 0;
    for (io.netty.buffer.PooledByteBufAllocator pool : UNSHADED) {
      bytes += pool.pinnedDirectMemory();
    }
    for (io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator pool : SHADED) {
      bytes += pool.pinnedDirectMemory();
    }
    return bytes;
  }

  /**
   * Direct memory the pools reserved: the chunks they took from the OS, in use or cached
   * ({@code metric().usedDirectMemory()}), both copies, every pool.
   */
  static long reservedDirectBytes() {
    long bytes = 0;
    for (io.netty.buffer.PooledByteBufAllocator pool : UNSHADED) {
      bytes += pool.metric().usedDirectMemory();
    }
    for (io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator pool : SHADED) {
      bytes += pool.metric().usedDirectMemory();
    }
    return bytes;
  }

  private static List<io.netty.buffer.PooledByteBufAllocator> unshaded() {
    return distinct(io.netty.buffer.PooledByteBufAllocator.class,
        channelAllocator("io.grpc.netty.Utils"),
        io.netty.buffer.PooledByteBufAllocator.DEFAULT);
  }

  private static List<io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator> shaded() {
    return distinct(io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator.class,
        channelAllocator("io.grpc.netty.shaded.io.grpc.netty.Utils"),
        io.grpc.netty.shaded.io.netty.buffer.PooledByteBufAllocator.DEFAULT);
  }

  /**
   * What {@code utils.getByteBufAllocator(false)} returns: the allocator a grpc-netty client
   * channel gets. The class is package-private, so it is called through reflection.
   */
  private static Object channelAllocator(String utils) {
    try {
      Method get = Class.forName(utils).getMethod("getByteBufAllocator", boolean.class);
      get.setAccessible(true);
      return get.invoke(null, false);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot reach " + utils + ".getByteBufAllocator", e);
    }
  }

  /** The pools, each once; fails on an allocator that is not a pool of {@code type}. */
  private static <T> List<T> distinct(Class<T> type, Object... pools) {
    Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    List<T> list = new ArrayList<>();
    for (Object pool : pools) {
      if (!type.isInstance(pool)) {
        throw new IllegalStateException(
            "gRPC's channel allocator is " + pool.getClass().getName() + ", not a " + type.getName()
                + " (is io.grpc.netty.useCustomAllocator false?)");
      }
      if (seen.add(pool)) {
        list.add(type.cast(pool));
      }
    }
    return list;
  }
}
