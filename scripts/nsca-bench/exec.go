package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// runExecClient sends the load with a generator that is not nsca-bench
// (scripts/nsca-load.c: one thread per client, each packet encrypted with
// libmcrypt just before it is sent), while nsca-bench plays the monitoring
// core and measures the server. It returns what the program reports on its
// last line ("sent N failed F connections C") and the CPU time it used.
func runExecClient(o Options, c Cipher, log *os.File) (sent, failed, conns uint64, cpu time.Duration, err error) {
	alg := c.Algorithm
	if c.Method == 1 {
		alg = "xor"
	}
	// Its sockets time out after 10 s; a program that still runs long after
	// its duration is stuck, and killed.
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.ExecClient, o.Host, strconv.Itoa(o.Port), alg, o.Password,
		strconv.Itoa(o.Conns), strconv.Itoa(o.ChecksPerConn), strconv.FormatFloat(o.Duration.Seconds(), 'f', 3, 64),
		strconv.FormatFloat(o.Rate, 'f', 1, 64))
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("--exec-client %s: %w", o.ExecClient, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	last := string(lines[len(lines)-1])
	if _, err := fmt.Sscanf(last, "sent %d failed %d connections %d", &sent, &failed, &conns); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("--exec-client %s: last line %q: %w", o.ExecClient, last, err)
	}
	return sent, failed, conns, cpu, nil
}
