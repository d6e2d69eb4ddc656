package tests

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// craftedIDs is the identities file of the crafted-name tests, read by
// ours as identities_file and by the real nsca-ng server as its config:
// "dmz" may report the hosts of the DMZ, with patterns ending in .*, as
// sites write them.
func craftedIDs(cmdFile string, port int) string {
	return fmt.Sprintf(`command_file = "%s"
listen = "127.0.0.1:%d"
authorize "dmz" {
	password = "dmz-secret"
	hosts = ".*\\.dmz"
	services = { "disk.*@.*\\.dmz", "web" }
}
authorize "ng" {
	password = "ng-secret"
	hosts = "[^;]+\\.dmz"
}
`, cmdFile, port)
}

// craftedName is one crafted result: what it sends and what it must
// come to with us.
type craftedName struct {
	name, host, svc string
	// reason is the reason it is dropped under, "" for written.
	reason string
}

// craftedNames are sent by a raw send_nsca client as identity dmz. The
// send_nsca protocol carries names as C strings, so a NUL ends them and
// stock cuts a newline: those two cannot cross a field there.
var craftedNames = []craftedName{
	{"plain host", "web.dmz", "", ""},
	{"plain service", "web.dmz", "disk /var", ""},
	{"';' moves the fields", "core-router;2;x.dmz", "", "bad_name"},
	{"';' in the service", "web.dmz", "disk;2;x", "bad_name"},
	{"a tab", "core\tx.dmz", "", "bad_name"},
	{"an escape", "core\x1b[2Jx.dmz", "", "bad_name"},
	{"empty host", "", "web", "bad_name"},
	{"case", "WEB.DMZ", "", "unauthorized"},
	{"trailing space", "web.dmz ", "", "unauthorized"},
	{"an @ is no host", "other", "disk@x.dmz", "unauthorized"},
	{"service on any host", "other", "web", ""},
}

// TestCraftedNamesNSCA: names made to cross a field or an identity's
// rights, from a send_nsca client with an identity: each refused under
// its own reason, counted, logged once with the name quoted, and written
// nowhere; the rest are written.
func TestCraftedNamesNSCA(t *testing.T) {
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	ids := filepath.Join(dir, "ids.cfg")
	writeFile(t, ids, craftedIDs(filepath.Join(dir, "unused"), 1), 0o600)
	metrics := identMetrics(t)
	d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "password": "legacy-secret", "decryption_method": "1",
		"identities_file": ids, "metrics_address": metrics})
	lo := now()
	r := dialRaw(t, d.Port, "")
	var want []string
	drops := map[string]float64{}
	for _, c := range craftedNames {
		r.write(t, r.packet(packetSize, r.ts, 2, c.host, c.svc, "crafted: "+c.name, 1, "dmz-secret"), 0)
		if c.reason == "" {
			line := rawCheck{2, c.host, c.svc, "crafted: " + c.name}.line()
			if c.svc == "" {
				line = fmt.Sprintf("PROCESS_HOST_CHECK_RESULT;%s;2;crafted: %s", c.host, c.name)
			}
			want = append(want, line)
		} else {
			drops[c.reason]++
		}
	}
	// The real send_nsca too: the name of the report that found the hole.
	Client{Password: "dmz-secret", Method: 1}.send(t, d.Port, "core-router;2;x.dmz\t0\tfrom send_nsca\n", 1)
	drops["bad_name"]++
	waitFileLines(t, cmd, len(want))
	for reason, n := range drops {
		name := fmt.Sprintf(`nsca_results_dropped_total{reason=%q}`, reason)
		if got := identWaitMetric(t, metrics, name, n); got != n {
			t.Errorf("%s = %v, want %v", name, got, n)
		}
	}
	if got := identWaitMetric(t, metrics, `nsca_identity_refused_total{identity="dmz"}`, drops["unauthorized"]); got != drops["unauthorized"] {
		t.Errorf("refused for identity dmz: %v, want %v", got, drops["unauthorized"])
	}
	if got, want := identWaitMetric(t, metrics, `nsca_front_refused_total{front="nsca"}`, drops["unauthorized"]+drops["bad_name"]), drops["unauthorized"]+drops["bad_name"]; got != want {
		t.Errorf("refused of the nsca front end: %v, want %v", got, want)
	}
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), want)
	log := d.Stderr()
	for _, quoted := range []string{`"core-router;2;x.dmz" has ";" at byte 11`, `"core\tx.dmz" has "\t"`, `"core\x1b[2Jx.dmz"`, "empty host name"} {
		if !strings.Contains(log, quoted) {
			t.Errorf("the log does not name the refused name as %s", quoted)
		}
	}
	if strings.Contains(log, "\x1b") {
		t.Errorf("a client's escape sequence reached the log raw")
	}
}

// craftedPush is one command an nsca-ng client pushes as identity ng
// (hosts = "[^;]+\.dmz"), the NUL one as the report that found the hole
// sent it; theirs says whether the real nsca-ng server writes it.
type craftedPush struct {
	identity, name, command string
	ours, theirs            bool
	reason                  string // ours drops it under
}

var craftedPushes = []craftedPush{
	{"ng", "plain", "PROCESS_HOST_CHECK_RESULT;web.dmz;0;ok", true, true, ""},
	{"ng", "a NUL ends the name for the core", "PROCESS_HOST_CHECK_RESULT;core-router\x00x.dmz;1;B", false, false, "bad_name"},
	{"ng", "a ';' splits the host", "PROCESS_HOST_CHECK_RESULT;core-router;2;x.dmz", false, false, "unauthorized"},
	{"ng", "an escape in the host", "PROCESS_HOST_CHECK_RESULT;core\x1bx.dmz;1;B", false, true, "bad_name"},
	{"ng", "a CR in the host", "PROCESS_HOST_CHECK_RESULT;core\rx.dmz;1;B", false, true, "bad_name"},
	// hosts = ".*\.dmz" over the command text: nsca-ng writes host
	// core-router with state 2; ours matches the parsed host, core-router.
	{"dmz", "a ';' escapes .*", "PROCESS_HOST_CHECK_RESULT;core-router;2;x.dmz;0;out", false, true, "unauthorized"},
}

// TestCraftedNamesNG: the same from nsca-ng clients, pushed raw over a
// TLS-PSK session (openssl s_client, which sends any byte), against ours
// and against the real nsca-ng server with the same identities: ours
// refuses what a core cannot hold, where nsca-ng-server writes some of
// it (README, "Where we differ").
func TestCraftedNamesNG(t *testing.T) {
	progs := ngExtract(t, true)
	dir := t.TempDir()
	theirCmd, ourCmd := filepath.Join(dir, "theirs.cmd"), filepath.Join(dir, "ours.cmd")
	writeFile(t, theirCmd, "", 0o644)
	theirPort := freePort(t)
	theirCfg := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, theirCfg, craftedIDs(theirCmd, theirPort), 0o600)
	ngServer(t, progs.server, theirCfg, theirPort)
	writeFile(t, ourCmd, "", 0o644)
	d, ngPort, metrics := ngStartDaemon(t, dir, ourCmd, theirCfg, Config{"append_to_file": "1"})
	drops := map[string]float64{}
	for _, p := range craftedPushes {
		for _, srv := range []struct {
			port  int
			wrote bool
			who   string
		}{{theirPort, p.theirs, "nsca-ng-server"}, {ngPort, p.ours, "ours"}} {
			data := fmt.Sprintf("[%d] %s\n", time.Now().Unix(), p.command)
			answers := ngOpenSSLAs(t, srv.port, p.identity, p.identity+"-secret", []string{"MOIN 1 crafted", "PUSH " + strconv.Itoa(len(data)), data, "QUIT"})
			got := len(answers) >= 3 && answers[2] == "OKAY"
			if got != srv.wrote {
				t.Errorf("%s: %s: answers %q, want the command taken: %v", srv.who, p.name, answers, srv.wrote)
			}
		}
		if p.reason != "" {
			drops[p.reason]++
		}
	}
	for reason, n := range drops {
		name := fmt.Sprintf(`nsca_results_dropped_total{reason=%q}`, reason)
		if got := identWaitMetric(t, metrics, name, n); got != n {
			t.Errorf("%s = %v, want %v", name, got, n)
		}
	}
	if got, want := identWaitMetric(t, metrics, `nsca_front_refused_total{front="nsca-ng"}`, drops["unauthorized"]+drops["bad_name"]), drops["unauthorized"]+drops["bad_name"]; got != want {
		t.Errorf("refused of the nsca-ng front end: %v, want %v", got, want)
	}
	time.Sleep(500 * time.Millisecond)
	d.Stop()
	ours := completeLines(readFile(t, ourCmd))
	if len(ours) != 1 || !strings.HasSuffix(ours[0], "PROCESS_HOST_CHECK_RESULT;web.dmz;0;ok") {
		t.Errorf("our command file holds %q, want only web.dmz's result", ours)
	}
	for _, l := range ours {
		if strings.ContainsAny(l, "\x00\x1b") {
			t.Errorf("a crafted name reached our command file: %q", l)
		}
	}
}
