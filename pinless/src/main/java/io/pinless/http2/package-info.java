/** HTTP/2 on the read path: whole frames for grpc-netty, DATA payloads as slices, no copies. */
package io.pinless.http2;
