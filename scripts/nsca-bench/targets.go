package main

import (
	"fmt"
	"strings"
)

// targets collects a report's verdicts, a line each: met, missed or n/a
// (not measured), then what was compared.
type targets struct{ lines []string }

func (t *targets) add(ok bool, format string, args ...any) {
	t.lines = append(t.lines, metMissed(ok)+" "+fmt.Sprintf(format, args...))
}

func (t *targets) na(format string, args ...any) {
	t.lines = append(t.lines, "n/a    "+fmt.Sprintf(format, args...))
}

// met counts the targets met.
func (t *targets) met() int {
	n := 0
	for _, v := range t.lines {
		if strings.HasPrefix(v, "met") {
			n++
		}
	}
	return n
}

func metMissed(ok bool) string {
	if ok {
		return "met   "
	}
	return "missed"
}
