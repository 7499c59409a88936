/**
 * grpc-java credentials that put the pinless pipeline under {@code NettyChannelBuilder} and
 * {@code NettyServerBuilder}; the only package that touches grpc-netty's internal API.
 */
package io.pinless.grpc;
