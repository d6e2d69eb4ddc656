// Package sink declares what every destination of check results is: Sink,
// the Item it is given, and the optional capabilities (Prober, Located,
// Holder, Refuser, Marker, Dialected) by which a sink says what else it can
// do, so the emit stage, a replay and the durable wrapper ask for them by
// type assertion and never by concrete type. It also holds the local sinks,
// in stock nsca 2.10's formats: the core's external command file (a FIFO or
// a regular file), its check_result_path spool and the alternate dump file.
// The remote engines each have a package of their own beside this one.
package sink
