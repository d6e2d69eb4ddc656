// Package sink owns the destinations of check results: the local core's
// external command file (a FIFO or a regular file), its check_result_path
// spool and the alternate dump file, in stock nsca 2.10's formats; Icinga
// 2's REST API; and Gearman queues for mod_gearman. It also builds, from
// the configuration, every destination with its chain of fallbacks
// (destinations.go), which the emit stage runs.
//
// Each big sink is split by concern: icinga_config.go (settings, TLS),
// icinga_request.go (the request body), icinga_deliver.go (delivery,
// retries); gearman_config.go, gearman_seal.go (mod_gearman's
// encryption), gearman_job.go (the job body and its framing),
// gearman_deliver.go (the protocol exchange and failover).
package sink
