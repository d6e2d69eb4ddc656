package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// sendNG is client w with the real nsca-ng send_nsca (--ng-client, run as
// `PROGRAM -c --ng-config`): one process, so one TLS session, per
// --checks-per-conn results given on its standard input, until the ids or
// the time run out. The results count as sent when the process starts
// (their latency includes its start and handshake); a process that fails
// counts as a failed write, and its results as sent.
func (r *run) sendNG(w int) {
	var in bytes.Buffer
	for {
		first, count := r.take()
		if count == 0 || !r.pace(first) {
			return
		}
		in.Reset()
		for id := first; id < first+count; id++ {
			in.WriteString(ngLine(id))
		}
		cmd := exec.Command(r.o.NGClient, "-c", r.o.NGConfig)
		cmd.Stdin = bytes.NewReader(in.Bytes())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		now := r.clock()
		for id := first; id < first+count; id++ {
			r.sent.set(id, now)
		}
		r.sentCount.Add(count)
		r.connections.Add(1)
		err := cmd.Run()
		if cmd.ProcessState != nil {
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				r.childCPU.Add(ru.Utime.Nano() + ru.Stime.Nano())
			}
		}
		if err != nil {
			r.failed.Add(1)
			r.noteErr(fmt.Errorf("client %d: %s: %v: %s", w, r.o.NGClient, err, bytes.TrimSpace(out.Bytes())))
			if cmd.ProcessState == nil {
				time.Sleep(10 * time.Millisecond) // it did not start: do not spin
			}
		}
	}
}

// ngLine is check id as nsca-ng's send_nsca reads it: host, service,
// return code and output separated by tabs, and ended by its default
// separator between results, ETB (^W: a newline would belong to the
// output).
func ngLine(id uint64) string {
	res := ResultFor(id)
	return res.Host + "\t" + res.Service + "\t" + strconv.Itoa(int(res.ReturnCode)) + "\t" + res.Output + "\x17"
}
