// Package durable is the wrapper that puts a durable disk queue (package
// queue) in front of a remote sink, so that what the engine cannot take at
// once survives restarts and kill -9 and is delivered in order later;
// adopt.go takes over the queues of worker slots that no longer run.
package durable
