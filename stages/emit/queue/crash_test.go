package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test re-executes the test binary as a child that runs a queue
// until it is killed; crashEnv carries "dir fsync gen".
const crashEnv = "NSCA_QUEUE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(crashEnv); v != "" {
		crashChild(v)
		return
	}
	os.Exit(m.Run())
}

// crashKey orders records as appended: generation (child), then sequence.
func crashKey(gen, n uint64) uint64 { return gen<<32 | n }

func crashRecord(gen, n uint64) []byte {
	return fmt.Appendf(nil, "%d:%d %s", gen, n, strings.Repeat("p", 280))
}

// crashChild appends continuously and delivers (peeks and acks) at the
// same time, reporting on stdout, one write per line:
//
//	s GEN FIRST LAST  records GEN:FIRST..LAST were appended (Append returned)
//	d KEY...          these records were handed to the "engine", about to be acked
//	a                 the records of the last d line are acked (Ack returned)
func crashChild(v string) {
	f := strings.Fields(v)
	fs, _ := ParseFsync(f[1])
	gen, _ := strconv.ParseUint(f[2], 10, 64)
	var mu sync.Mutex
	say := func(s string) {
		mu.Lock()
		os.Stdout.WriteString(s)
		mu.Unlock()
	}
	q, err := Open(f[0], Options{Fsync: fs, SegmentBytes: 32 << 10, MaxBytes: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go func() {
		for k := 0; ; k++ {
			recs, err := q.Peek(1 + k%64)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if len(recs) == 0 {
				<-q.Ready()
				continue
			}
			n := len(recs)
			if k%5 == 0 {
				n /= 2 // the engine took only some
			}
			if n == 0 {
				continue
			}
			var b strings.Builder
			b.WriteString("d")
			for _, r := range recs[:n] {
				key, _, _ := strings.Cut(string(r.Data), " ")
				b.WriteString(" " + key)
			}
			say(b.String() + "\n")
			if err := q.Ack(n); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			say("a\n")
			// Some generations deliver slowly, so a backlog builds up
			// (to MaxBytes) and is killed with it.
			time.Sleep(time.Duration(gen%3) * 500 * time.Microsecond)
		}
	}()
	var seq uint64
	for i := 0; ; i++ {
		batch := make([][]byte, 1+i%16)
		for j := range batch {
			batch[j] = crashRecord(gen, seq+uint64(j))
		}
		n, err := q.Append(batch...)
		if n > 0 {
			say(fmt.Sprintf("s %d %d %d\n", gen, seq, seq+uint64(n)-1))
			seq += uint64(n)
		}
		if errors.Is(err, ErrFull) {
			time.Sleep(time.Millisecond)
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// crashLedger follows what the children reported.
type crashLedger struct {
	synced    map[uint64]bool
	confirmed map[uint64]bool // acked, and the child said so
	delivered map[uint64]int
	maxNew    uint64 // the highest key delivered for the first time
	ackedDup  int    // deliveries of a record after its ack was confirmed
	dups      int
	order     []string
}

func parseKey(s string) (uint64, error) {
	g, n, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("bad key %q", s)
	}
	gen, err1 := strconv.ParseUint(g, 10, 32)
	seq, err2 := strconv.ParseUint(n, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad key %q", s)
	}
	return crashKey(gen, seq), nil
}

// deliver notes one delivery batch, in order; ack confirms it.
func (l *crashLedger) deliver(keys []uint64, ack bool) {
	for _, k := range keys {
		if l.confirmed[k] {
			l.ackedDup++
		}
		if l.delivered[k] > 0 {
			l.dups++
		} else {
			if k < l.maxNew {
				l.order = append(l.order, fmt.Sprintf("%x first delivered after %x", k, l.maxNew))
			}
			l.maxNew = max(l.maxNew, k)
		}
		l.delivered[k]++
	}
	if ack {
		for _, k := range keys {
			l.confirmed[k] = true
		}
	}
}

func (l *crashLedger) read(t *testing.T, out []byte) {
	t.Helper()
	var last []uint64
	lines := bytes.Split(out, []byte("\n"))
	for i, line := range lines {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			if i != len(lines)-1 {
				t.Fatalf("empty line %d", i)
			}
			continue
		}
		switch f[0] {
		case "s":
			gen, _ := strconv.ParseUint(f[1], 10, 32)
			a, _ := strconv.ParseUint(f[2], 10, 32)
			b, _ := strconv.ParseUint(f[3], 10, 32)
			for n := a; n <= b; n++ {
				l.synced[crashKey(gen, n)] = true
			}
		case "d":
			last = last[:0]
			for _, s := range f[1:] {
				k, err := parseKey(s)
				if err != nil {
					t.Fatal(err)
				}
				last = append(last, k)
			}
			l.deliver(last, false)
		case "a":
			for _, k := range last {
				l.confirmed[k] = true
			}
			last = last[:0]
		default:
			t.Fatalf("bad line %q", line)
		}
	}
}

func TestCrash(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range []Fsync{FsyncNever, FsyncBatch, FsyncAlways} {
		t.Run(fs.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := &crashLedger{synced: map[uint64]bool{}, confirmed: map[uint64]bool{}, delivered: map[uint64]int{}}
			const rounds = 6
			for gen := 1; gen <= rounds; gen++ {
				var out, errOut bytes.Buffer
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", crashEnv, dir, fs, gen))
				cmd.Stdout, cmd.Stderr = &out, &errOut
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Duration(5+rand.IntN(300)) * time.Millisecond)
				if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
					t.Fatalf("child ended by itself: %v, %s", err, errOut.Bytes())
				}
				l.read(t, out.Bytes())
			}
			// The parent drains what is left.
			q := open(t, dir, Options{Fsync: fs, SegmentBytes: 32 << 10, MaxBytes: 1 << 20})
			st := q.Stats()
			for {
				recs, err := q.Peek(100)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) == 0 {
					break
				}
				keys := make([]uint64, len(recs))
				for i, r := range recs {
					s, _, _ := strings.Cut(string(r.Data), " ")
					if keys[i], err = parseKey(s); err != nil {
						t.Fatal(err)
					}
				}
				l.deliver(keys, true)
				if err := q.Ack(len(recs)); err != nil {
					t.Fatal(err)
				}
			}
			q.Close()
			lost := 0
			for k := range l.synced {
				if l.delivered[k] == 0 {
					lost++
				}
			}
			t.Logf("%d rounds: %d records synced, %d delivered, %d redelivered (unacked at the kill), %d left for the last open, %d corrupt regions found by it",
				rounds, len(l.synced), len(l.delivered), l.dups, st.Records, st.Corrupt)
			if lost > 0 || l.ackedDup > 0 || len(l.order) > 0 {
				t.Fatalf("lost %d synced records, %d acked records delivered again, order: %v", lost, l.ackedDup, l.order)
			}
			if len(l.synced) == 0 {
				t.Fatal("nothing appended")
			}
		})
	}
}
