// Package icinga2 is the sink that posts check results to Icinga 2's REST
// API: its settings (config.go), the request body (request.go) and the
// delivery with its retries (deliver.go).
package icinga2
