/**
 * grpc-java credentials that put the pinless pipeline under {@code NettyChannelBuilder} and
 * {@code NettyServerBuilder}, and marshallers that hand received messages over as views of their
 * buffers; the only package that touches grpc-netty's internal API.
 */
package io.pinless.grpc;
