/** The one handler of a pinless connection end and the record stage interface it drives. */
package io.pinless.connection;
