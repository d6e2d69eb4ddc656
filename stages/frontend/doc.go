// Package frontend holds what the front ends (send_nsca's in stages/nsca,
// nsca-ng's in stages/nscang) share below their protocols: the accept
// step on a listening socket in Go's poller, listening with SO_REUSEPORT,
// the epoll sets their goroutines wait on, the allow list, and the gate
// that keeps new clients in the listen queue while the pipeline is full.
// It knows no protocol and no stage.
package frontend
