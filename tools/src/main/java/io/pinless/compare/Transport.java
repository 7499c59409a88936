package io.pinless.compare;

/** The event loops a comparison runs on; every variant gets the same, where it can. */
enum Transport {
  NIO("nio"),
  EPOLL("epoll"),
  /**
   * io_uring with a provided-buffer ring: the kernel picks a buffer only when data arrives. The
   * ALTS and TLS variants' ring is the README's (2 MiB buffers, not incremental), the plaintext
   * variants' one of 48 KiB buffers.
   */
  IO_URING("io_uring"),
  /** io_uring without a ring: reads are sized by the read handle, as on epoll. */
  IO_URING_NO_RING("io_uring_noring");

  final String name;

  Transport(String name) {
    this.name = name;
  }

  /** Whether this is one of the io_uring transports. */
  boolean ioUring() {
    return this == IO_URING || this == IO_URING_NO_RING;
  }

  static Transport byName(String name) {
    for (Transport t : values()) {
      if (t.name.equalsIgnoreCase(name) || t.name().equalsIgnoreCase(name.replace('-', '_'))) {
        return t;
      }
    }
    return null;
  }
}
