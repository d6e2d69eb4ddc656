package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listensOn says whether the process pid, or one of its descendants, holds
// a socket listening on TCP port port. waitPort needs it because a port
// found free can be taken by another test's daemon before ours binds it:
// that one answers with an init packet too, while ours exits on "address
// already in use", and a test would then talk to the wrong daemon.
func listensOn(pid, port int) bool {
	inodes := listeningInodes(port)
	if len(inodes) == 0 {
		return false
	}
	seen := map[int]bool{}
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[0]
		todo = todo[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if holdsSocket(p, inodes) {
			return true
		}
		todo = append(todo, children(p)...)
	}
	return false
}

// listeningInodes are the socket inodes in state LISTEN on port, from
// /proc/net/tcp and tcp6.
func listeningInodes(port int) map[string]bool {
	want := fmt.Sprintf(":%04X", port)
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
				continue
			}
			out[fields[9]] = true
		}
	}
	return out
}

// holdsSocket says whether pid has a descriptor on one of the inodes.
func holdsSocket(pid int, inodes map[string]bool) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			return true
		}
	}
	return false
}

// children are pid's child processes.
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
