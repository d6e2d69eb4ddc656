package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const haproxyBin = "/usr/sbin/haproxy"

// statsEvery is how often the daemon logs its statistics line, as the
// tests that wait for it set stats_interval.
const statsEvery = 5 * time.Second

// proxyLocalHeader is a PROXY v2 header with the LOCAL command: what a
// load balancer's health check sends.
var proxyLocalHeader = []byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00")

// waitProxyPort waits until a daemon with proxy_protocol=1 serves port: a
// health check (a LOCAL header) is answered by closing. waitPort cannot
// tell, since such a daemon says nothing until a header has come.
func waitProxyPort(t *testing.T, d *Daemon) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port))
	if !waitFor(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write(proxyLocalHeader)
		n, err := c.Read(make([]byte, 1))
		return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
	}) {
		t.Fatalf("the daemon does not serve PROXY connections on %s\nstderr:\n%s", addr, d.Stderr())
	}
}

// sourceShim builds the LD_PRELOAD library that makes send_nsca connect
// from the address in NSCA_TEST_SOURCE_ADDRESS.
func sourceShim(t *testing.T) string {
	t.Helper()
	needTool(t, "/usr/bin/gcc", "gcc")
	so := filepath.Join(t.TempDir(), "bindsource.so")
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, "testdata/scaleout/bindsource.c", "-ldl").CombinedOutput()
	if err != nil {
		t.Fatalf("building the source address shim: %v\n%s", err, out)
	}
	return so
}

// HAProxy is a TCP load balancer in front of nsca_fast servers, as the
// README's "Scaling out" configures it.
type HAProxy struct {
	Port   int
	socket string
	p      *proc
	log    *lockedBuffer
}

// haproxyConfig is the README's example, on loopback ports.
func haproxyConfig(port int, socket string, backends []int) string {
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "    server nsca%d 127.0.0.1:%d\n", i+1, b)
	}
	return fmt.Sprintf(`global
    stats socket %s mode 600 level admin
    log stderr format raw local0 info

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch

frontend nsca
    bind 127.0.0.1:%d
    default_backend nsca_fast

backend nsca_fast
    balance roundrobin
    default-server send-proxy-v2 check check-send-proxy inter 200ms fall 2 rise 2
%s`, socket, port, servers.String())
}

// startHAProxy runs haproxy in the foreground in front of the backends and
// waits until it serves; cleanup ends it by its PID.
func startHAProxy(t *testing.T, backends []int) *HAProxy {
	t.Helper()
	needTool(t, haproxyBin, "haproxy")
	dir := t.TempDir()
	h := &HAProxy{Port: freePort(t), socket: filepath.Join(dir, "admin.sock"), log: &lockedBuffer{}}
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeFile(t, cfg, haproxyConfig(h.Port, h.socket, backends), 0o600)
	if out, err := exec.Command(haproxyBin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	cmd := exec.Command(haproxyBin, "-db", "-f", cfg)
	cmd.Stdout, cmd.Stderr = h.log, h.log
	h.p = mustStart(t, "haproxy", cmd)
	t.Cleanup(func() {
		h.p.terminate(5 * time.Second)
		if t.Failed() {
			t.Logf("haproxy log (last 3000 bytes):\n%s", ngTail(h.log.String(), 3000))
		}
	})
	if !waitFor(10*time.Second, func() bool {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(h.Port)))
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("haproxy does not listen on %d\n%s", h.Port, h.log.String())
	}
	return h
}

// status returns each backend server's status (UP, DOWN, ...) from the
// stats socket.
func (h *HAProxy) status() (map[string]string, error) {
	c, err := net.DialTimeout("unix", h.socket, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) > 17 && f[0] == "nsca_fast" && strings.HasPrefix(f[1], "nsca") {
			out[f[1]] = f[17]
		}
	}
	return out, sc.Err()
}

// waitStatus waits until server has a status starting with want and
// returns when it saw it.
func (h *HAProxy) waitStatus(t *testing.T, server, want string, timeout time.Duration) time.Time {
	t.Helper()
	var last map[string]string
	if !waitFor(timeout, func() bool {
		st, err := h.status()
		last = st
		return err == nil && strings.HasPrefix(st[server], want)
	}) {
		t.Fatalf("haproxy's %s is not %s after %v: %v", server, want, timeout, last)
	}
	return time.Now()
}

var checkFromRE = regexp.MustCompile(`check from (127\.0\.0\.\d+):\d+ \(via 127\.0\.0\.1:\d+\)`)

// TestScaleOutHAProxyIcinga2 is the multi-node setup of the README's
// "Scaling out": two nsca_fast servers behind HAProxy (send-proxy-v2 and
// health checks with check-send-proxy), send_nsca clients on several
// 127.0.0.x addresses, both servers posting into one Icinga 2. Every result
// shows up in Icinga's API with its state and output; allowed_hosts and the
// logs see the clients' own addresses; one server is killed in the middle
// of a burst, and everything sent after HAProxy marks it down arrives.
func TestScaleOutHAProxyIcinga2(t *testing.T) {
	needTool(t, haproxyBin, "haproxy")
	shim := sourceShim(t)
	clients := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	const services = 60
	hostOf := func(client string) string { return "node-" + strings.ReplaceAll(client, ".", "-") }
	var hosts []Icinga2Host
	for _, c := range append(clients, "127.0.0.9") {
		h := Icinga2Host{Name: hostOf(c)}
		for s := 1; s <= services; s++ {
			h.Services = append(h.Services, fmt.Sprintf("svc%02d", s))
		}
		hosts = append(hosts, h)
	}
	i2 := startIcinga2(t, hosts...)

	var daemons []*Daemon
	for range 2 {
		dir := t.TempDir()
		cfg := i2Config(i2, filepath.Join(dir, "dump"), Config{
			"password": "scale-out", "decryption_method": "14", "debug": "1",
			"proxy_protocol": "1", "proxy_protocol_trusted": "127.0.0.1",
			"allowed_hosts":   strings.Join(clients, ","),
			"icinga2_retries": "3",
			"stats_interval":  "5", // statsEvery: health checks are no noteworthy change
		})
		d := launchDaemon(t, cfg, daemonOpts{dir: dir, noWait: true})
		t.Cleanup(func() {
			d.p.terminate(stopTimeout)
			if t.Failed() {
				t.Logf("daemon %d stderr (last 4000 bytes):\n%s", d.Pid(), ngTail(d.Stderr(), 4000))
			}
		})
		waitProxyPort(t, d)
		daemons = append(daemons, d)
	}
	hp := startHAProxy(t, []int{daemons[0].Port, daemons[1].Port})
	hp.waitStatus(t, "nsca1", "UP", 10*time.Second)
	hp.waitStatus(t, "nsca2", "UP", 10*time.Second)

	client := Client{Password: "scale-out", Method: 14}
	type sent struct {
		client, host, service, output string
		state, svc                    int
		at                            time.Time
		err                           error
	}
	var mu sync.Mutex
	var log []sent
	send := func(from string, svc int) {
		host, service := hostOf(from), fmt.Sprintf("svc%02d", svc)
		s := sent{client: from, host: host, service: service, state: svc % 4, svc: svc, at: time.Now(),
			output: fmt.Sprintf("result %d from %s", svc, from)}
		cl := client
		cl.Env = []string{"LD_PRELOAD=" + shim, "NSCA_TEST_SOURCE_ADDRESS=" + from}
		out, err := cl.run(t, hp.Port, fmt.Sprintf("%s\t%s\t%d\t%s|t=%d\n", host, service, s.state, s.output, svc))
		if err == nil && !strings.Contains(out, "1 data packet(s) sent") {
			err = fmt.Errorf("send_nsca: %s", strings.TrimSpace(out))
		}
		s.err = err
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}

	// Before the burst: every client through both servers.
	for svc := 1; svc <= 4; svc++ {
		for _, c := range clients {
			send(c, svc)
		}
	}
	for _, s := range log {
		if s.err != nil {
			t.Fatalf("%s → %s!%s: %v", s.client, s.host, s.service, s.err)
		}
		state, perf := i2.WaitService(t, s.host, s.service, s.output, 20*time.Second)
		if want := []string{fmt.Sprintf("t=%d", s.svc)}; state != s.state || !slices.Equal(perf, want) {
			t.Errorf("%s!%s: state %d perfdata %q, want %d and t=N", s.host, s.service, state, perf, s.state)
		}
	}
	// Each server logged clients by their own addresses, not HAProxy's.
	for i, d := range daemons {
		seen := map[string]bool{}
		for _, m := range checkFromRE.FindAllStringSubmatch(d.Stderr(), -1) {
			seen[m[1]] = true
		}
		if len(seen) == 0 {
			t.Errorf("server %d logged no check from a client address via HAProxy: round robin did not reach it", i+1)
		}
		for a := range seen {
			if !slices.Contains(clients, a) {
				t.Errorf("server %d logged a check from %s, which is not a client", i+1, a)
			}
		}
	}
	// allowed_hosts applies to the client behind HAProxy.
	denied := client
	denied.Env = []string{"LD_PRELOAD=" + shim, "NSCA_TEST_SOURCE_ADDRESS=127.0.0.9"}
	if out, err := denied.run(t, hp.Port, hostOf("127.0.0.9")+"\tsvc01\t0\tmust not arrive\n"); err == nil && strings.Contains(out, "sent to host successfully") {
		t.Errorf("a client outside allowed_hosts got through: %s", out)
	}
	if !waitFor(5*time.Second, func() bool {
		return strings.Contains(daemons[0].Stderr()+daemons[1].Stderr(), "refused connection from 127.0.0.9:")
	}) {
		t.Error("no server logged the refusal of 127.0.0.9 by allowed_hosts")
	}

	// The burst: server 1 is killed early in it, and the rest leaves enough
	// time after HAProxy notices.
	before := len(log)
	var killedAt, downAt time.Time
	down := make(chan time.Time, 1)
	for svc := 5; svc <= services; svc++ {
		for _, c := range clients {
			send(c, svc)
		}
		if svc == 8 {
			killedAt = time.Now()
			syscall.Kill(daemons[0].Pid(), syscall.SIGKILL)
			go func() { down <- hp.waitStatus(t, "nsca1", "DOWN", 10*time.Second) }()
		}
	}
	downAt = <-down
	t.Logf("server 1 killed at +%v into the burst, marked DOWN %v later", killedAt.Sub(log[before].at).Round(time.Millisecond), downAt.Sub(killedAt).Round(time.Millisecond))

	var after, between, lostBetween int
	for _, s := range log[before:] {
		switch {
		case s.at.After(downAt):
			after++
			if s.err != nil {
				t.Errorf("sent after server 1 was marked down: %s → %s!%s: %v", s.client, s.host, s.service, s.err)
				continue
			}
			if state, _ := i2.WaitService(t, s.host, s.service, s.output, 20*time.Second); state != s.state {
				t.Errorf("%s!%s: state %d, want %d", s.host, s.service, state, s.state)
			}
		case s.at.After(killedAt):
			between++
			if _, output, _, _ := i2.Service(t, s.host, s.service); s.err != nil || output != s.output {
				lostBetween++
			}
		}
	}
	if after < 3*5 {
		t.Errorf("only %d results were sent after the mark-down; the burst is too short to show anything", after)
	}
	t.Logf("burst: %d results sent after the mark-down, all in Icinga; %d sent between the kill and the mark-down, %d of them not in Icinga", after, between, lostBetween)
	// HAProxy's health checks (LOCAL headers every 200 ms) are counted,
	// not logged as errors.
	if bad := grepLines(daemons[1].Stderr(), regexp.MustCompile(`PROXY header|closing connection from 127\.0\.0\.1:`)); len(bad) > 0 {
		t.Errorf("server 2 logged HAProxy's health checks as problems:\n%s", strings.Join(bad, "\n"))
	}
	counted := regexp.MustCompile(`statistics: .*health_checks=[1-9]`)
	if !waitFor(2*statsEvery, func() bool { return counted.MatchString(daemons[1].Stderr()) }) {
		t.Errorf("server 2's statistics count no health checks: %q", statsRe.FindAllString(daemons[1].Stderr(), -1))
	}
	if strings.Contains(daemons[1].Stderr(), "icinga2 refused") {
		t.Errorf("Icinga refused results from server 2:\n%s", grepLines(daemons[1].Stderr(), regexp.MustCompile("icinga2 refused")))
	}
}
