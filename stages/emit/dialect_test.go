package emit

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/internal/emittest"
	"nsca_fast/stages/emit/sink"
)

// dialectItems are outputs each dialect writes differently: Windows paths,
// a backslash before n, multi-line output, an empty output, a final
// backslash, for service and host results.
func dialectItems() []sink.Item {
	return []sink.Item{
		emittest.Item(1762153445, "win", "disk C:", 1, `C:\ - 42% used|'C:\ used'=42%`),
		emittest.Item(1762153446, "win", "temp", 2, `C:\new\temp`),
		emittest.Item(1762153447, "win", "multi", 0, "line1\nline2 \\\"q\\\" \\|"),
		emittest.Item(1762153448, "win", "empty", 0, ""),
		emittest.Item(1762153449, "win", "", 1, "host down\nsecond line C:\\"),
		emittest.Item(1762153450, "win", "end", 3, `ends in \`),
	}
}

// TestDialectReachesSinks builds the local destination from a parsed
// configuration with each command_file_dialect and checks that the command
// file, the spool files and the dump file hold that dialect's bytes, and
// that every lossy result delivered is counted once per sink that took it.
func TestDialectReachesSinks(t *testing.T) {
	its := dialectItems()
	for _, d := range []dialect.Dialect{dialect.Nagios, dialect.Icinga2, dialect.Naemon} {
		t.Run(d.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd, spool, dump := filepath.Join(dir, "nsca.cmd"), filepath.Join(dir, "spool"), filepath.Join(dir, "nsca.dump")
			if err := os.WriteFile(cmd, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(spool, 0o700); err != nil {
				t.Fatal(err)
			}
			text := "command_file=" + cmd + "\nappend_to_file=1\ncheck_result_path=" + spool +
				"\nalternate_dump_file=" + dump + "\ncommand_file_dialect=" + d.String() + "\n"
			cfg, err := conf.Parse("d.cfg", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			stats := counters.NewStats()
			dests, err := Destinations(cfg, Process{Slot: -1}, stats, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseDestinations(dests)
			chain := dests[0].Chain
			if len(chain) != 3 {
				t.Fatalf("local chain has %d sinks, want command file, spool, dump file", len(chain))
			}
			for _, s := range chain {
				mustWrite(t, s, its)
			}

			var wantCmd []byte
			var wantSpool []string
			lossy := uint64(0)
			for _, it := range its {
				var l bool
				wantCmd, l = sink.AppendCommandIn(wantCmd, it, d)
				if l {
					lossy += 2 // the command file and the dump file
				}
				f, l := sink.AppendSpoolIn(nil, it, d)
				wantSpool = append(wantSpool, string(f))
				if l {
					lossy++
				}
			}
			if got := mustRead(t, cmd); string(got) != string(wantCmd) {
				t.Errorf("command file:\n got %q\nwant %q", got, wantCmd)
			}
			if got := mustRead(t, dump); string(got) != string(wantCmd) {
				t.Errorf("dump file:\n got %q\nwant %q", got, wantCmd)
			}
			gotSpool := spoolContents(t, spool)
			slices.Sort(wantSpool)
			if !slices.Equal(gotSpool, wantSpool) {
				t.Errorf("spool files:\n got %q\nwant %q", gotSpool, wantSpool)
			}
			if got := stats.DialectLossy.Load(); got != lossy {
				t.Errorf("lossy results counted: %d, want %d", got, lossy)
			}
			if d != dialect.Nagios && lossy == 0 {
				t.Errorf("the items hold no lossy output for %s: the count is not tested", d)
			}
			checkDialectBytes(t, d, string(wantCmd), wantSpool)
		})
	}
}

// checkDialectBytes pins a few bytes of each dialect, so that the test
// above cannot pass with every sink writing the same wrong thing.
func checkDialectBytes(t *testing.T, d dialect.Dialect, cmd string, spool []string) {
	t.Helper()
	all := strings.Join(spool, "")
	var inCmd, inSpool []string
	switch d {
	case dialect.Nagios:
		inCmd = []string{`;1;C:\\ - 42% used|'C:\\ used'=42%` + "\n", `;2;C:\\new\\temp` + "\n", `;0;line1\nline2`}
		inSpool = []string{`output=C:\\new\\temp` + "\n", `output=ends in \\` + "\n"}
	case dialect.Icinga2:
		inCmd = []string{`;1;C:\ - 42% used|'C:\ used'=42%` + "\n", `;2;C:/new\temp` + "\n", `;0;line1\nline2 \"q\" \|`,
			";1;host down\\nsecond line C:\\\n"}
		inSpool = []string{`output=C:/new\temp` + "\n", `output=ends in \` + "\n"}
	case dialect.Naemon:
		inCmd = []string{`;2;C:\new\temp` + "\n", ";empty;0; \n", `;0;line1\nline2`}
		inSpool = []string{`output=C:/new\temp` + "\n", `output=ends in \\` + "\n"}
	}
	for _, s := range inCmd {
		if !strings.Contains(cmd, s) {
			t.Errorf("%s command file lacks %q", d, s)
		}
	}
	for _, s := range inSpool {
		if !strings.Contains(all, s) {
			t.Errorf("%s spool files lack %q", d, s)
		}
	}
}

// spoolContents returns the contents of the result files in dir, sorted.
func spoolContents(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^c[A-Za-z0-9]{6}$`)
	var out []string
	for _, e := range entries {
		if name.MatchString(e.Name()) {
			out = append(out, string(mustRead(t, filepath.Join(dir, e.Name()))))
		}
	}
	slices.Sort(out)
	return out
}

// mustWrite writes its to s, failing the test unless all were written.
func mustWrite(t *testing.T, s sink.Sink, its []sink.Item) {
	t.Helper()
	if n, err := s.Write(its); n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
