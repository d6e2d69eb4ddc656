package validate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// outcomes records what a front end is told.
type outcomes struct {
	mu      sync.Mutex
	taken   int
	refused []intake.Refusal
}

func (o *outcomes) Taken(*intake.Submission) { o.mu.Lock(); o.taken++; o.mu.Unlock() }
func (o *outcomes) Refused(_ *intake.Submission, r intake.Refusal) {
	o.mu.Lock()
	o.refused = append(o.refused, r)
	o.mu.Unlock()
}

func identity(t *testing.T) *identities.Identity {
	t.Helper()
	f, err := identities.Parse("ids", []byte(`authorize "dmz" { password = "p"; hosts = ".*\.dmz"; services = "disk.*"; commands = "ENABLE_NOTIFICATIONS" }`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Lookup("dmz")
}

// run passes subs through the stage with cfg and returns what reached
// emit and the stats.
func run(t *testing.T, cfg Config, subs []intake.Submission) ([]sink.Item, *counters.Stats) {
	t.Helper()
	env := stage.Env{Stats: counters.NewStats(), Log: counters.NewRateLog(time.Minute, 100)}
	in, out := make(chan intake.Submission, len(subs)), make(chan sink.Item, len(subs))
	for _, s := range subs {
		in <- s
	}
	close(in)
	if err := Start(context.Background(), in, out, cfg, env); err != nil {
		t.Fatal(err)
	}
	var items []sink.Item
	for it := range out {
		items = append(items, it)
	}
	return items, env.Stats
}

// TestRules: each rule refuses what it must under its own reason, the
// same for every front end, and tells the source's front end.
func TestRules(t *testing.T) {
	id := identity(t)
	now := time.Now().Unix()
	result := func(front intake.Front, host, service string) intake.Submission {
		o := &outcomes{}
		return intake.Submission{Source: &intake.Source{ID: 1, Front: front, Identity: id, Outcomes: o},
			Result: codec.Result{Host: host, Service: service, Output: "o"}, Time: now}
	}
	cases := []struct {
		name   string
		sub    intake.Submission
		reason string // "" passes
	}{
		{"allowed host", result(intake.Front("nsca"), "a.dmz", ""), ""},
		{"allowed service", result(intake.Front("nsca-ng"), "any", "disk /"), ""},
		{"';' in the host", result(intake.Front("nsca"), "core;2;x.dmz", ""), counters.DropBadName},
		{"';' in the host, nsca-ng", result(intake.Front("nsca-ng"), "core;2;x.dmz", ""), counters.DropBadName},
		{"';' in the host, NRDP", result(intake.Front("nrdp"), "core;2;x.dmz", ""), counters.DropBadName},
		{"NUL in the host", result(intake.Front("nsca-ng"), "core\x00x.dmz", ""), counters.DropBadName},
		{"newline in the service", result(intake.Front("nrdp"), "a.dmz", "disk\nx"), counters.DropBadName},
		{"empty host", result(intake.Front("nrdp"), "", "disk"), counters.DropBadName},
		{"case", result(intake.Front("nsca"), "A.DMZ", ""), counters.DropUnauthorized},
		{"not its service", result(intake.Front("nsca"), "a.dmz", "load"), counters.DropUnauthorized},
	}
	for _, c := range cases {
		items, stats := run(t, Config{Goroutines: 1, Depth: 1}, []intake.Submission{c.sub})
		o := c.sub.Source.Outcomes.(*outcomes)
		switch {
		case c.reason == "" && (len(items) != 1 || o.taken != 1):
			t.Errorf("%s: %d items, taken %d; want it passed", c.name, len(items), o.taken)
		case c.reason != "" && (len(items) != 0 || len(o.refused) != 1 || o.refused[0].Reason != c.reason || stats.Dropped(c.reason).Load() != 1):
			t.Errorf("%s: %d items, refused %+v, want refused as %s", c.name, len(items), o.refused, c.reason)
		}
		front := string(c.sub.Source.Front)
		if got, want := stats.FrontRefused(front).Load(), map[bool]uint64{true: 1, false: 0}[c.reason != ""]; got != want || stats.FrontReceived(front).Load() != 1 {
			t.Errorf("%s: counted for %s: received %d, refused %d; want 1 and %d", c.name, front, stats.FrontReceived(front).Load(), got, want)
		}
	}
}

// TestCommands: a command other than a check result needs an identity
// with a commands pattern, and no control character; one that passes goes
// on to the emit stage as a command item.
func TestCommands(t *testing.T) {
	id := identity(t)
	for _, c := range []struct {
		name, command string
		id            *identities.Identity
		reason        string
	}{
		{"allowed", "ENABLE_NOTIFICATIONS", id, ""},
		{"not its command", "DISABLE_NOTIFICATIONS", id, counters.DropUnauthorized},
		{"no identity", "ENABLE_NOTIFICATIONS", nil, counters.DropUnauthorized},
		{"a NUL", "ENABLE_NOTIFICATIONS\x00", id, counters.DropBadName},
	} {
		o := &outcomes{}
		sub := intake.Submission{Source: &intake.Source{ID: 1, Front: intake.Front("nsca-ng"), Identity: c.id, Outcomes: o}, Kind: intake.KindCommand, Command: c.command}
		items, _ := run(t, Config{Goroutines: 1, Depth: 1}, []intake.Submission{sub})
		if c.reason == "" && (len(items) != 1 || items[0].Command != c.command) {
			t.Errorf("%s: %+v reached the emit stage, want the command as an item of its own", c.name, items)
		}
		if c.reason != "" && len(items) != 0 {
			t.Errorf("%s: a refused command reached the emit stage", c.name)
		}
		if got := ""; len(o.refused) > 0 {
			got = o.refused[0].Reason
			if got != c.reason {
				t.Errorf("%s: refused as %s, want %q", c.name, got, c.reason)
			}
		} else if c.reason != "" || o.taken != 1 {
			t.Errorf("%s: taken %d, want refused as %s", c.name, o.taken, c.reason)
		}
	}
}

// TestCloseStream: a refusal that closes a send_nsca connection drops what
// it sent after, as after a reject; another front end's source goes on.
func TestCloseStream(t *testing.T) {
	old := time.Now().Unix() - 3600
	for _, stream := range []bool{true, false} {
		o := &outcomes{}
		src := &intake.Source{ID: 7, Front: intake.Front("nsca"), Stream: stream, Outcomes: o}
		subs := []intake.Submission{
			{Source: src, Result: codec.Result{Host: "h"}, Sent: old, HasSent: true},
			{Source: src, Result: codec.Result{Host: "h"}, Sent: time.Now().Unix(), HasSent: true},
		}
		items, stats := run(t, Config{Goroutines: 1, Depth: 2, MaxPacketAge: 30 * time.Second}, subs)
		after := stats.Dropped(counters.DropAfterReject).Load()
		if stream && (len(items) != 0 || after != 1 || !src.Closed()) {
			t.Errorf("stream: %d items, %d after reject, closed %v; want 0, 1, true", len(items), after, src.Closed())
		}
		if !stream && (len(items) != 1 || after != 0) {
			t.Errorf("not a stream: %d items, %d after reject; want 1, 0", len(items), after)
		}
		if stats.Dropped(counters.DropStale).Load() != 1 {
			t.Errorf("stream %v: stale not counted", stream)
		}
	}
}

// TestDeliverable: while the emit stage cannot deliver, a source that
// answers its client is refused (destination_down, with the reason), and
// one that does not (send_nsca's) is passed on to the sinks' own
// fallbacks and counters; commands ask AcceptingCommands.
func TestDeliverable(t *testing.T) {
	down := errors.New("command_file: no space left on device")
	cfg := Config{Goroutines: 1, Depth: 4,
		Accepting:         func() (bool, error) { return false, down },
		AcceptingCommands: func() (bool, error) { return false, intake.ErrNoCommandSink }}
	answering, silent := &outcomes{}, &outcomes{}
	subs := []intake.Submission{
		{Source: &intake.Source{ID: 1, Front: intake.Front("nsca-ng"), Answers: true, Outcomes: answering}, Result: codec.Result{Host: "h"}},
		{Source: &intake.Source{ID: 2, Front: intake.Front("nsca"), Outcomes: silent}, Result: codec.Result{Host: "h"}},
		{Source: &intake.Source{ID: 3, Front: intake.Front("nrdp"), Answers: true, Identity: identity(t), Outcomes: answering},
			Kind: intake.KindCommand, Command: "ENABLE_NOTIFICATIONS"},
	}
	items, stats := run(t, cfg, subs)
	if len(items) != 1 || silent.taken != 1 {
		t.Fatalf("%d items, send_nsca's taken %d: want only send_nsca's result passed on", len(items), silent.taken)
	}
	if len(answering.refused) != 2 || !errors.Is(answering.refused[0].Err, down) || !errors.Is(answering.refused[1].Err, intake.ErrNoCommandSink) {
		t.Fatalf("refused %+v, want the result and the command, with their reasons", answering.refused)
	}
	if got := stats.Dropped(counters.DropDestinationDown).Load(); got != 2 {
		t.Errorf("destination_down = %d, want 2", got)
	}
}
