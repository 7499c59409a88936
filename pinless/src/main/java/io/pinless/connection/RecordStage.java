package io.pinless.connection;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.pinless.read.ReadPolicy;
import java.util.function.BiConsumer;

/**
 * A connection's record layer between the socket and HTTP/2 (ALTS today): it opens the records
 * the peer sends (ciphertext in, plaintext out) and seals what this end writes (plaintext in,
 * records out). {@link ConnectionHandler} drives it once the handshake that keyed it has ended;
 * a new record protocol is one implementation of this interface and needs no wiring.
 *
 * <p>As a {@link ReadPolicy.ReadTarget} a stage may size the connection's reads or supply the
 * buffer the next read fills, such as the rest of a record a read cut short, and learns of reads
 * whose buffer the transport picked itself (an io_uring provided-buffer ring).
 *
 * <p>Errors: a record that is malformed, too long or fails authentication is fatal. The stage
 * hands on the plaintext of every record before it, then throws; every later call of {@link
 * #open} drops its input. The driving handler fires the exception and closes the channel.
 *
 * <p>Confined to the channel's event loop.
 */
public interface RecordStage extends ReadPolicy.ReadTarget {
  /**
   * Opens every record {@code in} completes and hands their plaintext to {@code out}, each buffer
   * with {@code headroom} free bytes before its reader index.
   *
   * @param in borrowed: its reader index is advanced past everything consumed; it may be the
   *     buffer {@link #nextReadBuffer} supplied
   * @param out takes ownership of each plaintext buffer, given with {@code ctx}
   * @throws RuntimeException on a fatal error (a {@code DecoderException} for bad input), after
   *     handing on the plaintext of the records before it
   */
  void open(ChannelHandlerContext ctx, ByteBuf in, int headroom,
      BiConsumer<ChannelHandlerContext, ByteBuf> out);

  /**
   * The peer closed the connection.
   *
   * @throws RuntimeException if a record was partly received (a truncation)
   */
  void endOfInput();

  /**
   * Queues {@code plaintext} to be sealed on the next {@link #flush}.
   *
   * @param plaintext owned: released once sealed, or on failure
   */
  void write(ChannelHandlerContext ctx, ByteBuf plaintext, ChannelPromise promise);

  /** Seals what is queued into records, writes them and flushes the channel. */
  void flush(ChannelHandlerContext ctx);

  /**
   * The channel is closing: fails the writes not yet sealed; a protocol with a closing message
   * (TLS's close_notify) writes it with {@code ctx}.
   */
  void close(ChannelHandlerContext ctx);

  /** Releases everything the stage holds and destroys its keys; it is not used again. */
  void release();
}
