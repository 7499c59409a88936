package io.pinless.grpc;

import io.grpc.Status;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.security.cert.Certificate;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.Collection;
import java.util.List;
import java.util.Locale;

/**
 * Whether a TLS server's certificate is valid for an authority a call names itself ({@code
 * CallOptions.withAuthority}): the certificate's subject alternative names, DNS names with a
 * wildcard allowed only as the whole leftmost label (RFC 6125), IP addresses compared as
 * addresses; the handshake verifies the chain. gRPC asks once per authority and connection.
 * A mismatch is logged, and fails the call when grpc-java's {@code
 * GRPC_ENABLE_PER_RPC_AUTHORITY_CHECK} is set.
 */
final class TlsAuthority {
  /** Subject alternative name types (RFC 5280): dNSName and iPAddress. */
  private static final int DNS_NAME = 2;
  private static final int IP_ADDRESS = 7;

  private TlsAuthority() {}

  /**
   * OK if {@code leaf}, the first certificate of the chain the handshake verified (null when the
   * peer presented none), is valid for {@code authority}.
   */
  static Status check(Certificate leaf, String authority) {
    try {
      if (leaf instanceof X509Certificate && allows((X509Certificate) leaf, authority)) {
        return Status.OK;
      }
    } catch (CertificateParsingException e) {
      return refused(authority).withCause(e);
    }
    return refused(authority);
  }

  private static Status refused(String authority) {
    return Status.UNAVAILABLE.withDescription(
        "the server's certificate is not valid for the call's authority '" + authority + "'");
  }

  /** Whether {@code leaf} names the host of {@code authority} (host, host:port or [v6]:port). */
  static boolean allows(X509Certificate leaf, String authority)
      throws CertificateParsingException {
    String host = hostOf(authority);
    InetAddress address = literalAddress(host);
    Collection<List<?>> names = leaf.getSubjectAlternativeNames();
    if (names == null) {
      return false;
    }
    for (List<?> name : names) {
      int type = (Integer) name.get(0);
      if (address == null && type == DNS_NAME && dnsMatches(host, (String) name.get(1))) {
        return true;
      }
      if (address != null && type == IP_ADDRESS
          && address.equals(literalAddress((String) name.get(1)))) {
        return true;
      }
    }
    return false;
  }

  /** The host of an authority, without a port and without an IPv6 literal's brackets. */
  static String hostOf(String authority) {
    String host = authority;
    int bracket = host.lastIndexOf(']');
    int colon = host.lastIndexOf(':');
    if (host.startsWith("[")) {
      return host.substring(1, bracket < 0 ? host.length() : bracket);
    }
    if (colon > 0 && host.indexOf(':') == colon) {
      host = host.substring(0, colon); // host:port (a bare IPv6 literal has several colons)
    }
    return host;
  }

  /** The address {@code host} spells as an IP literal, or null if it is a name. */
  private static InetAddress literalAddress(String host) {
    boolean v4 = !host.isEmpty() && host.chars().allMatch(c -> c == '.' || (c >= '0' && c <= '9'));
    if (!v4 && host.indexOf(':') < 0) {
      return null;
    }
    try {
      return InetAddress.getByName(host); // a literal: no lookup
    } catch (UnknownHostException e) {
      return null;
    }
  }

  private static boolean dnsMatches(String host, String pattern) {
    String h = trimDot(host.toLowerCase(Locale.ROOT));
    String p = trimDot(pattern.toLowerCase(Locale.ROOT));
    if (!p.startsWith("*.")) {
      return h.equals(p);
    }
    String suffix = p.substring(1); // ".example.com"
    int firstDot = h.indexOf('.');
    return suffix.indexOf('.', 1) > 0 && firstDot > 0 && h.substring(firstDot).equals(suffix);
  }

  private static String trimDot(String name) {
    return name.endsWith(".") ? name.substring(0, name.length() - 1) : name;
  }
}
