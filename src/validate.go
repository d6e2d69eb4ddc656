package main

import (
	"nsca_fast/conf"
	"nsca_fast/stages"
)

// validate is the one check of a loaded configuration beyond its options
// (which loadConfig checks): what this machine must provide (users, groups,
// nsca_chroot, pid_file's directory, server_address, the sinks' paths and
// key files as nsca_user will use them) and what the pipeline needs (an
// engine for the method, loadable certificates). --check-config runs it,
// every start runs it before anything is bound, and a supervisor runs it
// before a reload starts new workers, so that a configuration the check
// passes is one the daemon starts with, and each refusal names FILE:LINE.
func validate(cfg *conf.Config, start conf.Start) error {
	if err := cfg.CheckSystem(start); err != nil {
		return err
	}
	return stages.Check(cfg)
}
