package emit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/internal/emittest"
	"nsca_fast/stages/emit/sink"
)

var errFailing = errors.New("test: failing")

// takerSink records results (by host) and commands ("cmd:" and the text)
// in the order it took them; it takes commands when takes is set, and
// takes nothing while fail is set.
type takerSink struct {
	name  string
	takes bool
	fail  atomic.Bool
	mu    sync.Mutex
	got   []string
}

func (m *takerSink) Name() string        { return m.name }
func (m *takerSink) Close() error        { return nil }
func (m *takerSink) TakesCommands() bool { return m.takes }
func (m *takerSink) Write(items []sink.Item) (int, error) {
	if m.fail.Load() {
		return 0, errFailing
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		m.got = append(m.got, label(it))
	}
	return len(items), nil
}

func (m *takerSink) items() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// label is how takerSink records an item.
func label(it sink.Item) string {
	if it.IsCommand() {
		return "cmd:" + it.Command
	}
	return it.Result.Host
}

// mixed is results with a command after every third, all labelled.
func mixed(n int) []sink.Item {
	var its []sink.Item
	for i, it := range emittest.Items(n, 10) {
		its = append(its, it)
		if i%3 == 2 {
			its = append(its, sink.Item{Time: it.Time, Command: "SCHEDULE_FORCED_HOST_CHECK;" + it.Result.Host + ";1762153445"})
		}
	}
	return its
}

// run passes its through an emitter over dests to the end, and returns
// the counters.
func run(t *testing.T, dests []Destination, its []sink.Item) counters.Snapshot {
	t.Helper()
	stats := counters.NewStats()
	e := newEmitter(dests, stats, counters.NewRateLog(time.Second, 5))
	in := make(chan sink.Item, len(its))
	for _, it := range its {
		in <- it
	}
	close(in)
	stats.Received.Add(uint64(len(its)))
	done := make(chan struct{})
	e.start(context.Background(), in, done)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the emitter did not finish")
	}
	return stats.Snapshot()
}

// commandsIn are the command lines of its, as the command file holds them.
func linesOf(its []sink.Item, commands bool) string {
	var b []byte
	for _, it := range its {
		if it.IsCommand() == commands {
			b = sink.AppendCommand(b, it)
		}
	}
	return string(b)
}

func regularCommandFile(t *testing.T) *sink.CommandFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nagios.cmd")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return sink.NewCommandFile(path, true, false)
}

// A chain with a command file writes commands and results to it, each in
// its place, counting a command as one item emitted.
func TestCommandsThroughCommandFile(t *testing.T) {
	c := regularCommandFile(t)
	its := mixed(10)
	snap := run(t, []Destination{{Name: "local", Chain: []sink.Sink{c}, Capacity: 100, Blocking: true}}, its)
	got, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, it := range its {
		want = sink.AppendCommand(want, it)
	}
	if string(got) != string(want) {
		t.Errorf("the command file holds\n%s\nwant\n%s", got, want)
	}
	if snap.Emitted["file"] != uint64(len(its)) || snap.TotalDropped() != 0 || snap.Queued() != 0 {
		t.Errorf("emitted %v, dropped %v, queued %d; want %d emitted to file", snap.Emitted, snap.Dropped, snap.Queued(), len(its))
	}
}

// In a chain spool → command file, results go to the spool and commands
// pass it by to the command file, from the same mixed batches.
func TestCommandsPassTheSpool(t *testing.T) {
	dir := t.TempDir()
	spool := sink.NewSpool(dir, 0)
	c := regularCommandFile(t)
	its := mixed(9)
	snap := run(t, []Destination{{Name: "local", Chain: []sink.Sink{spool, c}, Capacity: 100, Blocking: true}}, its)
	got, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	if want := linesOf(its, true); string(got) != want {
		t.Errorf("the command file holds %q, want only the commands %q", got, want)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "c??????"))
	if len(files) != 9 || snap.Emitted["spool"] != 9 || snap.Emitted["file"] != 3 {
		t.Errorf("%d spool files, emitted %v; want 9 results in the spool, 3 commands in the file", len(files), snap.Emitted)
	}
	if snap.FellBack["spool"] != 0 || snap.TotalDropped() != 0 {
		t.Errorf("fell back %v, dropped %v: a command passing the spool is no failure", snap.FellBack, snap.Dropped)
	}
}

// A destination that can write no commands drops them, counted under
// no_command_sink once, while its results are delivered; a second
// destination without a command sink does not count them again.
func TestCommandsWithoutCommandSink(t *testing.T) {
	dir := t.TempDir()
	remote := &takerSink{name: "icinga2"}
	its := mixed(9)
	snap := run(t, []Destination{
		{Name: "local", Chain: []sink.Sink{sink.NewSpool(dir, 0)}, Capacity: 100},
		{Name: "icinga2", Chain: []sink.Sink{remote}, Capacity: 100},
	}, its)
	if snap.Dropped[counters.DropNoCommandSink] != 3 || snap.Dropped[counters.DropSink] != 0 || snap.Emitted["spool"] != 9 {
		t.Errorf("dropped %v, emitted %v; want the 3 commands dropped once as no_command_sink, 9 results spooled", snap.Dropped, snap.Emitted)
	}
	if got := remote.items(); len(got) != 9 || strings.HasPrefix(strings.Join(got, ","), "cmd:") {
		t.Errorf("the remote sink got %v, want the 9 results only", got)
	}
	if snap.Queued() != 0 || snap.Finished != uint64(len(its)) {
		t.Errorf("queued %d, finished %d of %d", snap.Queued(), snap.Finished, len(its))
	}
}

// Beside a destination that writes commands, one that cannot skips them:
// no drop, since the command file has them.
func TestCommandsSkipOtherDestinations(t *testing.T) {
	c := regularCommandFile(t)
	remote := &takerSink{name: "icinga2"}
	its := mixed(6)
	snap := run(t, []Destination{
		{Name: "local", Chain: []sink.Sink{c}, Capacity: 100},
		{Name: "icinga2", Chain: []sink.Sink{remote}, Capacity: 100},
	}, its)
	if len(remote.items()) != 6 || snap.TotalDropped() != 0 || snap.Emitted["file"] != uint64(len(its)) {
		t.Errorf("remote got %v, dropped %v, emitted %v", remote.items(), snap.Dropped, snap.Emitted)
	}
}

// A command file that fails sends results to the dump file, and commands
// too: the dump file holds command lines.
func TestCommandsFallBackToDump(t *testing.T) {
	dir := t.TempDir()
	missing := sink.NewCommandFile(filepath.Join(dir, "no-such.cmd"), true, false)
	dump := sink.NewDump(filepath.Join(dir, "dump"))
	its := mixed(6)
	snap := run(t, []Destination{{Name: "local", Chain: []sink.Sink{missing, dump}, Capacity: 100, Blocking: true}}, its)
	got, err := os.ReadFile(dump.Path)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, it := range its {
		want = sink.AppendCommand(want, it)
	}
	if string(got) != string(want) || snap.Emitted["dump_file"] != uint64(len(its)) || snap.TotalDropped() != 0 {
		t.Errorf("dump holds %q (emitted %v, dropped %v), want %q", got, snap.Emitted, snap.Dropped, want)
	}
}

// Results and commands keep their order at a sink that takes both, and
// each kind its own order at a sink that takes one, across batches.
func TestCommandsKeepOrder(t *testing.T) {
	only := &takerSink{name: "results-only"}
	both := &takerSink{name: "both", takes: true}
	its := mixed(600) // several batches
	run(t, []Destination{{Name: "local", Chain: []sink.Sink{only, both}, Capacity: 10000, Blocking: true}}, its)
	var wantBoth, wantOnly []string
	for _, it := range its {
		if it.IsCommand() {
			wantBoth = append(wantBoth, label(it))
		} else {
			wantOnly = append(wantOnly, label(it))
		}
	}
	if got := only.items(); !slices.Equal(got, wantOnly) {
		t.Errorf("the results-only sink got %d items out of order or with commands", len(got))
	}
	if got := both.items(); !slices.Equal(got, wantBoth) {
		t.Errorf("the command sink got %d items, want the %d commands in order", len(got), len(wantBoth))
	}
	all := &takerSink{name: "all", takes: true}
	run(t, []Destination{{Name: "local", Chain: []sink.Sink{all}, Capacity: 10000, Blocking: true}}, its)
	want := make([]string, len(its))
	for i, it := range its {
		want[i] = label(it)
	}
	if got := all.items(); !slices.Equal(got, want) {
		t.Errorf("a sink taking both got %d items, not the %d in the order sent", len(got), len(want))
	}
}
