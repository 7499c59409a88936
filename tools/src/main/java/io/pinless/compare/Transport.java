package io.pinless.compare;

/** The event loops a comparison runs on; every variant gets the same, where it can. */
enum Transport {
  NIO("nio"),
  EPOLL("epoll"),
  /** io_uring with a provided-buffer ring: the kernel picks a buffer only when data arrives. */
  IO_URING("io_uring");

  final String name;

  Transport(String name) {
    this.name = name;
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
