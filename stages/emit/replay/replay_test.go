package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadDumpSkipsTornAndBadLines: a dump file's last line without its
// newline is skipped, though it parses (its output may be cut short), and
// so is every line that does not parse; each is reported with the file and
// its line number, and the whole lines are read.
func TestReadDumpSkipsTornAndBadLines(t *testing.T) {
	const good = "[1762153445] PROCESS_SERVICE_CHECK_RESULT;h;s%d;0;output %d\n"
	cases := []struct {
		name, text string
		services   []string
		skipped    []string // "line: reason" prefixes
	}{
		{"whole", fmt.Sprintf(good, 1, 1) + fmt.Sprintf(good, 2, 2), []string{"s1", "s2"}, nil},
		{"torn last line that parses", fmt.Sprintf(good, 1, 1) + strings.TrimSuffix(fmt.Sprintf(good, 2, 2), "2\n"),
			[]string{"s1"}, []string{"2: no newline at its end"}},
		{"torn last line that does not", fmt.Sprintf(good, 1, 1) + "[1762153445] PROCESS_SERV",
			[]string{"s1"}, []string{"2: no newline at its end"}},
		{"only a torn line", strings.TrimSuffix(fmt.Sprintf(good, 1, 1), "\n"), nil, []string{"1: no newline at its end"}},
		{"bad lines and a torn one", fmt.Sprintf(good, 1, 1) + "not a command\n\n" +
			"[1762153445] PROCESS_SERVICE_CHECK_RESULT;h;s;x;bad code\n" + fmt.Sprintf(good, 5, 5) + "[17621",
			[]string{"s1", "s5"}, []string{"2: not an external command line", "4: bad return code", "6: no newline at its end"}},
		{"blank last line without newline", fmt.Sprintf(good, 1, 1) + "  ", []string{"s1"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nsca.dump")
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			var rep Report
			items, err := readDump(path, &rep)
			if err != nil {
				t.Fatal(err)
			}
			var services []string
			for _, it := range items {
				services = append(services, it.Result.Service)
			}
			if !slices.Equal(services, c.services) || rep.Read != len(c.services) {
				t.Errorf("read %v (Read %d), want %v", services, rep.Read, c.services)
			}
			if len(rep.Skipped) != len(c.skipped) {
				t.Fatalf("skipped %q, want %d lines: %q", rep.Skipped, len(c.skipped), c.skipped)
			}
			for i, want := range c.skipped {
				if !strings.HasPrefix(rep.Skipped[i], path+":"+want) {
					t.Errorf("skipped[%d] = %q, want it to start with %q", i, rep.Skipped[i], path+":"+want)
				}
			}
		})
	}
}
