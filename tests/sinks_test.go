package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sinkChecks is what the sink tests send: a service check with multi-line
// output and backslashes, a host check, and a line longer than PIPE_BUF.
func sinkChecks() (input string, want []string, n int) {
	long := longText(4095)
	input = "sinkhost\tsink svc\t2\tCRITICAL - a\\b\nsecond; line\x17" +
		"sinkhost\t1\thost down\x17" +
		"longhost\tlong svc\t3\t" + long + "\x17"
	want = []string{
		`PROCESS_SERVICE_CHECK_RESULT;sinkhost;sink svc;2;CRITICAL - a\\b\nsecond; line`,
		"PROCESS_HOST_CHECK_RESULT;sinkhost;1;host down",
		serviceLine("longhost", "long svc", 3, long),
	}
	return input, want, 3
}

// sendSinkChecks sends sinkChecks with cl, then one more check on a second
// connection, calling wait with the number of lines sent so far after each
// connection; then it stops the daemon. It returns the lines wanted and
// the window of their times.
func sendSinkChecks(t *testing.T, d *Daemon, cl Client, wait func(total int)) (want []string, lo, hi int64) {
	t.Helper()
	input, want, n := sinkChecks()
	lo = now()
	cl.send(t, d.Port, input, n)
	wait(n)
	cl.send(t, d.Port, "again\tsvc\t0\tsecond connection\x17", 1)
	want = append(want, serviceLine("again", "svc", 0, "second connection"))
	wait(len(want))
	hi = now()
	d.Stop()
	return want, lo, hi
}

// TestSinkFIFO: command_file is a FIFO with a reader (the core): every line
// arrives whole and in order, with aggregate_writes off and on.
func TestSinkFIFO(t *testing.T) {
	eachAggregateWrites(t, func(t *testing.T, fifo string, r *FIFOReader, d *Daemon, cl Client) {
		// The second connection comes after the first batch was written
		// (and, with aggregate_writes=0, the FIFO closed again).
		var got []string
		want, lo, hi := sendSinkChecks(t, d, cl, func(k int) { got = append(got, r.Collect(t, k-len(got))...) })
		time.Sleep(50 * time.Millisecond)
		got = append(got, r.Pending()...)
		assertLines(t, stripTimes(t, got, lo, hi), want)
	})
}

// eachAggregateWrites runs test in parallel subtests for aggregate_writes=0
// and 1, each with a daemon (XOR) writing to a FIFO that r reads.
func eachAggregateWrites(t *testing.T, test func(t *testing.T, fifo string, r *FIFOReader, d *Daemon, cl Client)) {
	for _, aggregate := range []string{"0", "1"} {
		t.Run("aggregate_writes="+aggregate, func(t *testing.T) {
			t.Parallel()
			fifo := makeFIFO(t, t.TempDir())
			r := openFIFOReader(t, fifo)
			d, cl := startKeyed(t, 1, shortPassword, Config{"command_file": fifo, "aggregate_writes": aggregate})
			test(t, fifo, r, d, cl)
		})
	}
}

// TestSinkRegularFileAppend: a regular command file with append_to_file=1
// keeps what it held and gets the lines appended, connection after
// connection.
func TestSinkRegularFileAppend(t *testing.T) {
	dir := t.TempDir()
	cmd := filepath.Join(dir, "nsca.cmd")
	const before = "[1] EXISTING LINE;kept\n"
	if err := os.WriteFile(cmd, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	d, cl := startKeyed(t, 1, shortPassword, Config{"command_file": cmd, "append_to_file": "1"})
	want, lo, hi := sendSinkChecks(t, d, cl, func(k int) { waitFileLines(t, cmd, 1+k) })
	text := readFile(t, cmd)
	if !strings.HasPrefix(text, before) {
		t.Fatalf("the existing content was not kept; the file begins %q", abbrev(text))
	}
	assertLines(t, stripTimes(t, completeLines(strings.TrimPrefix(text, before)), lo, hi), want)
}

// spoolResult is one check_result_path file, parsed.
type spoolResult struct {
	name, content string
	host          string
}

// readSpool waits until dir holds n result files with their .ok and
// returns them; any other file in dir fails the test.
func readSpool(t *testing.T, dir string, n int) []spoolResult {
	t.Helper()
	oks := 0
	if !waitFor(arriveTimeout, func() bool { oks = countOKs(t, dir); return oks >= n }) {
		t.Fatalf("%s holds %d .ok files after %v, want %d", dir, oks, arriveTimeout, n)
	}
	return listSpool(t, dir)
}

// listSpool returns the result files of dir, checking names, .ok companions
// and modes.
func listSpool(t *testing.T, dir string) []spoolResult {
	t.Helper()
	entries, names := readDirNames(t, dir)
	var out []spoolResult
	for _, e := range entries {
		name := e.Name()
		switch {
		case spoolName.MatchString(name):
			if !names[name+".ok"] {
				t.Errorf("%s has no %s.ok", name, name)
			}
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			r := spoolResult{name: name, content: string(b)}
			if m := spoolHostRe.FindStringSubmatch(r.content); m != nil {
				r.host = m[1]
			}
			out = append(out, r)
		case strings.HasSuffix(name, ".ok") && spoolName.MatchString(strings.TrimSuffix(name, ".ok")):
			if !names[strings.TrimSuffix(name, ".ok")] {
				t.Errorf("%s has no result file", name)
			}
			if info, err := e.Info(); err == nil && info.Size() != 0 {
				t.Errorf("%s is not empty: %d bytes", name, info.Size())
			}
		default:
			t.Errorf("unexpected file %q in the spool directory", name)
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 || !info.Mode().IsRegular() {
			t.Errorf("%s has mode %v, want a regular file with mode 0600", name, info.Mode())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].host < out[j].host })
	return out
}

// spoolRegexp matches a stock spool file for one result exactly, with the
// times as groups: ctime, file_time, start_time, finish_time.
func spoolRegexp(host, svc string, rc int, output string) *regexp.Regexp {
	q := regexp.QuoteMeta
	var b strings.Builder
	b.WriteString(`^### NSCA Passive Check Result ###\n`)
	b.WriteString(`# Time: ((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 123]\d \d\d:\d\d:\d\d \d{4})\n`)
	b.WriteString(`file_time=(\d+)\n\n`)
	if svc == "" {
		b.WriteString(`### Host Check Result ###\n`)
		b.WriteString(`host_name=` + q(host) + `\n`)
	} else {
		b.WriteString(`### Service Check Result ###\n`)
		b.WriteString(`host_name=` + q(host) + `\n`)
		b.WriteString(`service_description=` + q(svc) + `\n`)
	}
	b.WriteString(`check_type=1\nscheduled_check=0\nreschedule_check=0\nlatency=0\n`)
	b.WriteString(`start_time=(\d+)\.0\nfinish_time=(\d+)\.0\n`)
	b.WriteString(`return_code=` + strconv.Itoa(rc) + `\n`)
	b.WriteString(`output=` + q(escape(output)) + `\n\n$`)
	return regexp.MustCompile(b.String())
}

// checkSpoolFile asserts that content is the stock spool file for the
// result, with times consistent and within [lo, hi].
func checkSpoolFile(t *testing.T, r spoolResult, host, svc string, rc int, output string, lo, hi int64) {
	t.Helper()
	m := spoolRegexp(host, svc, rc, output).FindStringSubmatch(r.content)
	if m == nil {
		t.Errorf("spool file %s does not have the stock format for host=%q service=%q rc=%d output=%q:\n%s", r.name, host, svc, rc, output, abbrev(r.content))
		return
	}
	fileTime, _ := strconv.ParseInt(m[2], 10, 64)
	start, _ := strconv.ParseInt(m[3], 10, 64)
	finish, _ := strconv.ParseInt(m[4], 10, 64)
	if fileTime < lo-1 || fileTime > hi+1 {
		t.Errorf("%s: file_time=%d, want between %d and %d", r.name, fileTime, lo, hi)
	}
	if start != finish || start < fileTime-1 || start > fileTime {
		t.Errorf("%s: start_time=%d finish_time=%d, want equal and at most 1 s before file_time=%d", r.name, start, finish, fileTime)
	}
	// ctime(3) prints local time.
	if ct, err := time.ParseInLocation(time.ANSIC, m[1], time.Local); err != nil || ct.Unix() != fileTime {
		t.Errorf("%s: `# Time: %s` is not ctime(file_time=%d) (%v, parsed %d)", r.name, m[1], fileTime, err, ct.Unix())
	}
}

// spoolCases are sent to the spool tests, sorted by host name.
var spoolCases = []struct {
	host, svc string
	rc        int
	output    string
}{
	{"spool-a", "svc: one", 0, "OK - a\\b\nline 2|perf=1;2;3"},
	{"spool-b", "", 1, "host check output"},
	{"spool-c", "svc", -1, longText(4095)},
}

func spoolInput() string {
	var b strings.Builder
	for _, c := range spoolCases {
		if c.svc == "" {
			fmt.Fprintf(&b, "%s\t%d\t%s\x17", c.host, c.rc, c.output)
		} else {
			fmt.Fprintf(&b, "%s\t%s\t%d\t%s\x17", c.host, c.svc, c.rc, c.output)
		}
	}
	return b.String()
}

// checkSpoolCases asserts that files are the spool files of spoolCases,
// with times within [lo, hi].
func checkSpoolCases(t *testing.T, files []spoolResult, lo, hi int64) {
	t.Helper()
	if len(files) != len(spoolCases) {
		t.Fatalf("%d result files in the spool, want %d", len(files), len(spoolCases))
	}
	for i, c := range spoolCases {
		checkSpoolFile(t, files[i], c.host, c.svc, c.rc, c.output, lo, hi)
	}
}

// TestSinkCheckResultPath: with only check_result_path, every result is a
// cXXXXXX file in stock's format, mode 0600, with an empty cXXXXXX.ok, and
// nothing else is left in the directory.
func TestSinkCheckResultPath(t *testing.T) {
	for _, method := range []int{1, 14} {
		t.Run(fmt.Sprintf("method=%d", method), func(t *testing.T) {
			t.Parallel()
			spool := t.TempDir()
			d, cl := startKeyed(t, method, shortPassword, Config{"check_result_path": spool})
			lo := now()
			cl.send(t, d.Port, spoolInput(), len(spoolCases))
			readSpool(t, spool, len(spoolCases))
			hi := now()
			d.Stop()
			checkSpoolCases(t, listSpool(t, spool), lo, hi) // after the drain: no stray or extra files
		})
	}
}

// TestSinkFIFOWithoutReaderFallsBackToSpool: a FIFO nobody reads (open
// fails with ENXIO) sends the results to check_result_path; once a reader
// appears, later results go to the FIFO again.
func TestSinkFIFOWithoutReaderFallsBackToSpool(t *testing.T) {
	dir := t.TempDir()
	spool := makeSpoolDir(t, dir)
	fifo := makeFIFO(t, dir)
	d, cl := startKeyed(t, 3, shortPassword, Config{"command_file": fifo, "check_result_path": spool})
	lo := now()
	cl.send(t, d.Port, spoolInput(), len(spoolCases))
	files := readSpool(t, spool, len(spoolCases))
	hi := now()
	checkSpoolCases(t, files, lo, hi)

	// The core comes back: after the daemon's retry interval the FIFO is
	// used again and the spool gets nothing more.
	r := openFIFOReader(t, fifo)
	time.Sleep(1500 * time.Millisecond)
	lo = now()
	cl.send(t, d.Port, "back\tsvc\t0\treader is back\x17", 1)
	got := r.Collect(t, 1)
	hi = now()
	d.Stop()
	assertLines(t, stripTimes(t, append(got, r.Pending()...), lo, hi), []string{serviceLine("back", "svc", 0, "reader is back")})
	if after := listSpool(t, spool); len(after) != len(spoolCases) {
		t.Errorf("%d result files in the spool after the reader came back, want still %d", len(after), len(spoolCases))
	}
}

// TestSinkAlternateDumpFile: a command_file that does not exist is never
// created; results are appended to alternate_dump_file, created as needed.
func TestSinkAlternateDumpFile(t *testing.T) {
	dir := t.TempDir()
	cmd := filepath.Join(dir, "missing", "nsca.cmd")
	if err := os.Mkdir(filepath.Dir(cmd), 0o755); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(dir, "nsca.dump")
	d, cl := startKeyed(t, 14, shortPassword, Config{"command_file": cmd, "alternate_dump_file": dump})
	want, lo, hi := sendSinkChecks(t, d, cl, func(k int) { waitFileLines(t, dump, k) })
	assertLines(t, commandsIn(t, dump, lo, hi), want)
	if _, err := os.Lstat(cmd); !os.IsNotExist(err) {
		t.Errorf("the missing command file %s was created (lstat: %v)", cmd, err)
	}
}
