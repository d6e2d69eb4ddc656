package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// The verdict: what arrived against what was sent, and the daemon's own
// accounting against itself.

// check prints what was sent and what arrived, and fails unless every good
// check arrived exactly once and received == emitted + dropped.
func (s *soak) check() error {
	dumpBytes, _ := os.ReadFile(s.dump)
	missing, dup := s.arrivals(string(dumpBytes))
	logText, _ := os.ReadFile(s.logPath)
	final := lastMatch(string(logText), `(?m)^.*(?:pipeline drained|stopped): (.*)$`)
	received := counter(final, `received=(\d+)`)
	emitted := counter(final, `report_success=(\d+)`)
	dropped := counter(final, `report_failed=(\d+)`)
	fmt.Printf("soak: %v, %d good clients x %d checks/conn, %d slowloris, %d garbage/wrong-password clients, nsca_workers=%d\n",
		s.duration, s.good, s.perConn, s.slow, s.garbage, s.workers)
	fmt.Printf("clients: checks sent=%d, failed connections=%d, slowloris connections=%d, garbage connections=%d\n",
		s.sent.Load(), s.sendErrs.Load(), s.slowConns.Load(), s.garbageConns.Load())
	fmt.Printf("arrived: fifo lines=%d, spool files=%d, dump lines=%d; good checks missing=%d duplicated=%d\n",
		len(s.fifoReader.lines), len(s.spoolReader.bodies), strings.Count(string(dumpBytes), "\n"), missing, dup)
	fmt.Printf("daemon: %s\n", final)
	fmt.Printf("accounting: received=%d emitted=%d dropped=%d: received %s emitted+dropped\n",
		received, emitted, dropped, map[bool]string{true: "==", false: "!="}[received == emitted+dropped])
	switch {
	case final == "":
		return fmt.Errorf("no final statistics line in %s", s.logPath)
	case missing > 0 || dup > 0:
		return fmt.Errorf("%d good checks missing, %d duplicated", missing, dup)
	case received != emitted+dropped:
		return fmt.Errorf("received %d != emitted %d + dropped %d", received, emitted, dropped)
	case s.sent.Load() == 0:
		return fmt.Errorf("no check was sent")
	}
	fmt.Println("soak: PASS")
	return nil
}

// arrivals counts the good checks that arrived nowhere and those that
// arrived more than once, over the FIFO, the spool and the dump file.
func (s *soak) arrivals(dump string) (missing, dup int) {
	seen := map[string]int{}
	idRe := regexp.MustCompile(`soak-id-(\d+)`)
	count := func(text string) {
		for _, m := range idRe.FindAllStringSubmatch(text, -1) {
			seen[m[1]]++
		}
	}
	for _, l := range s.fifoReader.lines {
		count(l)
	}
	for _, b := range s.spoolReader.bodies {
		count(b)
	}
	count(dump)
	s.sentIDs.Range(func(k, _ any) bool {
		switch seen[strconv.FormatInt(k.(int64), 10)] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
		return true
	})
	return missing, dup
}

// lastMatch is the first group of expr's last match in text, "" if none:
// the daemon's last statistics line is its final count.
func lastMatch(text, expr string) string {
	all := regexp.MustCompile(expr).FindAllStringSubmatch(text, -1)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1][1]
}

// counter is the number expr's group matches in line, -1 when absent, so
// that a missing counter cannot pass for a balanced zero.
func counter(line, expr string) int64 {
	m := regexp.MustCompile(expr).FindStringSubmatch(line)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
