package tests

// The documentation against the option table, conf.Options(): nsca.cfg(5)
// describes every option, with its default and origin, and nothing else
// under OPTIONS.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"nsca_fast/conf"
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

// docManEscape writes a value as roff source shows it.
func docManEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\e`), "-", `\-`)
}
