// Package proc is nsca_fast's process model: worker processes behind
// SO_REUSEPORT listeners and their supervisor, detaching like stock nsca,
// the pid file, dropping privileges, systemd's socket activation and
// sd_notify, and syslog. It has no protocol logic; the pipeline that runs in
// each process is package stages.
package proc
