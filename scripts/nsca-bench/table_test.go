package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The table keeps each cell's least costly run, counts the losses of all
// runs, and judges issue 36's targets from the figures.
func TestBenchTable(t *testing.T) {
	r := func(w, d string, cpu, rate float64, sent, got uint64) *Result {
		return &Result{Workload: w, Daemon: d, CPUUsPerCheck: cpu, ChecksPerSec: rate, Sent: sent, Delivered: got}
	}
	x20 := "x20: XOR, 20 checks/conn, 2,000/s"
	x1 := "x1: XOR, 1 check/conn, 1,000/s"
	burst := r("burst: AES, 10,000 connections in 1 s", tOurs, 40, 9000, 10000, 10000)
	burst.LatencyP50Ms, burst.LatencyP99Ms = 0.5, 4
	floorBurst := r(burst.Workload, tFloor, 20, 9900, 10000, 10000)
	floorBurst.LatencyP99Ms = 2
	all := []*Result{
		r(x20, tOurs, 12, 2000, 100, 100), r(x20, tFloor, 5, 2000, 100, 100), r(x20, tOursW2, 13, 2000, 100, 100),
		r(x20, tOurs, 9, 1999, 100, 100), // the better run of ours
		r(x1, tOurs, 50, 1000, 50, 50), r(x1, tFloor, 30, 1000, 50, 50), r(x1, tOursW2, 70, 1000, 50, 50),
		r(x1, tStock, 90, 800, 50, 40),
		r("x1s: XOR, 1 check/conn, 300/s", tOurs, 60, 300, 10, 10),
		r("d3: 3DES, 1 check/conn, 300/s", tOurs, 150, 300, 10, 10),
		burst, floorBurst,
		r("ng-a: nsca-ng, 8 x 500", tOurs, 10, 5000, 10, 10), r("ng-a: nsca-ng, 8 x 500", tNG, 20, 5000, 10, 10),
	}
	var b bytes.Buffer
	printTable(&b, all, map[string]float64{cipherKey: 50000})
	out := b.String()
	for _, want := range []string{
		"| workload | ours | ours w2 | stock | nsca-ng-server | floor_server | delivered/sent | ours against |",
		"| XOR, 20 checks/conn, 2,000/s | 9.0 µs, 1,999/s | 13.0 µs, 2,000/s | - | - | 5.0 µs, 2,000/s | all | 1.80x floor_server |",
		"| stock 40/50 | 1.67x floor_server |",
		"| AES, 10,000 connections in 1 s | 40.0 µs, 9,000/s; 0.50 / 4.00 ms |",
		"2.00x floor_server, p99 2.00x |",
		"| XOR 20/conn paced: ours <= 2x floor | ours 9.0 µs, floor 5.0 µs: 1.80x | met    |",
		"| XOR 1/conn paced: ours <= 1.4x floor | ours 50.0 µs, floor 30.0 µs: 1.67x | missed |",
		"| ours w2 <= 1.15x ours w0, XOR 20/conn paced | w2 13.0 µs, w0 9.0 µs: 1.44x | missed |",
		"| 3DES 150 µs; 2 x 60.0 + 50.0 = 170 µs | met    |",
		"| ours 10,000/10,000, p99 4.00 ms; floor_server 10,000/10,000, p99 2.00 ms | met    |",
		"| nsca-ng (a), long sessions: ours <= nsca-ng-server | ours 10.0 µs, nsca-ng-server 20.0 µs: 0.50x | met    |",
		"| nsca-ng (b), a session per result: ours <= nsca-ng-server | not measured | n/a |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// A target's rounds pair the k-th run of one daemon with the k-th of the
// other; the verdict stays on the best runs, which here come from
// different rounds. (TestBenchTable's x20 has one floor run: no rounds.)
func TestTargetRounds(t *testing.T) {
	x20 := "x20: XOR, 20 checks/conn, 2,000/s"
	var all []*Result
	// w0, w2; the fourth round's w0 delivered nothing and pairs with no
	// other round's w2.
	for _, round := range [][2]float64{{60, 50}, {90, 100}, {0, 80}, {70, 40}} {
		all = append(all,
			&Result{Workload: x20, Daemon: tOurs, CPUUsPerCheck: round[0], Sent: 1, Delivered: 1},
			&Result{Workload: x20, Daemon: tOursW2, CPUUsPerCheck: round[1], Sent: 1, Delivered: 1})
	}
	var b bytes.Buffer
	printTable(&b, all, nil)
	want := "| ours w2 <= 1.15x ours w0, XOR 20/conn paced | w2 40.0 µs, w0 60.0 µs: 0.67x; rounds: median 0.83x (0.57-1.11x, 3 rounds) | met    |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("missing %q in\n%s", want, b.String())
	}
}

// Lines without ids get latencies by order: the k-th line read for the
// k-th check sent.
func TestLatencyByOrder(t *testing.T) {
	sent := new(times)
	for id, at := range []int64{100, 300, 200} {
		sent.set(uint64(id), at)
	}
	got := latencyByOrder(sent, 4, []int64{250, 150, 400})
	if want := []int64{50, 50, 100}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
