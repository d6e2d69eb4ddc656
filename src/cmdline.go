package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// errUsage wraps a command line the daemon cannot run with.
var errUsage = errors.New("bad command line")

// options are the command line: stock's flags and nsca_fast's.
type options struct {
	configFile string
	foreground bool
	single     bool
	inetd      bool
	help       bool
	version    bool
	license    bool
	verbose    bool
	workers    int
	threads    int
	pprofAddr  string
	checkOnly  bool
	replay     string
}

// flagSpec is one row of the daemon's own flags: its names (a short one
// first, as getopt's, then long ones), the name of its argument ("" for a
// switch), and its line of the usage text.
type flagSpec struct {
	names []string
	arg   string
	usage string
	bind  func(o *options, fs *flag.FlagSet, name string)
}

func boolFlag(p func(*options) *bool) func(*options, *flag.FlagSet, string) {
	return func(o *options, fs *flag.FlagSet, name string) { fs.BoolVar(p(o), name, false, "") }
}

func intFlag(p func(*options) *int) func(*options, *flag.FlagSet, string) {
	return func(o *options, fs *flag.FlagSet, name string) { fs.IntVar(p(o), name, -1, "") }
}

func stringFlag(p func(*options) *string) func(*options, *flag.FlagSet, string) {
	return func(o *options, fs *flag.FlagSet, name string) { fs.StringVar(p(o), name, "", "") }
}

// flagSpecs are the daemon's flags in the order the usage text lists them:
// the C++ nsca_fast's (-c, -d, -f, -n, -t) and stock's, then this
// project's.
var flagSpecs = []flagSpec{
	{[]string{"c"}, "FILE", "configuration file; builtin: the embedded default; without -c: /etc/nsca.cfg, else /etc/nagios/nsca.cfg", stringFlag(func(o *options) *string { return &o.configFile })},
	{[]string{"d"}, "", "verbose output: log the effective configuration and every check", boolFlag(func(o *options) *bool { return &o.verbose })},
	{[]string{"f", "foreground"}, "", "foreground: do not detach, log to stderr", boolFlag(func(o *options) *bool { return &o.foreground })},
	{[]string{"n"}, "MAX_WORKERS", "worker processes, 0..100 (overrides nsca_workers)", intFlag(func(o *options) *int { return &o.workers })},
	{[]string{"t"}, "THREADS", "decrypt threads per worker, 0..1000 (overrides nsca_threads_per_worker)", intFlag(func(o *options) *int { return &o.threads })},
	{[]string{"i", "inetd"}, "", "serve the one connection on stdin (inetd) and exit", boolFlag(func(o *options) *bool { return &o.inetd })},
	{[]string{"s", "single", "daemon"}, "", "accepted for stock nsca's command lines; changes nothing", boolFlag(func(o *options) *bool { return &o.single })},
	{[]string{"check-config"}, "", "check the configuration as a start does, print it, exit", boolFlag(func(o *options) *bool { return &o.checkOnly })},
	{[]string{"replay"}, "PATH", "deliver the results of a dump file, spool or queue to the destinations, exit", stringFlag(func(o *options) *string { return &o.replay })},
	{[]string{"pprof"}, "ADDR", "serve Go's profiler on ADDR (e.g. 127.0.0.1:6060)", stringFlag(func(o *options) *string { return &o.pprofAddr })},
	{[]string{"h", "help"}, "", "this screen", boolFlag(func(o *options) *bool { return &o.help })},
	{[]string{"V", "version"}, "", "show the version", boolFlag(func(o *options) *bool { return &o.version })},
	{[]string{"l", "license"}, "", "show the license", boolFlag(func(o *options) *bool { return &o.license })},
}

// usage writes the help text: the daemon's own flags, as the C++ nsca_fast
// and stock list theirs. glog's flags are accepted but not listed.
func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: nsca [OPTIONS]\nnsca_fast %s, a drop-in replacement for the Nagios NSCA daemon.\n\n", Version)
	for _, f := range flagSpecs {
		var names []string
		for _, n := range f.names {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			names = append(names, dash+n)
		}
		left := strings.Join(names, ", ")
		if len(f.names[0]) > 1 {
			left = "    " + left
		}
		if f.arg != "" {
			left += " " + f.arg
		}
		fmt.Fprintf(w, "  %-26s %s\n", left, f.usage)
	}
	fmt.Fprint(w, "\nShort options can be combined (-fd, -fc FILE). Exit status: 0 after a stop by signal,\n"+
		"1 when the daemon cannot start, 2 for a bad command line; --check-config: 0 when the daemon\n"+
		"starts without a warning, 3 when it starts but warns, 1 when it refuses.\n")
}

// parseFlags reads the command line. glog's flags (-v, -vmodule,
// -log_dir ...) stay accepted beside the daemon's own.
func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := fs.Parse(splitShort(fs, args)); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if o.workers > 100 || o.workers < -1 {
		return nil, fmt.Errorf("%w: -n %d: max workers must be between 0 and 100", errUsage, o.workers)
	}
	if o.threads > 1000 || o.threads < -1 {
		return nil, fmt.Errorf("%w: -t %d: threads must be between 0 and 1000", errUsage, o.threads)
	}
	return o, nil
}

// newFlagSet is the daemon's flags, bound to o, and glog's.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("nsca", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error is printed once, by the caller
	for _, f := range flagSpecs {
		for _, n := range f.names {
			f.bind(o, fs, n)
		}
	}
	flag.CommandLine.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	return fs
}

// splitShort rewrites combined short flags as getopt reads them: -fd is
// -f -d, -fc FILE is -f -c FILE, -n2 is -n 2. An argument that names a flag
// as it is (such as glog's -stderrthreshold), or holds a letter that is no
// short flag, is left alone; so is everything after "--" and the value of a
// flag that takes one.
func splitShort(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil || !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") || len(a) < 3 {
			out = append(out, a)
			if f != nil && !hasValue && !isBool(f) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		split, needsValue, ok := splitCluster(fs, a[1:])
		if !ok {
			out = append(out, a)
			continue
		}
		out = append(out, split...)
		if needsValue && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// splitCluster splits the letters of one "-xyz" argument into flags; ok is
// false unless every letter up to a flag taking a value (which takes the
// rest as its value, or else needs the next argument) is a one-letter flag.
func splitCluster(fs *flag.FlagSet, letters string) (split []string, needsValue, ok bool) {
	for j := 0; j < len(letters); j++ {
		f := fs.Lookup(letters[j : j+1])
		if f == nil {
			return nil, false, false
		}
		split = append(split, "-"+f.Name)
		if !isBool(f) {
			if rest := letters[j+1:]; rest != "" {
				return append(split, rest), false, true
			}
			return split, true, true
		}
	}
	return split, false, true
}

// isBool says whether f is a switch, taking no value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
