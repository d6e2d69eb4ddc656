package sink

import (
	"testing"

	"nsca_fast/stages/emit/dialect"
)

// dialectItems are outputs each dialect writes differently: Windows paths,
// a backslash before n, multi-line output, an empty output, a final
// backslash, for service and host results.
func dialectItems() []Item {
	return []Item{
		item(1762153445, "win", "disk C:", 1, `C:\ - 42% used|'C:\ used'=42%`),
		item(1762153446, "win", "temp", 2, `C:\new\temp`),
		item(1762153447, "win", "multi", 0, "line1\nline2 \\\"q\\\" \\|"),
		item(1762153448, "win", "empty", 0, ""),
		item(1762153449, "win", "", 1, "host down\nsecond line C:\\"),
		item(1762153450, "win", "end", 3, `ends in \`),
	}
}

// TestDialectNoAllocation: escaping in any dialect appends into the
// buffers the sinks reuse, lossy outputs included.
func TestDialectNoAllocation(t *testing.T) {
	its := dialectItems()
	for _, d := range []dialect.Dialect{dialect.Nagios, dialect.Icinga2, dialect.Naemon} {
		l := lineBuf{dialect: d}
		var spool []byte
		run := func() {
			l.reset()
			for _, it := range its {
				l.add(it)
				spool, _ = AppendSpoolIn(spool[:0], it, d)
			}
		}
		run() // grows the buffers once
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Errorf("%s: %v allocations per batch, want 0", d, n)
		}
	}
}
