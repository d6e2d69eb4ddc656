// Package emit is the pipeline's last stage: it batches validated results
// and hands every batch to every destination, each with its own bounded
// queue and goroutine (emit.go; the local destination alone has only its
// goroutine, which batches off the stage's input), through a chain of
// sinks where a result goes to the first that takes it (chain.go). It
// also builds, from the configuration, every destination with its
// fallbacks and durable queues (destinations.go, queuedirs.go), the one
// place that knows every engine:
// the local sinks of package sink, Icinga 2 (icinga2), Gearman (gearman),
// the durable wrapper (durable); and it opens them for --replay (replay).
//
// It has the shape of every stage (package stages/stage) and does not
// import package stages: the counters, the log and where it registers its
// queues come in the stage.Env that Start is given, as for the others.
package emit
