package sink

import (
	"strings"
	"testing"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
)

func item(t int64, host, svc string, rc int16, out string) Item {
	return Item{Time: t, Result: codec.Result{Host: host, Service: svc, ReturnCode: rc, Output: out}}
}

func TestAppendCommandService(t *testing.T) {
	got := string(AppendCommand(nil, item(1762153445, "web01", "HTTP", 2, "CRITICAL - Socket timeout")))
	want := "[1762153445] PROCESS_SERVICE_CHECK_RESULT;web01;HTTP;2;CRITICAL - Socket timeout\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestAppendCommandHost(t *testing.T) {
	got := string(AppendCommand(nil, item(1762153445, "gw", "", 0, "PING OK - rta 0.1ms")))
	want := "[1762153445] PROCESS_HOST_CHECK_RESULT;gw;0;PING OK - rta 0.1ms\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestAppendCommandAppends(t *testing.T) {
	b := []byte("prefix|")
	b = AppendCommand(b, item(1, "a", "b", 0, "x"))
	b = AppendCommand(b, item(2, "c", "", 1, "y"))
	want := "prefix|[1] PROCESS_SERVICE_CHECK_RESULT;a;b;0;x\n[2] PROCESS_HOST_CHECK_RESULT;c;1;y\n"
	if string(b) != want {
		t.Errorf("got  %q\nwant %q", b, want)
	}
}

func TestAppendCommandEscaping(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "OK", "OK"},
		{"empty", "", ""},
		{"backslash", `C:\temp`, `C:\\temp`},
		{"two backslashes", `a\\b`, `a\\\\b`},
		{"trailing backslash", `end\`, `end\\`},
		{"newline", "line1\nline2", `line1\nline2`},
		{"trailing newline", "out\n", `out\n`},
		{"only newlines", "\n\n", `\n\n`},
		{"both", "a\\b\nc", `a\\b\nc`},
		{"literal backslash-n stays escaped", `a\nb`, `a\\nb`},
		{"backslash before newline", "x\\\ny", `x\\\ny`},
		{"semicolons unchanged", "a;b;;c;", "a;b;;c;"},
		{"CR unchanged", "a\rb\r\n", "a\rb\r\\n"},
		{"tab and high bytes unchanged", "a\tb\xff\xc3\xa9", "a\tb\xff\xc3\xa9"},
		{"pipe perfdata", "OK | time=0.1s;1;2", "OK | time=0.1s;1;2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := string(AppendCommand(nil, item(100, "h", "s", 0, c.in)))
			want := "[100] PROCESS_SERVICE_CHECK_RESULT;h;s;0;" + c.want + "\n"
			if got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			if strings.Count(got, "\n") != 1 {
				t.Errorf("line holds %d newlines", strings.Count(got, "\n"))
			}
			// Escaping is the inverse of the core's unescaping.
			if un := dialect.Unescape(c.want); un != c.in { // what the core does to the output field, as --replay does
				t.Errorf("unescape(%q) = %q, want %q", c.want, un, c.in)
			}
		})
	}
}

func TestAppendCommandReturnCodes(t *testing.T) {
	for _, c := range []struct {
		rc   int16
		want string
	}{{-1, "-1"}, {-32768, "-32768"}, {0, "0"}, {3, "3"}, {255, "255"}, {32767, "32767"}} {
		got := string(AppendCommand(nil, item(5, "h", "s", c.rc, "o")))
		want := "[5] PROCESS_SERVICE_CHECK_RESULT;h;s;" + c.want + ";o\n"
		if got != want {
			t.Errorf("rc %d: got %q, want %q", c.rc, got, want)
		}
		got = string(AppendCommand(nil, item(5, "h", "", c.rc, "o")))
		want = "[5] PROCESS_HOST_CHECK_RESULT;h;" + c.want + ";o\n"
		if got != want {
			t.Errorf("host rc %d: got %q, want %q", c.rc, got, want)
		}
	}
	// The 65535 on the wire prints as -1, through Decode.
	pkt := make([]byte, codec.Size)
	codec.Encode(pkt, codec.Result{ReturnCode: -1, Host: "h", Service: "s", Output: "o"})
	it := Item{Time: 9, Result: codec.Decode(pkt)}
	if got := string(AppendCommand(nil, it)); got != "[9] PROCESS_SERVICE_CHECK_RESULT;h;s;-1;o\n" {
		t.Errorf("decoded -1: %q", got)
	}
}

func TestAppendCommandTime(t *testing.T) {
	for _, c := range []struct {
		t    int64
		want string
	}{{0, "[0]"}, {4294967295, "[4294967295]"}, {1700000000, "[1700000000]"}} {
		got := string(AppendCommand(nil, item(c.t, "h", "", 0, "")))
		if !strings.HasPrefix(got, c.want+" ") {
			t.Errorf("time %d: %q", c.t, got)
		}
	}
}

// withLocal runs f with time.Local set to loc. Tests in this package do not
// run in parallel, so swapping the global is safe.
func withLocal(t *testing.T, loc *time.Location) {
	t.Helper()
	old := time.Local
	time.Local = loc
	t.Cleanup(func() { time.Local = old })
}

func TestAppendSpoolService(t *testing.T) {
	withLocal(t, time.FixedZone("T2", 2*3600))
	// 2025-11-03 07:04:05 UTC is Mon Nov  3 09:04:05 at UTC+2.
	checkSpool1762153445(t, AppendSpool(nil, item(1762153445, "web01", "HTTP", 1, "WARNING - slow\nsecond \\ line")),
		"Mon Nov  3 09:04:05 2025",
		"### Service Check Result ###\n"+
			"host_name=web01\n"+
			"service_description=HTTP\n",
		"return_code=1\n"+
			"output=WARNING - slow\\nsecond \\\\ line\n")
}

// checkSpool1762153445 checks that got is the spool file of a result
// received at 1762153445, with ctime the local time it shows, check the
// lines that name the check and result its return code and output lines.
func checkSpool1762153445(t *testing.T, got []byte, ctime, check, result string) {
	t.Helper()
	want := "### NSCA Passive Check Result ###\n" +
		"# Time: " + ctime + "\n" +
		"file_time=1762153445\n" +
		"\n" +
		check +
		"check_type=1\n" +
		"scheduled_check=0\n" +
		"reschedule_check=0\n" +
		"latency=0\n" +
		"start_time=1762153445.0\n" +
		"finish_time=1762153445.0\n" +
		result +
		"\n"
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s\n(got %q)", got, want, got)
	}
}

func TestAppendSpoolHost(t *testing.T) {
	withLocal(t, time.UTC)
	got := AppendSpool([]byte{}, item(1762153445, "gw", "", -1, ""))
	checkSpool1762153445(t, got, "Mon Nov  3 07:04:05 2025",
		"### Host Check Result ###\n"+
			"host_name=gw\n",
		"return_code=-1\n"+
			"output=\n")
	if strings.Contains(string(got), "service_description") {
		t.Error("host check has a service_description line")
	}
}

// ctime(3): "%.3s %.3s%3d %.2d:%.2d:%.2d %d\n", day padded with a space,
// hours, minutes and seconds with zeros.
func TestAppendSpoolCtime(t *testing.T) {
	withLocal(t, time.UTC)
	for _, c := range []struct {
		t    int64
		want string
	}{
		{1762153445, "Mon Nov  3 07:04:05 2025"},
		{0, "Thu Jan  1 00:00:00 1970"},
		{1766534400, "Wed Dec 24 00:00:00 2025"},
		{1709164799, "Wed Feb 28 23:59:59 2024"},
		{1709251199, "Thu Feb 29 23:59:59 2024"},
	} {
		got := string(AppendSpool(nil, item(c.t, "h", "s", 0, "o")))
		line := "# Time: " + c.want + "\nfile_time="
		if !strings.Contains(got, line) {
			t.Errorf("time %d: want %q in\n%s", c.t, line, got)
		}
	}
	// The local zone is used, as ctime does.
	withLocal(t, time.FixedZone("M10", -10*3600))
	got := string(AppendSpool(nil, item(1762153445, "h", "s", 0, "o")))
	if !strings.Contains(got, "# Time: Sun Nov  2 21:04:05 2025\n") {
		t.Errorf("UTC-10: %q", got)
	}
}

func TestAppendSpoolAppends(t *testing.T) {
	withLocal(t, time.UTC)
	one := AppendSpool(nil, item(1, "a", "b", 0, "x"))
	both := AppendSpool(append([]byte("pre"), one...), item(2, "c", "", 1, "y"))
	if !strings.HasPrefix(string(both), "pre"+string(one)) {
		t.Error("AppendSpool did not append")
	}
	if !strings.HasSuffix(string(both), "output=y\n\n") {
		t.Errorf("suffix: %q", both[len(both)-20:])
	}
}
