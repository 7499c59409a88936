package io.pinless.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.pinless.testing.TestCertificates;
import java.security.cert.X509Certificate;
import org.junit.jupiter.api.Test;

class TlsAuthorityTest {
  @Test
  void namesAndAddressesInTheCertificateAreAllowedWithOrWithoutAPort() throws Exception {
    X509Certificate cert =
        TestCertificates.server("api.example.com", "127.0.0.1", "::1").certificate();
    assertTrue(TlsAuthority.allows(cert, "api.example.com"));
    assertTrue(TlsAuthority.allows(cert, "API.Example.com.:443"));
    assertTrue(TlsAuthority.allows(cert, "127.0.0.1:8443"));
    assertTrue(TlsAuthority.allows(cert, "[::1]:443"));
    assertTrue(TlsAuthority.allows(cert, "0:0:0:0:0:0:0:1"));
    assertFalse(TlsAuthority.allows(cert, "example.com"));
    assertFalse(TlsAuthority.allows(cert, "other.example.com:443"));
    assertFalse(TlsAuthority.allows(cert, "127.0.0.2"));
    // A name that is the address's text is not the address.
    assertFalse(TlsAuthority.allows(TestCertificates.server("localhost").certificate(), "127.0.0.1"));
  }

  @Test
  void aWildcardCoversExactlyOneLeftmostLabel() throws Exception {
    X509Certificate cert = TestCertificates.server("*.example.com").certificate();
    assertTrue(TlsAuthority.allows(cert, "a.example.com"));
    assertFalse(TlsAuthority.allows(cert, "a.b.example.com"));
    assertFalse(TlsAuthority.allows(cert, "example.com"));
    assertFalse(TlsAuthority.allows(TestCertificates.server("*.com").certificate(), "example.com"));
  }

  @Test
  void hostOfAnAuthority() {
    assertEquals("localhost", TlsAuthority.hostOf("localhost:443"));
    assertEquals("::1", TlsAuthority.hostOf("[::1]:50051"));
    assertEquals("::1", TlsAuthority.hostOf("::1"));
    assertEquals("example.com", TlsAuthority.hostOf("example.com"));
  }

  @Test
  void checkRefusesAMissingOrMismatchedLeaf() throws Exception {
    X509Certificate cert = TestCertificates.server("api.example.com").certificate();
    assertEquals(io.grpc.Status.Code.OK, TlsAuthority.check(cert, "api.example.com:443").getCode());
    assertEquals(io.grpc.Status.Code.UNAVAILABLE,
        TlsAuthority.check(cert, "other.example.com").getCode());
    assertEquals(io.grpc.Status.Code.UNAVAILABLE,
        TlsAuthority.check(null, "api.example.com").getCode());
  }
}
