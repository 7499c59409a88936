/**
 * grpc-java credentials that put the pinless pipeline under {@code NettyChannelBuilder} and
 * {@code NettyServerBuilder}, transport providers that do it for gRPC's registries, and
 * marshallers that hand received messages over as views of their buffers; the only package that
 * touches grpc-netty's internal API.
 */
package io.pinless.grpc;
