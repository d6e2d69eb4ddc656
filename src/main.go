// Command nsca is nsca_fast: a drop-in replacement for the Nagios NSCA
// daemon. This file holds only flags, config loading, the choice of a run
// mode and exit codes; the process model is package proc, the pipeline
// package stages.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"os"
	"strings"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/src/proc"
	"nsca_fast/stages"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/emit"
	"nsca_fast/stages/emit/replay"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0"

func main() {
	code := run(os.Args[1:])
	proc.DrainLog()
	os.Exit(code)
}

func run(args []string) int {
	o, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: %v\nTry 'nsca -h' for the options.\n", err)
		return 2
	}
	if o.help || o.version || o.license {
		inform(o)
		return 0
	}
	setupLogging()
	defer glog.Flush()
	worker := proc.WorkerFromEnv()
	if o.configFile == "" {
		// Resolved once: a reload, a worker and the detached daemon read
		// the file the start found, whatever appears later.
		if o.configFile, err = findConfig(defaultConfigs); err != nil {
			return proc.Fail(err)
		}
		args = append([]string{"-c", o.configFile}, args...)
	}

	cfg, err := loadConfig(o)
	if err == nil && worker == nil && o.replay == "" {
		// A worker's configuration is the one its supervisor validated.
		err = validate(cfg, conf.Start{Listen: !o.inetd, Metrics: !o.inetd})
	}
	if cfg != nil && worker == nil && !o.inetd && !o.checkOnly && o.replay == "" {
		// Before the warnings and a refusal, so that they reach syslog or
		// the journal at their priority too.
		if err := proc.LogToSystem(cfg.LogFacility, o.foreground); err != nil {
			return proc.Fail(err)
		}
	}
	if cfg != nil {
		for _, w := range cfg.Warnings {
			glog.Warning(w)
		}
	}
	if err != nil {
		return proc.Fail(err)
	}
	if (cfg.Debug || o.checkOnly) && worker == nil {
		showConfig(cfg, o.checkOnly)
	}
	if o.replay != "" {
		return runReplay(cfg, o.replay)
	}
	if o.checkOnly {
		fmt.Println(stages.DescribeCipher(cfg))
		if len(cfg.Warnings) > 0 {
			// The daemon starts, but the warnings are worth a look.
			return exitWarnings
		}
		return 0
	}
	if o.pprofAddr != "" && worker == nil {
		go func() {
			glog.Infof("pprof on http://%s/debug/pprof/", o.pprofAddr)
			if err := http.ListenAndServe(o.pprofAddr, nil); err != nil {
				glog.Errorf("pprof: %v", err)
			}
		}()
	}
	// What every pipeline this process runs shares; each worker has
	// durable queues of its own.
	slot := -1
	if worker != nil {
		slot = worker.Slot
	}
	process := stages.NewProcess(slot)
	process.Counters = worker.Counters()
	app := &proc.App{
		Args:          args,
		Load:          func() (*conf.Config, error) { return loadConfig(o) },
		Check:         func(cfg *conf.Config) error { return validate(cfg, conf.Start{Listen: true}) },
		New:           func(cfg *conf.Config, lfds []int) (proc.Server, error) { return stages.New(cfg, lfds, process) },
		ServeOne:      stages.ServeInetd,
		Describe:      describe,
		CgoGoroutines: stages.CgoGoroutines,
		Reopen:        process.Reopens.Reopen,
		Clients:       process.Clients,
		Version:       Version,
	}
	switch {
	case worker != nil:
		return app.RunWorker(cfg, worker)
	case o.inetd:
		return app.RunInetd(cfg, o.foreground)
	case !o.foreground && !proc.Detached():
		return proc.Detach(args)
	}
	if cfg.Workers > 0 {
		return app.RunSupervisor(cfg)
	}
	return app.RunSingle(cfg)
}

// inform prints what -h, -V or -l asks for.
func inform(o *options) {
	switch {
	case o.help:
		usage(os.Stdout)
	case o.version:
		engine := "libmcrypt"
		if !cipher.HasLibmcrypt() {
			engine = "built without libmcrypt: methods 0, 1 and the native ones"
		}
		fmt.Printf("nsca_fast %s (NSCA 2.10 protocol, %s)\n", Version, engine)
	default:
		fmt.Println("nsca_fast is free software under the GNU General Public License, version 3 or later.\nThere is NO WARRANTY, to the extent permitted by law.")
	}
}

// showConfig prints the effective configuration for --check-config, or
// logs it for debug=1 and -d.
func showConfig(cfg *conf.Config, print bool) {
	for _, line := range cfg.Dump() {
		if print {
			fmt.Println(line)
		} else {
			glog.Infof("[config] %s", line)
		}
	}
}

// setupLogging sends glog to stderr unless the operator chose otherwise.
func setupLogging() {
	flag.CommandLine.Parse(nil) // glog wants flag.Parsed(); its flags were parsed by our FlagSet
	if f := flag.Lookup("logtostderr"); f != nil && !isSet("log_dir") && !isSet("alsologtostderr") {
		f.Value.Set("true")
	}
}

func isSet(name string) bool {
	f := flag.Lookup(name)
	return f != nil && f.Value.String() != f.DefValue
}

// exitWarnings is --check-config's exit status for a configuration the
// daemon starts with but warns about: 0 is clean, 1 refused.
const exitWarnings = 3

// builtinConfig is -c's name for the embedded default configuration.
const builtinConfig = "builtin"

// defaultConfigs are read without -c, the first that exists: the Debian nsca
// package's, then the C++ nsca_fast's.
var defaultConfigs = []string{"/etc/nsca.cfg", "/etc/nagios/nsca.cfg"}

// errNoConfig is why a daemon started without -c refuses to start.
var errNoConfig = errors.New("no configuration file")

// findConfig returns the first of paths that exists. Without one the
// daemon refuses to start rather than serve on the embedded default, which
// a drop-in replacement started by an old init script must not do silently.
func findConfig(paths []string) (string, error) {
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: neither %s exists; name one with -c FILE, or run on the embedded default "+
		"configuration with -c %s", errNoConfig, strings.Join(paths, " nor "), builtinConfig)
}

// describe is the start-up line's account of how the daemon serves, saying
// when that is on the embedded default, which is meant for trying out.
func describe(cfg *conf.Config) string {
	line := "nsca_fast " + Version + " "
	if cfg.File == conf.EmbeddedFile {
		line += "running on the embedded default configuration (-c " + builtinConfig + ", for trying out; " +
			"pass -c FILE in production), "
	}
	return line + stages.Describe(cfg)
}

// loadConfig reads -c FILE or the embedded default (-c builtin) and
// applies -n, -t, -d.
func loadConfig(o *options) (*conf.Config, error) {
	var cfg *conf.Config
	if o.configFile == builtinConfig {
		cfg = conf.Embedded()
	} else {
		var err error
		if cfg, err = conf.Load(o.configFile); err != nil {
			return nil, err
		}
	}
	if o.verbose {
		cfg.Debug = true
	}
	if o.workers >= 0 {
		cfg.Workers = o.workers
	}
	if o.threads >= 0 {
		cfg.ThreadsPerWorker = o.threads
	}
	return cfg, cfg.Validate()
}

// runReplay runs --replay PATH: 0 when every result reached every
// destination, 1 otherwise.
func runReplay(cfg *conf.Config, path string) int {
	rep, err := emit.Replay(cfg, path, replay.Options{Patience: replay.Patience,
		Progress: func(p replay.Progress) { fmt.Printf("nsca: replay %s: %s\n", path, p) }})
	fmt.Printf("nsca: replay %s: %s\n", path, rep)
	for _, s := range rep.Skipped {
		fmt.Printf("nsca: replay: skipped %s\n", s)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
		return 1
	}
	return 0
}
