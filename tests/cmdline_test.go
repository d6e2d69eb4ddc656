package tests

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestCommandLineHelp: `nsca -h` lists the daemon's own options, as the C++
// nsca_fast and stock do, and none of glog's, with no Go-style defaults.
func TestCommandLineHelp(t *testing.T) {
	out, err := exec.Command(daemonBin(), "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("nsca -h: %v\n%s", err, out)
	}
	help := string(out)
	t.Logf("nsca -h:\n%s", help)
	if !strings.HasPrefix(help, "Usage: nsca [OPTIONS]\n") {
		t.Errorf("nsca -h does not start with the usage line")
	}
	for _, want := range []string{"-c FILE", "-d ", "-f, --foreground", "-n MAX_WORKERS", "-t THREADS", "-i, --inetd",
		"-s, --single, --daemon", "--check-config", "--replay PATH", "--pprof ADDR", "-h, --help", "-V, --version", "-l, --license"} {
		if !strings.Contains(help, "  "+want) {
			t.Errorf("nsca -h does not list %q", want)
		}
	}
	for _, unwanted := range []string{"vmodule", "log_dir", "logtostderr", "stderrthreshold", "log_backtrace_at", "(default"} {
		if strings.Contains(help, unwanted) {
			t.Errorf("nsca -h shows %q", unwanted)
		}
	}
	bad := exec.Command(daemonBin(), "-fdq")
	out, err = bad.CombinedOutput()
	if bad.ProcessState == nil || bad.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "Try 'nsca -h'") {
		t.Errorf("nsca -fdq: %v, want exit status 2 and a pointer to -h:\n%s", err, out)
	}
}

// TestCommandLineCombined: combined short flags work as getopt reads them
// (the C++ nsca_fast's -fd among them), glog's flags are still accepted, and
// neither is taken for the other.
func TestCommandLineCombined(t *testing.T) {
	for _, args := range [][]string{
		{"-fd", "-c", "CFG"},
		{"-fdc", "CFG"},
		{"-dfcCFG", "-stderrthreshold=INFO"},
		{"-sfd", "-n0", "-t", "1", "-c", "CFG", "-v", "1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			d := startDaemonWith(t, Config{"command_file": commandFile(t, t.TempDir())}, daemonOpts{
				wrap: func(bin string, harness []string) *exec.Cmd {
					cfg := harness[1] // the harness runs -c CFG -f
					var mine []string
					for _, a := range args {
						mine = append(mine, strings.ReplaceAll(a, "CFG", cfg))
					}
					return exec.Command(bin, mine...)
				},
			})
			// It serves in the foreground (the harness's process is the
			// daemon) and -d logged the effective configuration.
			d.waitLog(regexp.MustCompile(`\[config\] server_port=`), startTimeout)
			d.Stop()
		})
	}
}
