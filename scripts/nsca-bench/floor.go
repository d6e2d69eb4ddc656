package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/cgo/mcrypt"
	"nsca_fast/stages/codec"
)

// `nsca-bench floor ALGORITHM N` measures what BenchmarkDecryptFrom
// measures (mcrypt DecryptFrom of one 4304-byte packet, the daemon's
// decryption call) as CPU time of the calling thread rather than wall time,
// so that other load on the machine does not inflate it. It prints
// "FloorCPU/ALGORITHM <cpu ns per packet> ns/op (wall <ns> ns/op)".
func floorMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nsca-bench floor ALGORITHM N")
		return 2
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "nsca-bench floor: N must be a positive number")
		return 2
	}
	cpu, wall, err := floor(args[0], n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca-bench floor: %v\n", err)
		return 1
	}
	fmt.Printf("FloorCPU/%s %d %.0f ns/op (wall %.0f ns/op)\n", args[0], n, cpu, wall)
	return 0
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func floor(alg string, n int) (cpuNs, wallNs float64, err error) {
	m, err := mcrypt.Open(alg)
	if err != nil {
		return 0, 0, err
	}
	defer m.Close()
	if err := m.Init([]byte("bench-password"), make([]byte, codec.IVSize)); err != nil {
		return 0, 0, err
	}
	r := rand.NewChaCha8([32]byte{1})
	reg := make([]byte, m.IVSize())
	pkt := make([]byte, codec.Size)
	r.Read(reg)
	r.Read(pkt)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m.DecryptFrom(reg, pkt) // warm up
	c0, w0 := threadCPU(), time.Now()
	for range n {
		m.DecryptFrom(reg, pkt)
	}
	c1, w1 := threadCPU(), time.Now()
	return float64(c1-c0) / float64(n), float64(w1.Sub(w0)) / float64(n), nil
}
