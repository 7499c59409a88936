package io.pinless;

import io.pinless.read.ProcessBudget;
import io.pinless.read.ReadBudget;
import java.util.List;
import java.util.Locale;

/**
 * Every switch pinless reads, read here once when the class loads. System properties win over
 * environment variables. A bad value fails every accessor with an {@link IllegalArgumentException}
 * naming it.
 *
 * <ul>
 *   <li>{@code pinless.enabled} / {@code PINLESS_ENABLED} ({@code true}): {@code false} makes
 *       pinless credentials build the stock grpc-netty pipeline, for rollback without code changes.
 *       It also turns the transport providers off.
 *   <li>{@code pinless.provider} / {@code PINLESS_PROVIDER} ({@code false}): {@code true} makes
 *       pinless gRPC's transport provider, so channels and servers built through {@code
 *       ManagedChannelBuilder}, {@code ServerBuilder} or {@code Grpc} get the pinless pipeline.
 *   <li>{@code pinless.read.budgetBytes} / {@code PINLESS_READ_BUDGET_BYTES} (64 MiB): inbound
 *       bytes a connection may have handed to gRPC and not yet released before it stops reading.
 *       Must exceed the largest message the application accepts.
 *   <li>{@code pinless.process.budgetBytes} / {@code PINLESS_PROCESS_BUDGET_BYTES} (half the
 *       JVM's direct memory limit): received bytes all pinless connections of the process may
 *       hold, with their peers' credit, before peers over their share are slowed and a server
 *       sheds load (see {@link ProcessBudget}); {@code 0} turns the process budget off.
 *   <li>{@code pinless.read.holdWhileUnwritable} / {@code PINLESS_READ_HOLD_WHILE_UNWRITABLE}
 *       ({@code false}): also stop reading while the channel is not writable.
 *   <li>{@code pinless.alts.crypto} / {@code PINLESS_ALTS_CRYPTO} ({@code auto}): the AES-GCM
 *       provider for ALTS records: {@code auto}, {@code conscrypt} or {@code jdk}.
 *   <li>{@code pinless.http2.maxFrameSize} / {@code PINLESS_HTTP2_MAX_FRAME_SIZE} (65536): the
 *       SETTINGS_MAX_FRAME_SIZE a pinless connection advertises, from 16384 (HTTP/2's default,
 *       which stock grpc-netty keeps: nothing is sent) to 16777215. The peer then sends DATA
 *       frames up to that size, fewer frames for the same bytes; it is also the longest frame of
 *       another type (HEADERS, say) that a connection assembles before gRPC sees it.
 * </ul>
 */
public final class Settings {
  private static final String ALTS_CRYPTO_PROPERTY = "pinless.alts.crypto";
  private static final List<String> ALTS_CRYPTO_VALUES = List.of("auto", "conscrypt", "jdk");
  /** HTTP/2's bounds on SETTINGS_MAX_FRAME_SIZE (RFC 9113, section 6.5.2). */
  private static final long MIN_FRAME_SIZE = 16384;
  private static final long MAX_FRAME_SIZE = (1 << 24) - 1;

  /**
   * The first bad setting, or null. Every accessor throws it (wrapped afresh) rather than the
   * class failing to load: a bad value then fails each use with an {@link
   * IllegalArgumentException} naming it, not with {@link NoClassDefFoundError}.
   */
  private static final IllegalArgumentException BAD;
  private static final boolean ENABLED;
  private static final boolean PROVIDER;
  private static final long READ_BUDGET_BYTES;
  private static final long PROCESS_BUDGET_BYTES;
  private static final boolean HOLD_WHILE_UNWRITABLE;
  private static final String ALTS_CRYPTO;
  private static final int HTTP2_MAX_FRAME_SIZE;

  static {
    IllegalArgumentException bad = null;
    boolean enabled = true;
    boolean provider = false;
    long readBudget = ReadBudget.DEFAULT_LIMIT_BYTES;
    long processBudget = 0;
    boolean holdWhileUnwritable = false;
    String altsCrypto = "auto";
    int maxFrameSize = 65536;
    try {
      enabled = bool("pinless.enabled", true);
      provider = bool("pinless.provider", false);
      readBudget = positiveLong("pinless.read.budgetBytes", ReadBudget.DEFAULT_LIMIT_BYTES);
      processBudget =
          nonNegativeLong("pinless.process.budgetBytes", ProcessBudget.defaultLimitBytes());
      holdWhileUnwritable = bool("pinless.read.holdWhileUnwritable", false);
      altsCrypto = string(ALTS_CRYPTO_PROPERTY, "auto");
      maxFrameSize = frameSize("pinless.http2.maxFrameSize", 65536);
    } catch (IllegalArgumentException e) {
      bad = e;
    }
    BAD = bad;
    ENABLED = enabled;
    PROVIDER = provider;
    READ_BUDGET_BYTES = readBudget;
    PROCESS_BUDGET_BYTES = processBudget;
    HOLD_WHILE_UNWRITABLE = holdWhileUnwritable;
    ALTS_CRYPTO = altsCrypto;
    HTTP2_MAX_FRAME_SIZE = maxFrameSize;
  }

  /** @throws IllegalArgumentException naming the first bad setting, if any */
  private static void check() {
    if (BAD != null) {
      throw new IllegalArgumentException(BAD.getMessage(), BAD);
    }
  }

  private Settings() {}

  /** Whether pinless builds its own pipeline (else the stock grpc-netty one). */
  public static boolean enabled() {
    check();
    return ENABLED;
  }

  /**
   * Whether pinless offers itself as gRPC's channel and server provider. Only with {@link
   * #enabled()}: the rollback switch turns the providers off too.
   */
  public static boolean provider() {
    check();
    return PROVIDER && ENABLED;
  }

  /** The read budget of a connection, in bytes. */
  public static long readBudgetBytes() {
    check();
    return READ_BUDGET_BYTES;
  }

  /** The received bytes all pinless connections of the process may hold; 0 for no bound. */
  public static long processBudgetBytes() {
    check();
    return PROCESS_BUDGET_BYTES;
  }

  /** Whether reads are held while the channel is not writable. */
  public static boolean holdWhileUnwritable() {
    check();
    return HOLD_WHILE_UNWRITABLE;
  }

  /** The SETTINGS_MAX_FRAME_SIZE a pinless connection advertises. */
  public static int http2MaxFrameSize() {
    check();
    return HTTP2_MAX_FRAME_SIZE;
  }

  /**
   * The AES-GCM provider setting for ALTS records: {@code auto}, {@code conscrypt} or {@code jdk}.
   * It is checked here, not when the class loads, so a bad value fails the ALTS credentials that
   * use it rather than every pinless class.
   *
   * @throws IllegalArgumentException naming the setting and its value when it is none of them
   */
  public static String altsCrypto() {
    check();
    String value = ALTS_CRYPTO.toLowerCase(Locale.ROOT);
    if (!ALTS_CRYPTO_VALUES.contains(value)) {
      throw new IllegalArgumentException(
          ALTS_CRYPTO_PROPERTY + "=" + ALTS_CRYPTO + " is not one of " + ALTS_CRYPTO_VALUES);
    }
    return value;
  }

  private static String string(String property, String defaultValue) {
    String value = System.getProperty(property);
    if (value == null) {
      value = System.getenv(property.toUpperCase(Locale.ROOT).replace('.', '_')
          .replace("BUDGETBYTES", "BUDGET_BYTES")
          .replace("HOLDWHILEUNWRITABLE", "HOLD_WHILE_UNWRITABLE")
          .replace("MAXFRAMESIZE", "MAX_FRAME_SIZE"));
    }
    return value == null ? defaultValue : value.trim();
  }

  private static boolean bool(String property, boolean defaultValue) {
    String value = string(property, Boolean.toString(defaultValue)).toLowerCase(Locale.ROOT);
    if (!value.equals("true") && !value.equals("false")) {
      throw new IllegalArgumentException(property + "=" + value + " is not true or false");
    }
    return Boolean.parseBoolean(value);
  }

  private static int frameSize(String property, int defaultValue) {
    long value = positiveLong(property, defaultValue);
    if (value < MIN_FRAME_SIZE || value > MAX_FRAME_SIZE) {
      throw new IllegalArgumentException(
          property + "=" + value + " is not in [" + MIN_FRAME_SIZE + ", " + MAX_FRAME_SIZE + "]");
    }
    return (int) value;
  }

  private static long nonNegativeLong(String property, long defaultValue) {
    String value = string(property, Long.toString(defaultValue));
    try {
      long parsed = Long.parseLong(value);
      if (parsed >= 0) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // Fall through to the error below.
    }
    throw new IllegalArgumentException(property + "=" + value + " is not 0 or a positive number");
  }

  private static long positiveLong(String property, long defaultValue) {
    String value = string(property, Long.toString(defaultValue));
    try {
      long parsed = Long.parseLong(value);
      if (parsed > 0) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // Fall through to the error below.
    }
    throw new IllegalArgumentException(property + "=" + value + " is not a positive number");
  }
}
