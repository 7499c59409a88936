package io.pinless.alts;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.pinless.testing.Hex;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class RecordCipherTest {
  static java.util.stream.Stream<AesGcm> providers() {
    return Providers.all();
  }

  @ParameterizedTest
  @MethodSource("providers")
  void plainAesGcmMatchesNistAndIeeeVectors(AesGcm aes) throws GeneralSecurityException {
    JsonObject file = Hex.vectors("grpc-core_aes_gcm_test.json");
    int checked = 0;
    for (String set : new String[] {"nist", "ieee"}) {
      for (JsonElement e : file.getAsJsonArray(set)) {
        JsonObject v = e.getAsJsonObject();
        byte[] key = Hex.decode(v.get("key").getAsString());
        byte[] nonce = Hex.decode(v.get("nonce").getAsString());
        if (nonce.length != 12 || key.length != AesGcm.KEY_BYTES) {
          continue; // ALTS keys are 16 bytes and nonces 12; Conscrypt refuses other nonces.
        }
        byte[] aad = Hex.decode(v.get("aad").getAsString());
        byte[] plaintext = Hex.decode(v.get("plaintext").getAsString());
        byte[] sealed = Hex.decode(v.get("ciphertext_and_tag").getAsString());
        assertArrayEquals(sealed, aes.crypt(Cipher.ENCRYPT_MODE, key, nonce, aad, plaintext));
        assertArrayEquals(plaintext, aes.crypt(Cipher.DECRYPT_MODE, key, nonce, aad, sealed));
        checked++;
      }
    }
    assertTrue(checked >= 10, "checked " + checked);
  }

  @ParameterizedTest
  @MethodSource("providers")
  void rekeyAeadMatchesGrpcGoAndGrpcCoreVectors(AesGcm aes) throws GeneralSecurityException {
    int checked = 0;
    for (JsonElement e : Hex.vectors("grpc-go_aeadrekey_test.json").getAsJsonArray("vectors")) {
      checkRekey(aes, e.getAsJsonObject());
      checked++;
    }
    JsonObject core = Hex.vectors("grpc-core_aes_gcm_test.json");
    for (String set : new String[] {"rekey_nist", "rekey_ieee"}) {
      for (JsonElement e : core.getAsJsonArray(set)) {
        checkRekey(aes, e.getAsJsonObject());
        checked++;
      }
    }
    assertTrue(checked >= 24, "checked " + checked);
  }

  private static void checkRekey(AesGcm aes, JsonObject v) throws GeneralSecurityException {
    RecordCipher cipher =
        new RecordCipher(
            AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY,
            Hex.decode(v.get("key").getAsString()),
            aes);
    byte[] counter = Hex.decode(v.get("nonce").getAsString());
    byte[] aad = Hex.decode(v.get("aad").getAsString());
    byte[] plaintext = Hex.decode(v.get("plaintext").getAsString());
    byte[] sealed = Hex.decode(v.get("ciphertext_and_tag").getAsString());
    assertArrayEquals(sealed, cipher.crypt(Cipher.ENCRYPT_MODE, counter, aad, plaintext));
    assertArrayEquals(plaintext, cipher.crypt(Cipher.DECRYPT_MODE, counter, aad, sealed));
  }

  @ParameterizedTest
  @MethodSource("providers")
  void aes128UsesTheCounterAsNonce(AesGcm aes) throws GeneralSecurityException {
    int checked = 0;
    for (JsonElement e : Hex.vectors("grpc-go_aes128gcm_test.json").getAsJsonArray("vectors")) {
      JsonObject v = e.getAsJsonObject();
      RecordCipher cipher =
          new RecordCipher(
              AltsRecordProtocol.ALTSRP_GCM_AES128, Hex.decode(v.get("key").getAsString()), aes);
      byte[] counter = Hex.decode(v.get("counter").getAsString());
      byte[] plaintext = Hex.decode(v.get("plaintext").getAsString());
      byte[] sealed = Hex.decode(v.get("ciphertext_and_tag").getAsString());
      // Through the record path: NIO buffers, no AAD.
      ByteBuffer out = ByteBuffer.allocateDirect(plaintext.length + 16);
      cipher.seal(counter, new ByteBuffer[] {direct(plaintext)}, 1, out);
      assertArrayEquals(sealed, bytes(out.flip()));
      ByteBuffer back = ByteBuffer.allocateDirect(plaintext.length);
      cipher.open(counter, direct(sealed), back);
      assertArrayEquals(plaintext, bytes(back.flip()));
      checked++;
    }
    assertTrue(checked >= 4, "checked " + checked);
  }

  @ParameterizedTest
  @MethodSource("providers")
  void sealsAPlaintextGatheredFromManyBuffers(AesGcm aes) throws GeneralSecurityException {
    byte[] key = new byte[44];
    key[3] = 7;
    RecordCipher cipher = new RecordCipher(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, aes);
    byte[] plaintext = new byte[1000];
    for (int i = 0; i < plaintext.length; i++) {
      plaintext[i] = (byte) (i * 31);
    }
    byte[] counter = new byte[12];
    byte[] expected =
        new RecordCipher(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, aes)
            .crypt(Cipher.ENCRYPT_MODE, counter, new byte[0], plaintext);
    ByteBuffer[] pieces = {
      direct(java.util.Arrays.copyOfRange(plaintext, 0, 1)),
      ByteBuffer.wrap(java.util.Arrays.copyOfRange(plaintext, 1, 500)),
      direct(java.util.Arrays.copyOfRange(plaintext, 500, 1000))
    };
    ByteBuffer out = ByteBuffer.allocateDirect(1016);
    cipher.seal(counter, pieces, 3, out);
    assertArrayEquals(expected, bytes(out.flip()));
  }

  @ParameterizedTest
  @MethodSource("providers")
  void rekeyChangesKeyEvery65536Records(AesGcm aes) throws GeneralSecurityException {
    byte[] key = new byte[44];
    RecordCipher cipher = new RecordCipher(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, aes);
    byte[] plaintext = new byte[16];
    // Counters 0xffff and 0x10000 differ in byte 2, so their keys differ: a record sealed under
    // one must not open under the other even with the nonce mask of zero making the nonces
    // otherwise comparable.
    byte[] c1 = Hex.decode("ffff00000000000000000000");
    byte[] c2 = Hex.decode("000001000000000000000000");
    byte[] s1 = cipher.crypt(Cipher.ENCRYPT_MODE, c1, new byte[0], plaintext);
    byte[] s2 = cipher.crypt(Cipher.ENCRYPT_MODE, c2, new byte[0], plaintext);
    RecordCipher fresh =
        new RecordCipher(
            AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, key, aes);
    assertArrayEquals(s2, fresh.crypt(Cipher.ENCRYPT_MODE, c2, new byte[0], plaintext));
    assertArrayEquals(plaintext, fresh.crypt(Cipher.DECRYPT_MODE, c1, new byte[0], s1));
    assertThrows(
        AEADBadTagException.class,
        () -> fresh.crypt(Cipher.DECRYPT_MODE, c1, new byte[0], s2));
  }

  @ParameterizedTest
  @MethodSource("providers")
  void destroyedCipherRefusesWork(AesGcm aes) {
    RecordCipher cipher =
        new RecordCipher(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, new byte[44], aes);
    cipher.destroy();
    assertThrows(
        IllegalStateException.class,
        () -> cipher.crypt(Cipher.ENCRYPT_MODE, new byte[12], new byte[0], new byte[1]));
  }

  @org.junit.jupiter.api.Test
  void rejectsKeysOfTheWrongLength() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> new RecordCipher(AltsRecordProtocol.ALTSRP_GCM_AES128_REKEY, new byte[43], new AesGcm(null)));
    assertTrue(e.getMessage().contains("43"), e.getMessage());
    assertThrows(
        IllegalArgumentException.class,
        () -> new RecordCipher(AltsRecordProtocol.ALTSRP_GCM_AES128, new byte[44], new AesGcm(null)));
    assertEquals(16, AltsRecordProtocol.ALTSRP_GCM_AES128.keyLength());
  }

  static ByteBuffer direct(byte[] bytes) {
    ByteBuffer b = ByteBuffer.allocateDirect(bytes.length);
    b.put(bytes).flip();
    return b;
  }

  static byte[] bytes(ByteBuffer b) {
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }
}
