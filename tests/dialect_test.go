package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// command_file_dialect against the real programs: Icinga 2.13 reading our
// command pipe (its ExternalCommandListener), read back through its API,
// and the stock nsca writing the same corpus with the default dialect.

// dlCase is one result of the corpus: what a plugin printed.
type dlCase struct {
	name   string // the service, or the host suffix of a host result
	host   bool   // a host result (PROCESS_HOST_CHECK_RESULT)
	code   int
	output string
}

// dlCorpus holds the outputs Windows and multi-line plugins print that
// stock's escaping corrupts in Icinga 2: Windows paths, `\n` inside paths,
// multi-line output, backslashes before quotes and pipes, perfdata with
// quoted labels, for service and host results.
var dlCorpus = []dlCase{
	{"win-path", false, 1, `C:\ - 42% used|'C:\ used'=42%;80;90`},
	{"win-new", false, 2, `C:\new\temp`},
	{"n-in-path", false, 0, `OK - D:\data\node\nightly\ found`},
	{"multi-line", false, 1, "DISK WARNING - C:\\ 85%\nC:\\ 85%\nD:\\ 10%|'C:\\ used'=85%;80;90 'D:\\ used'=10%;80;90"},
	{"quotes-pipes", false, 0, `OK - say \"hi\" to 'C:\' on C:\|'C:\ used'=1;2;3 size=2B`},
	{"unc", false, 0, `\\server\share and \\ two`},
	{"backslash-newline", false, 3, "ends in \\\nnext line \\"},
	{"trailing", false, 0, `free on C:\`},
	{"quoted-labels", false, 0, `OK|'C:\ Label'=1;2;3 'a b'=2 ok=3`},
	{"semicolons", false, 1, `WARN - a;b;;c; d\e`},
	{"host-win", true, 0, `UP - C:\ reachable via \\srv\share`},
	{"host-new", true, 1, `DOWN - C:\new unreachable`},
	{"host-multi", true, 1, "DOWN - line one\nline two C:\\"},
}

// dlIcinga2Form is the documented form Icinga 2 stores of output sent with
// command_file_dialect=icinga2 (stages/emit/dialect): what the plugin
// printed, except that in a service result a backslash before `n` becomes
// `/`, and in a host result a newline becomes the two characters `\n`.
// lossy says whether it differs.
func dlIcinga2Form(c dlCase) (form string, lossy bool) {
	if c.host {
		form = strings.ReplaceAll(c.output, "\n", `\n`)
	} else {
		b := []byte(c.output)
		for i := 0; i+1 < len(b); i++ {
			if b[i] == '\\' && b[i+1] == 'n' {
				b[i] = '/'
			}
		}
		form = string(b)
	}
	return form, form != c.output
}

// dlInput is send_nsca's input for the corpus, for hosts named prefix (host
// results: prefix-name); forms replaces the outputs when not nil.
func dlInput(prefix string, forms []string) string {
	var b strings.Builder
	for i, c := range dlCorpus {
		out := c.output
		if forms != nil {
			out = forms[i]
		}
		if c.host {
			fmt.Fprintf(&b, "%s-%s\t%d\t%s\x17", prefix, c.name, c.code, out)
		} else {
			fmt.Fprintf(&b, "%s\t%s\t%d\t%s\x17", prefix, c.name, c.code, out)
		}
	}
	return b.String()
}

// dlHosts are the Icinga objects for the corpus under each prefix.
func dlHosts(prefixes ...string) []Icinga2Host {
	var services []string
	for _, c := range dlCorpus {
		if !c.host {
			services = append(services, c.name)
		}
	}
	var hosts []Icinga2Host
	for _, p := range prefixes {
		hosts = append(hosts, Icinga2Host{p, services})
		for _, c := range dlCorpus {
			if c.host {
				hosts = append(hosts, Icinga2Host{Name: p + "-" + c.name})
			}
		}
	}
	return hosts
}

// dlResult reads case c of prefix back from Icinga.
func dlResult(t testing.TB, i2 *Icinga2, prefix string, c dlCase) (Icinga2Result, bool) {
	if c.host {
		return i2.Result(t, prefix+"-"+c.name, "")
	}
	return i2.Result(t, prefix, c.name)
}

// dlSame compares what Icinga stored for two results.
func dlSame(a, b Icinga2Result) bool {
	return a.State == b.State && a.Output == b.Output && slices.Equal(a.PerfData, b.PerfData)
}

// startIcinga2Pipe starts Icinga 2 with hosts and its command pipe
// (ExternalCommandListener, deprecated but present in 2.13) enabled, and
// returns the pipe's path once Icinga has created it.
func startIcinga2Pipe(t *testing.T, hosts []Icinga2Host) (*Icinga2, string) {
	t.Helper()
	i2 := startIcinga2(t, hosts...)
	pipe := filepath.Join(i2.dir, "run", "icinga2.cmd")
	conf := filepath.Join(i2.dir, "etc", "icinga2.conf")
	text := readFile(t, conf) + fmt.Sprintf("\nobject ExternalCommandListener \"command\" {\n  command_path = %q\n}\n", pipe)
	writeFile(t, conf, text, 0o644)
	i2.Restart(t)
	if !waitFor(i2StartTimeout, func() bool { st, err := os.Stat(pipe); return err == nil && st.Mode()&os.ModeNamedPipe != 0 }) {
		t.Fatalf("icinga2 did not create its command pipe %s", pipe)
	}
	return i2, pipe
}

// TestDialectIcinga2Pipe sends the corpus with the real send_nsca through
// our daemon into Icinga 2's command pipe with command_file_dialect=icinga2
// and reads it back through the API. The reference is the same corpus
// posted by our Icinga 2 API sink, which Icinga stores verbatim: every
// result must equal the reference of what the plugin printed, or of the
// documented substitute form where the pipe cannot carry the output; those
// are counted in nsca_dialect_lossy_total. The default dialect is sent too,
// to show (logged, not required) what it costs through this pipe.
func TestDialectIcinga2Pipe(t *testing.T) {
	const pipeP, nagiosP, refP, refLossyP = "dl-pipe", "dl-nagios", "dl-ref", "dl-ref-lossy"
	i2, pipe := startIcinga2Pipe(t, dlHosts(pipeP, nagiosP, refP, refLossyP))
	metrics := relMetricsAddr(t)
	cl := Client{Password: shortPassword, Method: 1}
	base := Config{"password": shortPassword, "decryption_method": "1"}
	icinga := startDaemon(t, merge(base, Config{"command_file": pipe, "command_file_dialect": "icinga2", "metrics_address": metrics}))
	nagios := startDaemon(t, merge(base, Config{"command_file": pipe}))
	api := startDaemon(t, merge(base, i2Config(i2, filepath.Join(t.TempDir(), "dump"), nil)))

	forms := make([]string, len(dlCorpus))
	wantLossy := 0
	for i, c := range dlCorpus {
		var lossy bool
		forms[i], lossy = dlIcinga2Form(c)
		if lossy {
			wantLossy++
		}
	}
	n := len(dlCorpus)
	cl.send(t, api.Port, dlInput(refP, nil), n)
	cl.send(t, api.Port, dlInput(refLossyP, forms), n)
	cl.send(t, icinga.Port, dlInput(pipeP, nil), n)
	cl.send(t, nagios.Port, dlInput(nagiosP, nil), n)

	// What the plugin printed, as Icinga stores it from the API: pinned for
	// a few cases, so that the reference itself is known to be verbatim.
	ref := make([]Icinga2Result, n)
	refLossy := make([]Icinga2Result, n)
	if !waitFor(20*time.Second, func() bool {
		for i, c := range dlCorpus {
			var ok1, ok2 bool
			ref[i], ok1 = dlResult(t, i2, refP, c)
			refLossy[i], ok2 = dlResult(t, i2, refLossyP, c)
			if !ok1 || !ok2 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the API sink's reference results did not all arrive")
	}
	pinned := map[string]struct {
		output string
		perf   []string
	}{
		"win-path":   {`C:\ - 42% used`, []string{`'C:\ used'=42%;80;90`}},
		"win-new":    {`C:\new\temp`, nil},
		"multi-line": {"DISK WARNING - C:\\ 85%\nC:\\ 85%\nD:\\ 10%", []string{`'C:\ used'=85%;80;90`, `'D:\ used'=10%;80;90`}},
		"host-win":   {`UP - C:\ reachable via \\srv\share`, nil},
	}
	for i, c := range dlCorpus {
		if p, ok := pinned[c.name]; ok && (ref[i].Output != p.output || !slices.Equal(ref[i].PerfData, p.perf)) {
			t.Errorf("reference %s through the API: output %q perfdata %q, want %q %q", c.name, ref[i].Output, ref[i].PerfData, p.output, p.perf)
		}
	}

	// Through the pipe with the icinga2 dialect.
	got := make([]Icinga2Result, n)
	settled := waitFor(20*time.Second, func() bool {
		for i, c := range dlCorpus {
			want := ref[i]
			if forms[i] != c.output {
				want = refLossy[i]
			}
			var ok bool
			if got[i], ok = dlResult(t, i2, pipeP, c); !ok || !dlSame(got[i], want) {
				return false
			}
		}
		return true
	})
	exact, substituted := 0, 0
	for i, c := range dlCorpus {
		got[i], _ = dlResult(t, i2, pipeP, c)
		want, kind := ref[i], "what the plugin printed"
		if forms[i] != c.output {
			want, kind = refLossy[i], "the documented lossy form"
		}
		if !dlSame(got[i], want) {
			t.Errorf("%s through the pipe (icinga2 dialect): state %d output %q perfdata %q\n  want %s: state %d output %q perfdata %q",
				c.name, got[i].State, got[i].Output, got[i].PerfData, kind, want.State, want.Output, want.PerfData)
		} else if forms[i] == c.output {
			exact++
		} else {
			substituted++
		}
	}
	if !settled && !t.Failed() {
		t.Error("the pipe's results did not settle")
	}
	m := relMetricsBalanced(t, metrics, nil)
	if got := m["nsca_dialect_lossy_total"]; got != float64(wantLossy) {
		t.Errorf("nsca_dialect_lossy_total = %v, want %d (the cases the pipe cannot carry)", got, wantLossy)
	}
	icinga.Stop()
	if lines := statsLines(icinga.Stderr(), "pipeline drained"); len(lines) == 0 || !strings.Contains(lines[len(lines)-1].line, fmt.Sprintf(", dialect_lossy=%d", wantLossy)) {
		t.Errorf("the final statistics line does not say dialect_lossy=%d: %v", wantLossy, lines)
	}

	// The default dialect through the same pipe, for the record.
	var corrupted []string
	for i, c := range dlCorpus {
		waitFor(5*time.Second, func() bool { _, ok := dlResult(t, i2, nagiosP, c); return ok })
		r, _ := dlResult(t, i2, nagiosP, c)
		if !dlSame(r, ref[i]) {
			corrupted = append(corrupted, fmt.Sprintf("%s: %q %q", c.name, r.Output, r.PerfData))
		}
	}
	t.Logf("icinga2 dialect: %d of %d results stored exactly as printed, %d in the documented lossy form (nsca_dialect_lossy_total=%v)",
		exact, n, substituted, m["nsca_dialect_lossy_total"])
	t.Logf("nagios dialect through the same pipe: %d of %d results stored differently from what the plugin printed:\n  %s",
		len(corrupted), n, strings.Join(corrupted, "\n  "))
}

// TestDialectDefaultIsStock sends the corpus with the real send_nsca to the
// stock nsca and to ours with the default dialect and with
// command_file_dialect=nagios: the command files and the spool files are
// the same bytes, times aside.
func TestDialectDefaultIsStock(t *testing.T) {
	requireStock(t)
	base := Config{"append_to_file": "1", "password": shortPassword, "decryption_method": "1"}
	cl := Client{Password: shortPassword, Method: 1}
	n := len(dlCorpus)
	input := dlInput("dl-stock", nil)

	stockCmd := commandFile(t, t.TempDir())
	stockSpool := t.TempDir()
	stockPort := startStock(t, merge(base, Config{"command_file": stockCmd}))
	stockSpoolPort := startStock(t, merge(base, Config{"check_result_path": stockSpool, "command_file": filepath.Join(t.TempDir(), "unused.cmd")}))
	lo := now()
	cl.send(t, stockPort, input, n)
	cl.send(t, stockSpoolPort, input, n)
	stockLines := waitFileLines(t, stockCmd, n)
	stockFiles := readSpool(t, stockSpool, n)

	normSpool := func(files []spoolResult) []string {
		var out []string
		for _, f := range files {
			out = append(out, normaliseSpool(f.content))
		}
		sort.Strings(out)
		return out
	}
	for _, dialect := range []string{"", "nagios"} {
		t.Run("dialect="+dialect, func(t *testing.T) {
			cfg := merge(base, Config{})
			if dialect != "" {
				cfg["command_file_dialect"] = dialect
			}
			cmd := commandFile(t, t.TempDir())
			spool := t.TempDir()
			d := startDaemon(t, merge(cfg, Config{"command_file": cmd}))
			ds := startDaemon(t, merge(cfg, Config{"check_result_path": spool}))
			cl.send(t, d.Port, input, n)
			cl.send(t, ds.Port, input, n)
			waitFileLines(t, cmd, n)
			readSpool(t, spool, n)
			hi := now()
			d.Stop()
			ds.Stop()
			assertLines(t, commandsIn(t, cmd, lo, hi), stripTimes(t, stockLines, lo, hi))
			assertLines(t, normSpool(listSpool(t, spool)), normSpool(stockFiles))
			if strings.Contains(d.Stderr(), "dialect_lossy=") {
				t.Errorf("the nagios dialect counted lossy results on this corpus:\n%s", ngTail(d.Stderr(), 2000))
			}
		})
	}
}
