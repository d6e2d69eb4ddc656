package tests

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// decryption_engine (issue 14): the native engines must serve the real
// send_nsca exactly as libmcrypt does, with 4304-byte and legacy 720-byte
// packets, in both decryption modes, also in a build without libmcrypt.

// nativeMethods are the methods with a native engine, with NSClient++'s name
// for each (its client makes packets of any payload length), "" where
// NSClient++ has no such cipher.
var nativeMethods = []struct {
	method int
	nscp   string
}{{2, "des"}, {3, "3des"}, {4, "cast128"}, {5, ""}, {6, "xtea"}, {8, "blowfish"}, {9, "twofish"}, {10, ""},
	{11, "rc2"}, {14, "aes"}, {15, ""}, {16, ""}, {20, "serpent"}, {23, ""}, {26, ""}}

// buildNoCgo builds the daemon with CGO_ENABLED=0 (so without libmcrypt)
// into a temporary directory of t and returns its path.
func buildNoCgo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nsca-nocgo")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "nsca_fast/src")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build -o %s nsca_fast/src: %v\n%s", bin, err, out)
	}
	return bin
}

// TestNativeEngine sends with the real send_nsca (4304-byte packets, and
// 720-byte ones with --legacy-2-7-mode) and, where it has the cipher, with
// the NSClient++ client (720-byte packets, several per connection) to a
// daemon with
// decryption_engine=native, for every native method in both modes, and
// checks the exact lines and that the log names the engine and the
// self-test: passed with libmcrypt built in, skipped without.
func TestNativeEngine(t *testing.T) {
	nscp := buildNSCPClient(t)
	builds := []struct {
		name, bin string
		selfTest  *regexp.Regexp
	}{
		{"cgo", "", regexp.MustCompile(`self-test passed: \d+ streams`)},
		{"nocgo", buildNoCgo(t), regexp.MustCompile(`self-test skipped: .*built without cgo, so without libmcrypt`)},
	}
	for _, b := range builds {
		for _, m := range nativeMethods {
			for _, mode := range []int{0, 1} {
				t.Run(fmt.Sprintf("%s/method=%d/mode=%d", b.name, m.method, mode), func(t *testing.T) {
					t.Parallel()
					cmd := commandFile(t, t.TempDir())
					d := startDaemonWith(t, Config{"command_file": cmd, "append_to_file": "1", "password": longPassword,
						"decryption_method": strconv.Itoa(m.method), "decryption_engine": "native",
						"decryption_mode": strconv.Itoa(mode)}, daemonOpts{bin: b.bin})
					tag := fmt.Sprintf("%s-m%d-d%d", b.name, m.method, mode)
					lo := now()
					cl := Client{Password: longPassword, Method: m.method}
					input, want := threeChecks(tag + "-big")
					cl.send(t, d.Port, input, 3)
					waitFileLines(t, cmd, len(want)) // separate connections have no order

					cl.Args = []string{"--legacy-2-7-mode"}
					legacyIn, legacyWant := threeChecks(tag + "-legacy")
					cl.send(t, d.Port, legacyIn, 3)
					want = append(want, legacyWant...)
					waitFileLines(t, cmd, len(want))

					if m.nscp != "" {
						rs, nscpWant := nscpChecks(tag+"-nscp", 512)
						if out, err := nscpSend(t, nscp, d.Port, m.nscp, longPassword, 512, 0, rs); err != nil {
							t.Fatalf("nscp_client: %v\n%s", err, out)
						}
						want = append(want, nscpWant...)
					}
					deliverAll(t, d, cmd, lo, want)

					log := d.Stderr()
					if !b.selfTest.MatchString(log) {
						t.Errorf("the log does not report the self-test (want %v):\n%s", b.selfTest, log)
					}
					startup := regexp.MustCompile(fmt.Sprintf(`decryption_method=%d \(\S+\) by native \(decryption_engine=native\)`, m.method))
					if !startup.MatchString(log) {
						t.Errorf("the start-up line does not name the native engine (want %v):\n%s", startup, log)
					}
				})
			}
		}
	}
}

// TestEngineRefusals: both builds say what they are, and --check-config says
// which engine serves. Every usable stock method has a native engine now, so
// no method is left for decryption_engine=native or a build without
// libmcrypt to refuse.
func TestEngineRefusals(t *testing.T) {
	nocgo := buildNoCgo(t)
	t.Run("version", func(t *testing.T) {
		for bin, want := range map[string]string{daemonBin(): "(NSCA 2.10 protocol, libmcrypt)",
			nocgo: "(NSCA 2.10 protocol, built without libmcrypt: methods 0, 1 and the native ones)"} {
			out, err := exec.Command(bin, "-V").CombinedOutput()
			if err != nil || !strings.Contains(string(out), want) {
				t.Errorf("%s -V: %v; want %q in: %s", filepath.Base(bin), err, want, out)
			}
		}
	})
	t.Run("check-config", func(t *testing.T) {
		for _, c := range []struct {
			bin  string
			cfg  Config
			want string
		}{
			{daemonBin(), Config{"decryption_method": "14", "decryption_engine": "auto"}, "decryption_method=14 (rijndael-128) is served by native (decryption_engine=auto): self-test passed"},
			{daemonBin(), Config{"decryption_method": "9", "decryption_engine": "auto"}, "decryption_method=9 (twofish) is served by native (decryption_engine=auto): self-test passed"},
			{daemonBin(), Config{"decryption_method": "9", "decryption_engine": "libmcrypt"}, "decryption_method=9 (twofish) is served by libmcrypt (decryption_engine=libmcrypt)"},
			{daemonBin(), Config{"decryption_method": "3", "decryption_engine": "libmcrypt"}, "decryption_method=3 (tripledes) is served by libmcrypt (decryption_engine=libmcrypt)"},
			{daemonBin(), Config{"decryption_method": "3"}, "decryption_method=3 (tripledes) is served by native (decryption_engine=auto): self-test passed"},
			{daemonBin(), Config{"decryption_method": "aes128"}, "decryption_method=aes128 (aes128) is served by native"},
			{nocgo, Config{"decryption_method": "3", "decryption_engine": "libmcrypt"}, "decryption_method=3 (tripledes) is served by native (decryption_engine=libmcrypt): self-test skipped"},
			{nocgo, Config{"decryption_method": "3"}, "decryption_method=3 (tripledes) is served by native (decryption_engine=auto): self-test skipped"},
		} {
			cfg := merge(Config{"command_file": commandFile(t, t.TempDir()), "password": shortPassword}, c.cfg)
			path := filepath.Join(t.TempDir(), "nsca.cfg")
			writeFile(t, path, cfg.text(), 0o600)
			out, err := exec.Command(c.bin, "-c", path, "--check-config").CombinedOutput()
			if err != nil || !strings.Contains(string(out), c.want) {
				t.Errorf("%s --check-config with %v: %v; want %q in:\n%s", filepath.Base(c.bin), c.cfg, err, c.want, out)
			}
		}
	})
}
