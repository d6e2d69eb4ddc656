package nscang

import (
	"errors"
	"testing"

	"nsca_fast/stages/codec"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		line string
		verb Verb
		args int
	}{
		{"MOIN 1 Zm9vYmFy", Moin, 2},
		{"moin 1 abc", Moin, 2},
		{"PING 1", Ping, 1},
		{"PUSH 42", Push, 1},
		{"NOOP", Noop, 0},
		{"QUIT", Quit, 0},
		{"BAIL I'm feeling bad", Bail, 3},
		{"HELO x", Unknown, 1},
		{"MO", Unknown, 0},
	}
	for _, c := range cases {
		r := ParseRequest(c.line)
		if r.Verb != c.verb || len(r.Args) != c.args {
			t.Errorf("%q: verb %v args %q, want %v with %d args", c.line, r.Verb, r.Args, c.verb, c.args)
		}
	}
}

func TestMoinAndPush(t *testing.T) {
	if ok, _ := MoinOK(ParseRequest("MOIN 1 abc")); !ok {
		t.Error("MOIN 1 abc refused")
	}
	if _, fail := MoinOK(ParseRequest("MOIN 0 abc")); fail != FailVersion {
		t.Errorf("MOIN 0: %q", fail)
	}
	if _, fail := MoinOK(ParseRequest("MOIN 1")); fail != FailMoin {
		t.Errorf("MOIN without id: %q", fail)
	}
	if n, fail := PushSize(ParseRequest("PUSH 42"), 100); n != 42 || fail != "" {
		t.Errorf("PUSH 42: %d %q", n, fail)
	}
	if _, fail := PushSize(ParseRequest("PUSH 101"), 100); fail != FailTooLarge {
		t.Errorf("PUSH over max: %q", fail)
	}
	if n, _ := PushSize(ParseRequest("PUSH 1000000"), 0); n != 1000000 {
		t.Errorf("PUSH without limit: %d", n)
	}
	if _, fail := PushSize(ParseRequest("PUSH x"), 100); fail != FailSize {
		t.Errorf("PUSH x: %q", fail)
	}
}

func TestParseCommand(t *testing.T) {
	c, err := ParseCommand([]byte("[1358980254] PROCESS_SERVICE_CHECK_RESULT;web1;disk;2;full; 99%\\nline two \\\\ end\n"))
	want := codec.Result{Timestamp: 1358980254, ReturnCode: 2, Host: "web1", Service: "disk", Output: "full; 99%\nline two \\ end"}
	if err != nil || c.Result == nil || *c.Result != want || c.Time != 1358980254 || c.Text != "PROCESS_SERVICE_CHECK_RESULT;web1;disk;2;full; 99%\\nline two \\\\ end" {
		t.Fatalf("service result: %+v %v", c, err)
	}
	c, err = ParseCommand([]byte("[1] PROCESS_HOST_CHECK_RESULT;web1;1;down\n"))
	if err != nil || c.Result == nil || c.Result.Service != "" || c.Result.Host != "web1" || c.Result.ReturnCode != 1 {
		t.Fatalf("host result: %+v %v", c, err)
	}
	c, err = ParseCommand([]byte("[5] ENABLE_NOTIFICATIONS\n"))
	if err != nil || c.Result != nil || c.Text != "ENABLE_NOTIFICATIONS" {
		t.Fatalf("other command: %+v %v", c, err)
	}
	for _, bad := range []string{"[1] PROCESS_SERVICE_CHECK_RESULT;web1;disk\n", "[1] PROCESS_HOST_CHECK_RESULT;web1;x;out\n", "[x] NOOP\n", "[1] A\nB\n"} {
		if _, err := ParseCommand([]byte(bad)); !errors.Is(err, ErrCommand) {
			t.Errorf("%q: err %v, want ErrCommand", bad, err)
		}
	}
}
