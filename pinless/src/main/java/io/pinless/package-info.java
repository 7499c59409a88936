/** pinless: a lean read path and the ALTS record protocol for grpc-java over Netty. */
package io.pinless;
