package tests

// The Gearman sink end to end: the real send_nsca sends to the daemon, the
// daemon submits to a real gearmand, and a worker of this test takes the
// jobs off the result queue as mod_gearman's NEB module would, opening
// them with mod_gearman's scheme (gearman.Open).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"nsca_fast/stages/emit/gearman"
)

const gmGearmandPath = "/usr/sbin/gearmand"

// gmGearmand is a job server started by a test on loopback.
type gmGearmand struct {
	addr string
	port int
	p    *proc
	log  string
}

// gmStartGearmand starts gearmand on 127.0.0.1:port (a free port when 0)
// and waits until it accepts. Cleanup ends it by its PID. Without gearmand
// the test is skipped, except when CI is set: there it fails.
func gmStartGearmand(t *testing.T, port int) *gmGearmand {
	t.Helper()
	needTool(t, gmGearmandPath, "gearman-job-server")
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			p = freePort(t)
		}
		g := &gmGearmand{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), port: p,
			log: filepath.Join(dir, fmt.Sprintf("gearmand-%d.log", attempt))}
		cmd := exec.Command(gmGearmandPath, "--listen=127.0.0.1", "--port="+strconv.Itoa(p), "--threads=1",
			"--log-file="+g.log, "--pid-file="+filepath.Join(dir, "gearmand.pid"))
		g.p = mustStart(t, "gearmand", cmd)
		t.Cleanup(g.stop)
		if waitFor(startTimeout, func() bool {
			if g.p.hasExited() {
				return true
			}
			c, err := net.DialTimeout("tcp", g.addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err == nil
		}) && !g.p.hasExited() {
			return g
		}
		g.stop()
		if attempt < 3 && port == 0 {
			continue // the free port was taken meanwhile
		}
		t.Fatalf("gearmand on %s did not accept connections within %v:\n%s", g.addr, startTimeout, readFile(t, g.log))
	}
}

func (g *gmGearmand) stop() { g.p.terminate(5 * time.Second) }

func gmFrame(typ uint32, args ...string) []byte {
	b := []byte("\x00REQ")
	b = binary.BigEndian.AppendUint32(b, typ)
	data := strings.Join(args, "\x00")
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// gmWorker takes jobs off a queue as mod_gearman's result thread does:
// CAN_DO, then GRAB_JOB until NO_JOB, completing every job so that gearmand
// forgets it.
type gmWorker struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func gmNewWorker(t *testing.T, addr, queue string) *gmWorker {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &gmWorker{t: t, c: c, r: bufio.NewReader(c)}
	w.send(gmFrame(1, queue)) // CAN_DO
	return w
}

func (w *gmWorker) send(b []byte) {
	w.t.Helper()
	w.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.c.Write(b); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
}

// grab returns the next job's body, or false when the queue is empty.
func (w *gmWorker) grab() ([]byte, bool) {
	w.t.Helper()
	w.send(gmFrame(9)) // GRAB_JOB
	w.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var h [12]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
	data := make([]byte, binary.BigEndian.Uint32(h[8:]))
	if _, err := io.ReadFull(w.r, data); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
	switch typ := binary.BigEndian.Uint32(h[4:]); typ {
	case 10: // NO_JOB
		return nil, false
	case 11: // JOB_ASSIGN: handle, function, body
		args := bytes.SplitN(data, []byte{0}, 3)
		w.send(gmFrame(13, string(args[0]), "")) // WORK_COMPLETE
		return args[2], true
	default:
		w.t.Fatalf("worker: packet type %d, header %q", typ, h[:])
		return nil, false
	}
}

// collect takes n jobs within arriveTimeout, then checks that no more
// are queued: a result submitted twice would show here.
func (w *gmWorker) collect(n int) [][]byte {
	w.t.Helper()
	var bodies [][]byte
	deadline := time.Now().Add(arriveTimeout)
	for len(bodies) < n {
		if b, ok := w.grab(); ok {
			bodies = append(bodies, b)
			continue
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("got %d jobs within %v, want %d", len(bodies), arriveTimeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if b, ok := w.grab(); ok {
		w.t.Errorf("a job more than the %d sent: %q", n, b)
	}
	return bodies
}

// gmResult is the text mod_gearman's NEB module reads for a passive
// result (neb_module_naemon/result_thread.c in sni/mod_gearman), the
// times left as T: service_description only for a service, output last
// with `\` and newlines escaped as mod_gearman's gm_escape_newlines does.
func gmResult(host, svc string, rc int, output string) string {
	s := "type=passive\nhost_name=" + host + "\n"
	if svc != "" {
		s += "service_description=" + svc + "\n"
	}
	return s + fmt.Sprintf("start_time=T.0\nfinish_time=T.0\nreturn_code=%d\nsource=nsca_fast\noutput=%s\n", rc, escape(output))
}

// gmTimes matches the times, seconds and microseconds: the sink moves a
// service's time on by a microsecond when its last result had the same.
var gmTimes = regexp.MustCompile(`\nstart_time=(\d+)\.\d{6}\nfinish_time=(\d+)\.\d{6}\n`)

// gmOpen opens each job body with key (nil: base64 only) and replaces the
// times, which must be equal and within [lo-1, hi+1], by T.
func gmOpen(t *testing.T, key []byte, bodies [][]byte, lo, hi int64) []string {
	t.Helper()
	var out []string
	for i, b := range bodies {
		if bytes.ContainsAny(b, "\n\x00") {
			t.Errorf("job %d: body is not one line of base64: %q", i, b)
		}
		plain, err := gearman.Open(key, b)
		if err != nil {
			t.Errorf("job %d: %v: %q", i, err, b)
			continue
		}
		text := string(plain)
		m := gmTimes.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("job %d: no start_time/finish_time lines (wrong key?): %q", i, text)
			out = append(out, text)
			continue
		}
		start, _ := strconv.ParseInt(m[1], 10, 64)
		if m[1] != m[2] || start < lo-1 || start > hi+1 {
			t.Errorf("job %d: start_time %s, finish_time %s, want equal and between %d and %d", i, m[1], m[2], lo, hi)
		}
		out = append(out, strings.Replace(text, m[0], "\nstart_time=T.0\nfinish_time=T.0\n", 1))
	}
	return out
}

// gmChecks are results for send_nsca (ETB-separated, so outputs may span
// lines) and the job texts they must become. (An empty output cannot be
// sent: send_nsca's strtok skips an empty field.)
func gmChecks(tag string) (input string, want []string) {
	long := longText(4095)
	input = tag + "-web\tHTTP\t2\tCRITICAL - Socket timeout|time=10.000s;1;5;0\x17" +
		tag + "-gw\t0\tPING OK - rta 0.1ms|rta=0.1ms;;;0\x17" +
		tag + "-db\tdisk /var\t1\tWARNING - a\\b 80% used\nsecond; line=x\nthird|/var=80%;70;90;0;100\x17" +
		tag + "-long\tlong svc\t3\t" + long + "\x17"
	want = []string{
		gmResult(tag+"-web", "HTTP", 2, "CRITICAL - Socket timeout|time=10.000s;1;5;0"),
		gmResult(tag+"-gw", "", 0, "PING OK - rta 0.1ms|rta=0.1ms;;;0"),
		gmResult(tag+"-db", "disk /var", 1, "WARNING - a\\b 80% used\nsecond; line=x\nthird|/var=80%;70;90;0;100"),
		gmResult(tag+"-long", "long svc", 3, long),
	}
	return input, want
}

// TestGearmanSink: results reach the result queue as mod_gearman's module
// reads them, encrypted under gearman_key or the key file's first line,
// or in base64 only, in order, once each, and nothing goes to the
// fallback.
func TestGearmanSink(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(dir string) Config
		key  []byte // what the module is configured with
	}{
		{"encryption=1,key", func(string) Config {
			return Config{"gearman_encryption": "1", "gearman_key": "a shared mod_gearman key"}
		}, []byte("a shared mod_gearman key")},
		{"encryption=yes,keyfile", func(dir string) Config {
			// mod_gearman reads the first line, without trailing blanks.
			path := filepath.Join(dir, "gearman.key")
			writeFile(t, path, "key from the file \nnot part of the key\n", 0o600)
			return Config{"gearman_encryption": "yes", "gearman_keyfile": path}
		}, []byte("key from the file")},
		{"encryption=0", func(string) Config {
			return Config{"gearman_encryption": "0"}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gd := gmStartGearmand(t, 0)
			dir := t.TempDir()
			dump := filepath.Join(dir, "nsca.dump")
			cfg := merge(Config{"gearman_server": gd.addr, "gearman_result_queue": "check_results", "alternate_dump_file": dump}, tc.cfg(dir))
			d, cl := startKeyed(t, 1, shortPassword, cfg)
			w := gmNewWorker(t, gd.addr, "check_results")
			input, want := gmChecks("gm")
			lo := now()
			cl.send(t, d.Port, input, len(want))
			// The first connection's jobs are in before the second sends:
			// NSCA orders results within a connection, not across them.
			bodies := w.collect(len(want))
			cl.send(t, d.Port, "gm-again\tsvc\t0\tsecond connection\x17", 1)
			want = append(want, gmResult("gm-again", "svc", 0, "second connection"))
			bodies = append(bodies, w.collect(1)...)
			hi := now()
			got := gmOpen(t, tc.key, bodies, lo, hi)
			assertLines(t, got, want)
			d.Stop()
			if text := readFile(t, dump); text != "" {
				t.Errorf("results went to the fallback with gearmand up:\n%s", text)
			}
		})
	}
}

// TestGearmanQueueName: gearman_result_queue names the function the jobs
// are submitted to.
func TestGearmanQueueName(t *testing.T) {
	gd := gmStartGearmand(t, 0)
	d, cl := startKeyed(t, 1, shortPassword, Config{"gearman_server": gd.addr, "gearman_result_queue": "results_dc1",
		"gearman_encryption": "0", "alternate_dump_file": filepath.Join(t.TempDir(), "nsca.dump")})
	w := gmNewWorker(t, gd.addr, "results_dc1")
	lo := now()
	cl.send(t, d.Port, "dc1\tsvc\t0\tto the dc1 queue\x17", 1)
	assertLines(t, gmOpen(t, nil, w.collect(1), lo, now()), []string{gmResult("dc1", "svc", 0, "to the dc1 queue")})
}

// TestGearmanFailover: with the first job server down, results go to the
// next one of gearman_server.
func TestGearmanFailover(t *testing.T) {
	gd := gmStartGearmand(t, 0)
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d, cl := startKeyed(t, 1, shortPassword, Config{"gearman_server": dead + "," + gd.addr,
		"gearman_encryption": "0", "alternate_dump_file": filepath.Join(t.TempDir(), "nsca.dump")})
	w := gmNewWorker(t, gd.addr, "check_results")
	lo := now()
	cl.send(t, d.Port, "fo\tsvc\t1\tvia the second server\x17fo\t0\thost too\x17", 2)
	assertLines(t, gmOpen(t, nil, w.collect(2), lo, now()),
		[]string{gmResult("fo", "svc", 1, "via the second server"), gmResult("fo", "", 0, "host too")})
}

// TestGearmanDownFallsBack: with the job server down, results go to the
// fallback, alternate_dump_file, as command lines. Once it is up again,
// results go to it; every result is in exactly one of the two.
func TestGearmanDownFallsBack(t *testing.T) {
	needTool(t, gmGearmandPath, "gearman-job-server")
	port := freePort(t)
	dump := filepath.Join(t.TempDir(), "nsca.dump")
	d, cl := startKeyed(t, 1, shortPassword, Config{"gearman_server": net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"gearman_encryption": "1", "gearman_key": "secret", "alternate_dump_file": dump})
	lo := now()
	cl.send(t, d.Port, "down\tsvc\t2\tCRITICAL - gearmand is down|x=1\nline 2\x17down\t1\thost result\x17", 2)
	cl.send(t, d.Port, "down\tsvc2\t0\tsecond connection\x17", 1)
	waitFileLines(t, dump, 3)
	hi := now()
	assertLines(t, commandsIn(t, dump, lo, hi), []string{
		serviceLine("down", "svc", 2, "CRITICAL - gearmand is down|x=1\nline 2"),
		hostLine("down", 1, "host result"),
		serviceLine("down", "svc2", 0, "second connection"),
	})

	// The sink may wait a little before it dials again: send until a
	// result reaches gearmand, counting where each one went.
	gd := gmStartGearmand(t, port)
	w := gmNewWorker(t, gd.addr, "check_results")
	var sent []string
	var jobs [][]byte
	inDump := 3
	deadline := time.Now().Add(3 * arriveTimeout)
	for len(jobs) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no result reached gearmand within %v of its start; daemon log:\n%s", 3*arriveTimeout, d.Stderr())
		}
		out := fmt.Sprintf("attempt %d", len(sent))
		cl.send(t, d.Port, "up\tsvc\t0\t"+out+"\x17", 1)
		sent = append(sent, out)
		waitFor(arriveTimeout, func() bool {
			if b, ok := w.grab(); ok {
				jobs = append(jobs, b)
				return true
			}
			if n := len(completeLines(readFile(t, dump))); n > inDump {
				inDump = n
				return true
			}
			return false
		})
	}
	hi = now()
	d.Stop()
	time.Sleep(100 * time.Millisecond)
	for {
		b, ok := w.grab()
		if !ok {
			break
		}
		jobs = append(jobs, b)
	}
	var got []string
	for _, text := range gmOpen(t, []byte("secret"), jobs, lo, hi) {
		got = append(got, "gearman: "+text)
	}
	for _, l := range commandsIn(t, dump, lo, hi)[3:] {
		got = append(got, "dump: "+l)
	}
	// The results before gearmand came back are in the dump, the rest in
	// gearmand, each once.
	split := len(sent) - len(jobs)
	if split < 0 {
		t.Fatalf("%d jobs for %d results sent", len(jobs), len(sent))
	}
	t.Logf("after gearmand came back: %d results to the dump, %d to gearmand", split, len(jobs))
	var want []string
	for _, out := range sent[split:] {
		want = append(want, "gearman: "+gmResult("up", "svc", 0, out))
	}
	for _, out := range sent[:split] {
		want = append(want, "dump: "+serviceLine("up", "svc", 0, out))
	}
	assertLines(t, got, want)
}
