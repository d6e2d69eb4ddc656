// Package replay is --replay: it reads a dump file, a spool directory or a
// durable queue directory and delivers every result to the sinks it is
// given (package emit opens those of a configuration), reporting what each
// took and what was left.
package replay
