package io.pinless.tls;

import io.netty.util.IllegalReferenceCountException;
import io.netty.util.ReferenceCounted;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;

/**
 * An engine whose handshake starts with one delegated task and then waits for the peer forever,
 * reference counted as OpenSSL's is (the handshake handler releases it).
 */
final class TaskEngine extends FakeTls13Engine implements ReferenceCounted {
  private final Runnable task;
  private boolean taskTaken;
  private int refCnt = 1;

  /** @param task the handshake's delegated task */
  TaskEngine(Runnable task) {
    this.task = task;
  }

  @Override
  public synchronized HandshakeStatus getHandshakeStatus() {
    return taskTaken ? HandshakeStatus.NEED_UNWRAP : HandshakeStatus.NEED_TASK;
  }

  @Override
  public synchronized Runnable getDelegatedTask() {
    if (taskTaken) {
      return null;
    }
    taskTaken = true;
    return task;
  }

  @Override
  public synchronized int refCnt() {
    return refCnt;
  }

  @Override
  public ReferenceCounted retain() {
    return retain(1);
  }

  @Override
  public synchronized ReferenceCounted retain(int increment) {
    if (refCnt == 0) {
      throw new IllegalReferenceCountException(0, increment);
    }
    refCnt += increment;
    return this;
  }

  @Override
  public ReferenceCounted touch() {
    return this;
  }

  @Override
  public ReferenceCounted touch(Object hint) {
    return this;
  }

  @Override
  public boolean release() {
    return release(1);
  }

  @Override
  public synchronized boolean release(int decrement) {
    if (refCnt < decrement) {
      throw new IllegalReferenceCountException(refCnt, -decrement);
    }
    refCnt -= decrement;
    return refCnt == 0;
  }
}
