// Package counters owns what the daemon counts: the counters every stage
// updates with atomics (Stats, kept on the heap or in an Arena that a
// worker's supervisor reads in place), their copy for logs and reports
// (Snapshot, summed over worker processes by the supervisor), the
// statistics line, and the Prometheus metrics served from them. One table
// (table.go) lists what is reported and drives the snapshot, its sum over
// workers, the metrics and the statistics line's extras. It imports
// no pipeline package, so the process layer can sum and serve counters
// without knowing the pipeline.
package counters
