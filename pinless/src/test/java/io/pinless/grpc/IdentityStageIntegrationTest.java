package io.pinless.grpc;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;

/**
 * Every plaintext integration test again, with a test-only record stage ({@link IdentityStage})
 * on both ends: a new record stage needs one class and no wiring.
 */
class IdentityStageIntegrationTest extends PlaintextIntegrationTest {
  @Override
  ServerCredentials serverCredentials() {
    return NettyNegotiators.serverCredentials(IdentityStage::new);
  }

  @Override
  ChannelCredentials channelCredentials() {
    return NettyNegotiators.clientCredentials(IdentityStage::new);
  }
}
