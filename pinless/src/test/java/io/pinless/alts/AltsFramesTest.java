package io.pinless.alts;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** {@link AltsFrames#view}: the bytes asked for, whatever the buffer is a view of. */
class AltsFramesTest {
  private static final PooledByteBufAllocator ALLOC = new PooledByteBufAllocator(true);

  @Test
  void viewOfASliceIsTheSlicesBytesThroughTheBufferUnderIt() {
    ByteBuf root = counting(ALLOC.directBuffer(256));
    ByteBuf slice = root.retainedSlice(10, 100);
    ByteBuf sliceOfSlice = slice.slice(7, 50);
    try {
      assertBytes(AltsFrames.view(slice, 5, 20), 15, 20);
      assertBytes(AltsFrames.view(sliceOfSlice, 3, 40), 20, 40);
      assertBytes(AltsFrames.view(root.duplicate(), 200, 56), 200, 56);
      // The reusable view of the buffer under them: nothing allocated per call.
      ByteBuffer first = AltsFrames.view(slice, 0, 1);
      assertSame(first, AltsFrames.view(sliceOfSlice, 0, 1));
    } finally {
      slice.release();
      root.release();
    }
  }

  @Test
  void viewOfHeapAndCompositeBuffersIsTheirBytes() {
    ByteBuf heap = counting(Unpooled.buffer(256));
    try {
      assertBytes(AltsFrames.view(heap.slice(30, 100), 10, 60), 40, 60);
    } finally {
      heap.release();
    }
    CompositeByteBuf composite = Unpooled.compositeBuffer();
    try {
      composite.addComponent(true, counting(ALLOC.directBuffer(100)).writerIndex(100));
      ByteBuf second = ALLOC.directBuffer(100);
      for (int i = 0; i < 100; i++) {
        second.writeByte(100 + i);
      }
      composite.addComponent(true, second);
      for (int i = 0; i < 100; i++) {
        composite.setByte(i, i);
      }
      assertBytes(AltsFrames.view(composite, 90, 20), 90, 20);
    } finally {
      composite.release();
    }
  }

  /** Fills {@code buf} with 0, 1, 2, ... up to its capacity; returns it. */
  private static ByteBuf counting(ByteBuf buf) {
    buf.clear();
    for (int i = 0; i < buf.capacity(); i++) {
      buf.writeByte(i);
    }
    return buf;
  }

  private static void assertBytes(ByteBuffer view, int firstValue, int length) {
    assertEquals(length, view.remaining());
    for (int i = 0; i < length; i++) {
      assertEquals((byte) (firstValue + i), view.get(view.position() + i), "byte " + i);
    }
  }
}
