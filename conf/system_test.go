package conf

import (
	"errors"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckSystem: CheckSystem refuses paths, users and addresses the
// daemon could not use, naming the file and line, and checks the sinks'
// paths as nsca_user and inside nsca_chroot.
func TestCheckSystem(t *testing.T) {
	dir := openDir(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := readOnlyDir(t)
	root := os.Getuid() == 0
	cases := []struct {
		name   string
		file   string
		asRoot bool   // the case needs root (it drops to nobody)
		msg    string // substring; "" = accepted
		warn   string // substring of a warning, for what stock starts with
	}{
		{name: "fine", file: "command_file=/d/cmd\ncheck_result_path=/d\nalternate_dump_file=/d/dump\npid_file=/d/pid"},
		{name: "command_file a directory", file: "check_result_path=/d\ncommand_file=/d",
			msg: "conf: v.cfg:2: command_file=" + dir + ": is a directory"},
		{name: "check_result_path missing", file: "command_file=/c\ncheck_result_path=/d/missing",
			msg: "conf: v.cfg:2: check_result_path=" + dir + "/missing: stat " + dir + "/missing: no such file"},
		{name: "check_result_path a file", file: "command_file=/c\ncheck_result_path=/d/file",
			msg: "conf: v.cfg:2: check_result_path=" + dir + "/file: is not a directory"},
		{name: "check_result_path read-only", file: "command_file=/c\ncheck_result_path=" + readOnly,
			msg: "conf: v.cfg:2: check_result_path=" + readOnly + ": cannot create files in it"},
		{name: "check_result_path not nsca_user's", file: "nsca_user=nobody\ncommand_file=/c\ncheck_result_path=/d", asRoot: true,
			msg: "conf: v.cfg:3: check_result_path=" + dir + ": cannot create files in it: permission denied for uid 65534"},
		{name: "dump file directory missing", file: "command_file=/c\nalternate_dump_file=/d/no/dump",
			warn: "conf: v.cfg:2: alternate_dump_file=" + dir + "/no/dump: its directory " + dir + "/no: stat"},
		{name: "dump file not nsca_user's", file: "nsca_user=nobody\ncommand_file=/c\nalternate_dump_file=/d/dump", asRoot: true,
			warn: "conf: v.cfg:3: alternate_dump_file=" + dir + "/dump: its directory " + dir + ": cannot create files in it"},
		{name: "key file not nsca_user's", file: "nsca_user=nobody\ngearman_server=g:4730\ngearman_keyfile=/d/file", asRoot: true,
			msg: "conf: v.cfg:3: gearman_keyfile=" + dir + "/file: permission denied"},
		{name: "key file missing", file: "gearman_server=g:4730\ngearman_keyfile=/d/nokey",
			msg: "conf: v.cfg:2: gearman_keyfile=" + dir + "/nokey: stat"},
		{name: "ca file missing", file: "icinga2_api_url=https://i:5665\nicinga2_api_user=u\nicinga2_ca_file=/d/ca",
			msg: "conf: v.cfg:3: icinga2_ca_file=" + dir + "/ca: stat"},
		{name: "no such user", file: "command_file=/c\nnsca_user=no-such-user-nsca",
			msg: "conf: v.cfg:2: nsca_user=no-such-user-nsca: no such user: create it"},
		{name: "no such group", file: "command_file=/c\nnsca_group=no-such-group-nsca",
			msg: "conf: v.cfg:2: nsca_group=no-such-group-nsca: no such group"},
		{name: "chroot missing", file: "command_file=/c\nnsca_chroot=/d/missing",
			msg: "conf: v.cfg:2: nsca_chroot=" + dir + "/missing: stat"},
		{name: "paths inside nsca_chroot", file: "nsca_chroot=/d\ncommand_file=/cmd\ncheck_result_path=/missing",
			msg: "conf: v.cfg:3: check_result_path=/missing: stat " + dir + "/missing"},
		{name: "pid_file directory missing", file: "command_file=/c\npid_file=/d/run/nsca.pid",
			warn: "conf: v.cfg:2: pid_file=" + dir + "/run/nsca.pid: its directory " + dir + "/run: no such file or directory: create it"},
		{name: "pid_file a directory", file: "command_file=/c\npid_file=/d", warn: "conf: v.cfg:2: pid_file=" + dir + ": is a directory"},
		{name: "server_address not this machine's", file: "command_file=/c\nserver_address=192.0.2.1",
			msg: "conf: v.cfg:2: server_address=192.0.2.1: 192.0.2.1 is not an address of this machine"},
		{name: "server_address loopback", file: "command_file=/c\nserver_address=localhost"},
		{name: "server_address unresolvable", file: "command_file=/c\nserver_address=no-such-host.invalid",
			msg: "conf: v.cfg:2: server_address=no-such-host.invalid: does not resolve to an address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.asRoot && !root {
				t.Skip("needs root to check as nobody")
			}
			if strings.HasSuffix(c.file, "check_result_path=") {
				t.Skip("no read-only directory here")
			}
			cfg, err := Parse("v.cfg", []byte(strings.ReplaceAll(c.file, "=/d", "="+dir)))
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.CheckSystem(Start{Listen: true})
			warnings := strings.Join(cfg.Warnings, "\n")
			switch {
			case c.warn != "" && (err != nil || !strings.Contains(warnings, c.warn)):
				t.Errorf("CheckSystem: %v, warnings %q; want it to start with a warning containing %q", err, warnings, c.warn)
			case c.msg == "" && err != nil:
				t.Errorf("CheckSystem: %v", err)
			case c.msg == "":
			case err == nil:
				t.Errorf("CheckSystem accepted it; want %q", c.msg)
			case !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), c.msg):
				t.Errorf("CheckSystem: %v; want ErrBadValue containing %q", err, c.msg)
			}
		})
	}
}

// TestWarnReload: a single process that drops to nsca_user warns when that
// user cannot read the file a reload reads, proposing a mode that works; a
// supervisor, which keeps root, does not.
func TestWarnReload(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to check as nobody")
	}
	dir := openDir(t)
	path := filepath.Join(dir, "nsca.cfg")
	for _, c := range []struct {
		text string
		mode os.FileMode
		want string
	}{
		{"nsca_user=nobody\ncommand_file=/c\n", 0o600, "nsca_user=nobody cannot read this file"},
		{"nsca_user=nobody\ncommand_file=/c\n", 0o644, ""},
		{"nsca_user=nobody\ncommand_file=/c\nnsca_workers=1\n", 0o600, ""},
	} {
		if err := os.WriteFile(path, []byte(c.text), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, c.mode)
		cfg, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.CheckSystem(Start{}); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(cfg.Warnings, "\n")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%q mode %04o: warnings %q, want %q", c.text, c.mode, got, c.want)
		}
		if c.want != "" && !strings.Contains(got, "chown root:nogroup "+path+"; chmod 0640 "+path) {
			t.Errorf("the warning does not propose chown root:nogroup; chmod 0640: %q", got)
		}
	}
}

// TestGroupAdvice: the fix proposed for a spool that nsca_user cannot
// write, and for a configuration file that others can read, is the group
// the monitoring core gave its command file and spool (nagios, nagcmd), not
// the daemon's own group (Debian's nsca.cfg says nogroup).
func TestGroupAdvice(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to check as nobody and to chown")
	}
	core, err := user.LookupGroupId("1") // a system group other than root: daemon on Debian
	if err != nil {
		t.Skip("no group 1 here")
	}
	dir := openDir(t)
	spool := filepath.Join(dir, "spool")
	if err := os.Mkdir(spool, 0o770); err != nil {
		t.Fatal(err)
	}
	os.Chown(spool, 0, 1)
	os.Chmod(spool, 0o750)
	cfg, err := Parse("g.cfg", []byte("nsca_user=nobody\nnsca_group=nogroup\ncheck_result_path="+spool+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.CheckSystem(Start{})
	if want := "set nsca_group=" + core.Name + ", its group"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckSystem: %v; want the advice %q", err, want)
	}
	mode := cfg.privateMode("/etc/nsca.cfg")
	if want := "chown root:" + core.Name + " /etc/nsca.cfg; chmod 0640 /etc/nsca.cfg, and set nsca_group=" + core.Name; !strings.HasPrefix(mode, want) {
		t.Errorf("privateMode: %q, want %q...", mode, want)
	}
}

// openDir is a temporary directory that every user may enter (t.TempDir's
// parent is closed to others), owned by the tests' user and 0755.
func openDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "nsca-conf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWarnCommandFile: an existing command file that nsca_user cannot write
// is a warning (results would go to the fallbacks), not a refusal: the core
// may fix its mode when it starts.
func TestWarnCommandFile(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to check as nobody")
	}
	dir := openDir(t)
	cmd := filepath.Join(dir, "nsca.cmd")
	for _, mode := range []os.FileMode{0o600, 0o666} {
		if err := os.WriteFile(cmd, nil, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(cmd, mode)
		cfg, err := Parse("w.cfg", []byte("nsca_user=nobody\nnsca_workers=1\ncommand_file="+cmd+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.CheckSystem(Start{}); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(cfg.Warnings, "\n")
		want := "conf: w.cfg:3: command_file=" + cmd + " cannot be written by the daemon's user"
		if mode == 0o600 && !strings.Contains(got, want) || mode == 0o666 && got != "" {
			t.Errorf("mode %04o: warnings %q", mode, got)
		}
	}
}

// TestMetricsAddressTaken: a start refuses a metrics_address another
// process listens on (before, the daemon started with one E line and no
// metrics while --check-config said all was well); a reload, whose running
// daemon holds the address itself, does not try it.
func TestMetricsAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := Parse("m.cfg", []byte("command_file=/c\nmetrics_address="+ln.Addr().String()+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "conf: m.cfg:2: metrics_address=" + ln.Addr().String() + ": cannot be listened on: "
	if err := cfg.CheckSystem(Start{Listen: true, Metrics: true}); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("start: %v, want %q...", err, want)
	}
	if err := cfg.CheckSystem(Start{Listen: true}); err != nil {
		t.Errorf("reload: %v", err)
	}
}
