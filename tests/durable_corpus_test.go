package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// i2String quotes s for the Icinga DSL, escapes included.
func i2String(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`, "$", "$$")
	return `"` + r.Replace(s) + `"`
}

// corpusCases are plugin outputs whose split by Icinga 2 the Icinga sink
// must reproduce.
var corpusCases = []struct {
	name, output string
	code         int
}{
	{"multi-line", "DISK OK - all fine\n/ 50%\n/var 60%", 0},
	{"perfdata on several lines", "DISK WARNING - /var 85%|/=50%;80;90\n/ 50%\n/var 85%|/var=85%;80;90\n/home=10%;80;90", 1},
	{"quoted labels", "PERF OK|'my label'=5ms;10;20;0 'it''s'=3 'x'=1 items=3", 0},
	{"windows paths", `C:\ is 95% full|'C:\ used'=95%;80;90 D:\=10%`, 2},
	{"empty output", "", 3},
	{"only perfdata", "|a=1 b=2ms", 0},
	{"blanks before the pipe", "OK - fine   | a=1 ", 0},
	{"tokens without =", "OK|foo a=1 bar b=2 baz", 0},
	{"pipe without =", "OK | no perfdata here", 0},
	{"check_multi prefixes", "OK|c1::a=1 b=2 c2::x=3 y=4", 0},
	{"pipe on a later line", "OK\n|late=1\nmore text", 1},
}

// TestDurableIcinga2Corpus: for each output, the result nsca_fast delivers
// through the Icinga 2 sink reads back from the API as an active check of
// the same bytes on the same Icinga does: output, performance data, state.
func TestDurableIcinga2Corpus(t *testing.T) {
	var svcs []string
	for i := range corpusCases {
		svcs = append(svcs, fmt.Sprintf("passive-%d", i))
	}
	i2 := startIcinga2(t, Icinga2Host{"corpus", svcs})
	var extra strings.Builder
	extra.WriteString(`object CheckerComponent "checker" {}
object CheckCommand "nsca-echo" {
  command = [ "/bin/sh", "-c", "printf '%s' \"$$1\"; exit \"$$2\"", "sh", "$echo_output$", "$echo_code$" ]
}
`)
	for i, c := range corpusCases {
		fmt.Fprintf(&extra, "object Service \"active-%d\" {\n  host_name = \"corpus\"\n  check_command = \"nsca-echo\"\n  check_interval = 1s\n  retry_interval = 1s\n  max_check_attempts = 1\n  vars.echo_output = %s\n  vars.echo_code = \"%d\"\n}\n", i, i2String(c.output), c.code)
	}
	f, err := os.OpenFile(filepath.Join(i2.dir, "etc", "objects.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(extra.String())
	f.Close()
	i2.Restart(t)

	d := startDaemon(t, relCfg(i2Config(i2, filepath.Join(t.TempDir(), "nsca.dump"), nil)))
	cl := Client{Password: relPassword, Method: 1}
	var in strings.Builder
	sent := 0
	for i, c := range corpusCases {
		if c.output == "" {
			// send_nsca reads a line with an empty output as a host check:
			// this one goes as a raw packet.
			r := dialRaw(t, d.Port, "127.0.0.1")
			r.c.Write(relPacket(r, int16(c.code), "corpus", fmt.Sprintf("passive-%d", i), ""))
			r.c.Close()
			continue
		}
		fmt.Fprintf(&in, "corpus\tpassive-%d\t%d\t%s\x17", i, c.code, c.output)
		sent++
	}
	cl.send(t, d.Port, in.String(), sent)
	for i, c := range corpusCases {
		var active, passive Icinga2Result
		var okA, okP bool
		waitFor(20*time.Second, func() bool {
			active, okA = i2.Result(t, "corpus", fmt.Sprintf("active-%d", i))
			passive, okP = i2.Result(t, "corpus", fmt.Sprintf("passive-%d", i))
			return okA && okP
		})
		if !okA || !okP {
			t.Errorf("%s: no result (active %v, passive %v)", c.name, okA, okP)
			continue
		}
		if active.Output != passive.Output || !slices.Equal(active.PerfData, passive.PerfData) || active.State != passive.State ||
			(active.PerfData == nil) != (passive.PerfData == nil) {
			t.Errorf("%s: %q\n  active:  state %d output %q perfdata %#v\n  passive: state %d output %q perfdata %#v",
				c.name, c.output, active.State, active.Output, active.PerfData, passive.State, passive.Output, passive.PerfData)
		}
	}
}
