package tests

// The documentation against the option table, conf.Options(): nsca.cfg(5)
// describes every option, with its default and origin, and nothing else
// under OPTIONS; the README's short table and its list of the C++
// nsca_fast's options say what the code says.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"nsca_fast/conf"
	"nsca_fast/conf/option"
)

// TestManNscaCfgListsEveryOption fails when conf/nsca.cfg.5, installed as
// nsca.cfg(5), misses an option of conf.Options(), gives another default or
// origin, or describes under OPTIONS an option that does not exist. Each
// option is a ".TP" paragraph: ".B name", then "Default: value; origin."
// (or "Default: empty; origin.").
func TestManNscaCfgListsEveryOption(t *testing.T) {
	page := docRead(t, "conf", "nsca.cfg.5")
	options := docSection(page, ".SH OPTIONS")
	if options == "" {
		t.Fatal("conf/nsca.cfg.5 has no .SH OPTIONS section")
	}
	paragraph := regexp.MustCompile(`(?m)^\.TP\n\.B ([^\n]+)\n([^\n]*)`)
	listed := map[string]string{} // name -> the line after ".B name"
	for _, m := range paragraph.FindAllStringSubmatch(options, -1) {
		if _, dup := listed[m[1]]; dup {
			t.Errorf("conf/nsca.cfg.5: option %s has two paragraphs", m[1])
		}
		listed[m[1]] = m[2]
	}
	known := map[string]bool{}
	for _, o := range conf.Options() {
		known[o.Name] = true
		next, ok := listed[o.Name]
		if !ok {
			t.Errorf("conf/nsca.cfg.5: option %s (%s, default %q) has no paragraph under .SH OPTIONS", o.Name, o.Origin, o.Default)
			continue
		}
		def := "empty"
		if o.Default != "" {
			def = docManEscape(o.Default)
		}
		if want := "Default: " + def + "; " + o.Origin + "."; next != want {
			t.Errorf("conf/nsca.cfg.5: %s: the line after .B says %q, want %q", o.Name, next, want)
		}
	}
	for name := range listed {
		if !known[name] {
			t.Errorf("conf/nsca.cfg.5: OPTIONS describes %s, which is not an option (conf.Options())", name)
		}
	}
}

// TestReadmeOptionTable fails when a row of README.md's table of the
// options that matter first names an option that does not exist, or gives
// another default or origin than conf.Options(). The table is short on
// purpose: nsca.cfg(5) has every option.
func TestReadmeOptionTable(t *testing.T) {
	section := docSection(docRead(t, "README.md"), "## The options that matter first")
	byName := map[string]conf.Option{}
	for _, o := range conf.Options() {
		byName[o.Name] = o
	}
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		name := strings.TrimSpace(cells[0])
		if !strings.HasPrefix(line, "|") || len(cells) < 4 || !strings.HasPrefix(name, "`") {
			continue
		}
		rows++
		name = strings.Trim(name, "`")
		o, ok := byName[name]
		if !ok {
			t.Errorf("README.md: the table lists %s, which is not an option (conf.Options())", name)
			continue
		}
		if got := docCellValue(cells[1]); got != o.Default {
			t.Errorf("README.md: %s: default %q, conf.Options() says %q", name, cells[1], o.Default)
		}
		if got := strings.TrimSpace(cells[2]); got != o.Origin {
			t.Errorf("README.md: %s: origin %q, conf.Options() says %q", name, got, o.Origin)
		}
	}
	if rows == 0 {
		t.Fatal(`README.md: no option table under "## The options that matter first" (rows like | ` + "`name`" + ` | default | origin | meaning |)`)
	}
}

// TestReadmeNamesCppOptions fails when README.md's section on migrating
// from the C++ nsca_fast does not name, in backticks, every option that
// came from it (origin nsca_fast in conf.Options()).
func TestReadmeNamesCppOptions(t *testing.T) {
	section := docSection(docRead(t, "README.md"), "### From the C++ nsca_fast")
	if section == "" {
		t.Fatal(`README.md has no "### From the C++ nsca_fast" section`)
	}
	for _, o := range conf.Options() {
		if o.Origin == option.OriginNscaFast && !strings.Contains(section, "`"+o.Name+"`") {
			t.Errorf("README.md: %q does not name the C++ nsca_fast's option %s", "### From the C++ nsca_fast", o.Name)
		}
	}
}

// docRead reads a file of the checkout.
func docRead(t *testing.T, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{".."}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docSection returns the lines after the line head up to the next heading
// of its level or above: the next ".SH " in a man page; in markdown the next
// line of at most as many '#' (outside code blocks, where '#' starts
// comments). It returns "" when there is no such line.
func docSection(text, head string) string {
	lines := strings.Split(text, "\n")
	start := slices.Index(lines, head)
	if start < 0 {
		return ""
	}
	level := len(head) - len(strings.TrimLeft(head, "#"))
	ends := func(line string) bool {
		if level == 0 {
			return strings.HasPrefix(line, ".SH ")
		}
		n := len(line) - len(strings.TrimLeft(line, "#"))
		return n >= 1 && n <= level && strings.HasPrefix(line[n:], " ")
	}
	fenced := false
	for i, line := range lines[start+1:] {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && ends(line) {
			return strings.Join(lines[start+1:start+1+i], "\n")
		}
	}
	return strings.Join(lines[start+1:], "\n")
}

// docCellValue reads a default cell: `value`, or "(empty)" for none.
func docCellValue(cell string) string {
	cell = strings.TrimSpace(cell)
	if cell == "(empty)" || cell == "" {
		return ""
	}
	return strings.Trim(cell, "`")
}

// docManEscape writes a value as roff source shows it.
func docManEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\e`), "-", `\-`)
}
