// Package gearman is the sink that submits check results as background
// jobs for mod_gearman through a Gearman job server: its settings
// (config.go), mod_gearman's encryption (seal.go), the job body and its
// framing (job.go), the protocol exchange and failover (deliver.go).
package gearman
