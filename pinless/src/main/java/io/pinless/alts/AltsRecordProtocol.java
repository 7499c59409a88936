package io.pinless.alts;

/**
 * The ALTS record protocols pinless speaks. Each names its AES-GCM key schedule and how many
 * records one direction may send before its counter overflows.
 */
public enum AltsRecordProtocol {
  /** AES-128-GCM with a fixed 16-byte key; the counter is the nonce; 2^40 records. */
  ALTSRP_GCM_AES128(16, 5),
  /**
   * AES-128-GCM with a key derived every 2^16 records from a 32-byte KDF key, and the nonce
   * masked by 12 more key bytes (44 in all); 2^64 records. Every handshaker negotiates this one.
   */
  ALTSRP_GCM_AES128_REKEY(44, 8);

  private final int keyLength;
  private final int counterBytes;

  AltsRecordProtocol(int keyLength, int counterBytes) {
    this.keyLength = keyLength;
    this.counterBytes = counterBytes;
  }

  /** The number of key bytes this protocol uses (16, or 44 for the rekey protocol). */
  public int keyLength() {
    return keyLength;
  }

  /** How many low bytes of the 12-byte counter count records before it overflows (5 or 8). */
  int counterBytes() {
    return counterBytes;
  }
}
