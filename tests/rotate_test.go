package tests

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Rotation of the alternate dump file (issue 25): logrotate run on it
// while results arrive, the way cron runs it. Helpers here are prefixed
// rot.

// rotLogrotate is the logrotate binary (Debian's logrotate package).
const rotLogrotate = "/usr/sbin/logrotate"

// rotShipped is the logrotate snippet the .deb installs.
const rotShipped = "../conf/debian/nsca-fast.logrotate"

// rotSender sends results with unique ids through send_nsca from several
// clients until stopped, and remembers the ids send_nsca reported sent.
type rotSender struct {
	mu   sync.Mutex
	sent []string
	errs []string
	stop chan struct{}
	wg   sync.WaitGroup
}

// rotStart starts clients senders of batches of per results each.
func rotStart(t *testing.T, cl Client, port, clients, per int) *rotSender {
	s := &rotSender{stop: make(chan struct{})}
	for c := range clients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for seq := 0; ; seq += per {
				select {
				case <-s.stop:
					return
				default:
				}
				var in strings.Builder
				var ids []string
				for i := range per {
					id := fmt.Sprintf("rot-%d-%06d", c, seq+i)
					ids = append(ids, id)
					fmt.Fprintf(&in, "rot-host\tc%d\t0\tid=%s\x17", c, id)
				}
				out, err := cl.run(t, port, in.String())
				s.mu.Lock()
				if err != nil || !strings.Contains(out, fmt.Sprintf("%d data packet(s) sent", per)) {
					s.errs = append(s.errs, fmt.Sprintf("%v: %s", err, out))
				} else {
					s.sent = append(s.sent, ids...)
				}
				s.mu.Unlock()
			}
		}()
	}
	return s
}

// Stop ends the clients and returns the ids sent.
func (s *rotSender) Stop(t *testing.T) []string {
	close(s.stop)
	s.wg.Wait()
	if len(s.errs) > 0 {
		t.Errorf("%d send_nsca runs failed; the first: %s", len(s.errs), s.errs[0])
	}
	return s.sent
}

var rotID = regexp.MustCompile(`^\[\d+\] PROCESS_SERVICE_CHECK_RESULT;rot-host;c\d+;0;id=(rot-\d+-\d+)$`)

// rotCollect reads the dump file and every rotated copy of it beside it
// (dump.N, dump.N.gz) and counts each id; bad lists the lines that are not
// whole results.
func rotCollect(t *testing.T, dump string) (count map[string]int, files []string, bad []string) {
	t.Helper()
	count = map[string]int{}
	paths, _ := filepath.Glob(dump + "*")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
		text := string(data)
		if text != "" && !strings.HasSuffix(text, "\n") {
			bad = append(bad, filepath.Base(p)+": ends without a newline")
		}
		lines := completeLines(text)
		files = append(files, fmt.Sprintf("%s: %d", filepath.Base(p), len(lines)))
		for _, l := range lines {
			m := rotID.FindStringSubmatch(l)
			if m == nil {
				bad = append(bad, filepath.Base(p)+": "+abbrev(l))
				continue
			}
			count[m[1]]++
		}
	}
	return count, files, bad
}

// rotConfig writes a logrotate configuration for dump: the shipped snippet
// with its paths replaced by dump (how "shipped"), or a stanza of the
// given directives.
func rotConfig(t *testing.T, dump, how string) string {
	t.Helper()
	var text string
	if how == "shipped" {
		b, err := os.ReadFile(rotShipped)
		if err != nil {
			t.Fatal(err)
		}
		paths := regexp.MustCompile(`(?m)^/\S+( /\S+)* \{$`)
		if !paths.Match(b) {
			t.Fatalf("%s has no line of paths opening a stanza", rotShipped)
		}
		text = paths.ReplaceAllString(string(b), dump+" {")
	} else {
		text = dump + " {\n\trotate 100\n\tnodateext\n\tmissingok\n\t" + how + "\n}\n"
	}
	path := filepath.Join(filepath.Dir(dump), "logrotate.conf")
	writeFile(t, path, text, 0o644)
	return path
}

// TestRotateDumpFile: the dump file is rotated five times by logrotate
// while two worker processes append results to it: with mv (the daemon
// creates the file again, or logrotate does), with the shipped snippet (mv,
// then compress at once, no delaycompress), and with copytruncate. Every result sent is in
// exactly one of the files, whole. copytruncate may lose what is written
// between its copy and its truncation (logrotate's own caveat): that is
// only reported, never a duplicate or a broken line.
func TestRotateDumpFile(t *testing.T) {
	needTool(t, rotLogrotate, "logrotate")
	for _, how := range []string{"nocreate", "create 0644 root root", "shipped", "copytruncate"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			dump := filepath.Join(dir, "nsca.dump")
			d := startDaemon(t, relCfg(Config{"command_file": makeFIFO(t, dir), "alternate_dump_file": dump, "nsca_workers": "2"}))
			clientCfg := filepath.Join(dir, "send_nsca.cfg")
			writeFile(t, clientCfg, "password="+relPassword+"\nencryption_method=1\n", 0o600)
			conf := rotConfig(t, dump, how)
			state := filepath.Join(dir, "logrotate.state")

			s := rotStart(t, Client{CfgPath: clientCfg}, d.Port, 4, 25)
			for range 5 {
				time.Sleep(400 * time.Millisecond)
				if out, err := exec.Command(rotLogrotate, "-f", "-s", state, conf).CombinedOutput(); err != nil {
					t.Errorf("logrotate: %v\n%s", err, out)
				}
			}
			time.Sleep(400 * time.Millisecond)
			sent := s.Stop(t)
			d.Stop()

			count, files, bad := rotCollect(t, dump)
			missing, twice := 0, 0
			for _, id := range sent {
				switch n := count[id]; {
				case n == 0:
					missing++
				case n > 1:
					twice++
				}
				delete(count, id)
			}
			t.Logf("%s: %d results sent; files %v; missing %d, in two files %d, never sent %d, broken lines %d",
				how, len(sent), files, missing, twice, len(count), len(bad))
			if len(files) < 5 {
				t.Errorf("%d files after five rotations: %v", len(files), files)
			}
			if twice > 0 || len(count) > 0 || len(bad) > 0 {
				t.Errorf("%d results in two files, %d never sent; broken lines: %q", twice, len(count), bad)
			}
			if missing > 0 && how != "copytruncate" {
				t.Errorf("%d of %d results are in none of the files", missing, len(sent))
			}
		})
	}
}

// TestRotateSIGUSR1: SIGUSR1, which ends a process by default, makes the
// daemon (each worker, through the supervisor) open its files anew; it
// goes on serving, and the results sent after it reach the dump file.
func TestRotateSIGUSR1(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run("nsca_workers="+strconv.Itoa(workers), func(t *testing.T) {
			dir := t.TempDir()
			dump := filepath.Join(dir, "nsca.dump")
			d := startDaemon(t, relCfg(Config{"command_file": makeFIFO(t, dir), "alternate_dump_file": dump,
				"nsca_workers": strconv.Itoa(workers)}))
			cl := Client{Password: relPassword, Method: 1}
			cl.send(t, d.Port, "usr1-host\tbefore\t0\tbefore\n", 1)
			waitFileLines(t, dump, 1)
			// A hard link keeps the path naming the same file: only the
			// signal makes the daemon open it anew.
			if err := os.Link(dump, dump+".old"); err != nil {
				t.Fatal(err)
			}
			d.Signal(syscall.SIGUSR1)
			d.waitLog(regexp.MustCompile(`SIGUSR1: `), 10*time.Second)
			time.Sleep(200 * time.Millisecond)
			if d.p.hasExited() {
				t.Fatalf("the daemon exited on SIGUSR1: %v\n%s", d.p.state, d.Stderr())
			}
			for i := range 4 {
				cl.send(t, d.Port, fmt.Sprintf("usr1-host\tafter%d\t0\tafter\n", i), 1)
			}
			if lines := waitFileLines(t, dump, 5); len(lines) != 5 {
				t.Errorf("the dump file has %d lines, want 5", len(lines))
			}
		})
	}
}
