package emit

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"nsca_fast/stages/emit/gearman"
	"nsca_fast/stages/emit/icinga2"
	"nsca_fast/stages/emit/replay"
	"nsca_fast/stages/emit/sink"

	"nsca_fast/conf"
	"nsca_fast/conf/option"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/dialect"
)

// errConfig wraps settings no destination can be built from.
var errConfig = errors.New("sink: config")

// Settings derived from the config that are not options of their own.
const (
	fullWaitWithoutSpool = 10 * time.Second
	// localOverflowDepth is the least the local destination queues, when
	// remote sinks run beside it, before results overflow to the spool.
	localOverflowDepth = 10000
)

// Destination is one independent way out of the daemon: the local core's
// command file (with the spool and dump file behind it), Icinga 2's API, or
// Gearman. Every result goes to every destination. Each has its own bounded
// queue and goroutine, so a slow or dead one holds up nobody else.
type Destination struct {
	// Name labels its counters and log lines.
	Name string
	// Chain is tried in order by the destination's goroutine: a result
	// goes to the first sink that takes it.
	Chain []sink.Sink
	// Overflow takes the results that find the queue full, written at once
	// by the emit stage (separate instances from Chain's, so the two never
	// share a file handle); what it cannot take is dropped, counted and
	// logged. With a single destination, or when Blocking, it is unused:
	// then a full queue makes the pipeline wait, and the clients with it.
	Overflow []sink.Sink
	// Blocking makes a full queue wait rather than overflow: for the local
	// command file without a spool or dump file, where overflowing could
	// only drop.
	Blocking bool
	// Remote marks a destination whose first sink is a network service:
	// once the drain is aborted (a second SIGTERM), queued results skip it
	// and go straight to the rest of the chain, so a hung engine cannot
	// hold the exit for retries and timeouts.
	Remote bool
	// Capacity bounds the results queued, in results.
	Capacity int
}

// Process is what the destinations of one process share across the
// pipelines it runs (a reload builds a new one beside the old, which
// drains): its worker slot, whose durable queues are its own, the reopen
// requests of SIGUSR1, and the Gearman results' start_times.
type Process struct {
	// Slot is the worker slot (nsca_workers > 0), or -1 for the daemon's
	// only process.
	Slot int
	// Reopens and Stamps, when set, are handed to the sinks that use them.
	Reopens *sink.Reopener
	Stamps  *gearman.Stamps
}

// localChain builds the local sinks in the order results try them: the
// command file first and the spool if it fails (nsca_fast's behaviour; with
// only one of them set, that one), then the alternate dump file as the
// last resort.
func localChain(cfg *conf.Config, p Process) ([]sink.Sink, error) {
	chain, err := localFallbacks(cfg, p)
	if err != nil {
		return nil, err
	}
	if cfg.CommandFile != "" {
		c := sink.NewCommandFile(cfg.CommandFile, cfg.AppendToFile, cfg.AggregateWrites)
		c.Reopens = p.Reopens
		// conf refuses this too, but not under nsca_chroot, where the path
		// means something only now.
		if err := c.Probe(); errors.Is(err, sink.ErrIsDir) {
			closeSinks(chain)
			return nil, fmt.Errorf("%w: %w", errConfig, cfg.PathError("command_file", err))
		}
		// Worker processes share the command file: each write of lines
		// holds a lock, so a line longer than PIPE_BUF is never
		// interleaved.
		c.Lock = cfg.Workers > 0
		if cfg.CheckResultPath == "" {
			// A full pipe means the core is alive but slow. Without a spool
			// the only other place is the dump file, which the core never
			// reads: wait longer for the pipe (the pipeline holds back
			// meanwhile).
			c.FullWait = fullWaitWithoutSpool
		}
		chain = append([]sink.Sink{c}, chain...)
	}
	if cfg.CommandFile == "" && cfg.CheckResultPath == "" {
		closeSinks(chain)
		return nil, fmt.Errorf("%w: no sink: set command_file or check_result_path", errConfig)
	}
	return chain, nil
}

// localFallbacks builds what takes the results the command file cannot:
// the spool, then the dump file, each if configured.
func localFallbacks(cfg *conf.Config, p Process) ([]sink.Sink, error) {
	var out []sink.Sink
	if cfg.CheckResultPath != "" {
		s, err := spoolFor(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if cfg.AlternateDumpFile != "" {
		out = append(out, dumpFor(cfg, p))
	}
	return out, nil
}

func spoolFor(cfg *conf.Config) (sink.Sink, error) {
	s := sink.NewSpool(cfg.CheckResultPath, cfg.SpoolFileMode)
	if err := s.Writable(); err != nil {
		// In the words of --check-config, which checked it as the user
		// running it; here it is checked as nsca_user, inside nsca_chroot.
		return nil, fmt.Errorf("%w: %w", errConfig, cfg.PathError("check_result_path", err))
	}
	return s.Capped(cfg.CheckResultPathMaxFiles, max(cfg.QueueSize, 1)), nil
}

// dumpFor is the alternate dump file, following p's reopens.
func dumpFor(cfg *conf.Config, p Process) sink.Sink {
	d := sink.NewDump(cfg.AlternateDumpFile)
	d.Reopens = p.Reopens
	return d
}

// fallbackChain builds a remote sink's fallback (a *_fallback option's
// value): a spool, a dump file, or nothing.
func fallbackChain(cfg *conf.Config, option string, p Process) ([]sink.Sink, error) {
	switch cfg.Fallback(option) {
	case conf.FallbackSpool:
		s, err := spoolFor(cfg)
		if err != nil {
			return nil, err
		}
		return []sink.Sink{s}, nil
	case conf.FallbackDump:
		return []sink.Sink{dumpFor(cfg, p)}, nil
	}
	return nil, nil
}

// remote is a remote destination kind, as cfg sets it up.
type remote struct {
	on       bool
	name     string // the sink's, and its queue directory's
	option   string // the option that turns it on
	fallback string
	capacity int
	open     func() (sink.Sink, error)
}

// remotes lists the remote destination kinds, on or off in cfg.
func remotes(cfg *conf.Config, p Process, stats *counters.Stats, log *counters.RateLog) []remote {
	return []remote{
		{cfg.Icinga2.On(), "icinga2", "icinga2_api_url", cfg.Icinga2.Fallback, cfg.Icinga2.QueueSize, func() (sink.Sink, error) {
			s, err := icinga2.New(icinga2.Config{Options: cfg.Icinga2, Stats: stats, Log: log})
			if err != nil {
				return nil, optionError(cfg, "icinga2_api_url", err)
			}
			return s, nil
		}},
		{cfg.Gearman.On(), "gearman", "gearman_server", cfg.Gearman.Fallback, cfg.Gearman.QueueSize, func() (sink.Sink, error) {
			s, err := gearman.New(cfg.Gearman)
			if err != nil {
				return nil, optionError(cfg, "gearman_server", err)
			}
			if p.Stamps != nil {
				s.Stamps = p.Stamps
			}
			return s, nil
		}},
	}
}

// WarnStranded logs each durable queue directory in queue_directory that
// still holds results for a remote destination cfg does not have (its
// option is unset): no process delivers them, and nothing else would say
// so; --replay does deliver them. A daemon calls it at each start and
// reload, in its only process (slot -1) or worker slot 0 (the other slots
// do nothing), not in inetd's process per connection.
func WarnStranded(cfg *conf.Config, slot int) {
	if cfg.QueueDirectory == "" || slot > 0 {
		return
	}
	for _, r := range remotes(cfg, Process{Slot: -1}, nil, nil) {
		if !r.on {
			warnStranded(cfg, r.name, r.option)
		}
	}
}

// Destinations builds every destination the config asks for: the local
// core (command file, spool, dump file), Icinga 2's API and Gearman, for
// the process p (its durable queues are those of its slot),
// and creates their sinks' counters in stats (when set). On an error, the
// sinks built so far are closed.
func Destinations(cfg *conf.Config, p Process, stats *counters.Stats, log *counters.RateLog) (dests []Destination, err error) {
	defer func() {
		if err != nil {
			CloseDestinations(dests)
			dests = nil
		}
	}()
	kinds := remotes(cfg, p, stats, log)
	count := 0
	if cfg.LocalSinks() {
		count++
	}
	for _, r := range kinds {
		if r.on {
			count++
		}
	}
	// A single destination never overflows (its full queue makes the
	// clients wait), so it needs no overflow sinks.
	overflows := count > 1
	if cfg.LocalSinks() {
		local := Destination{Name: "local", Capacity: max(cfg.QueueSize, 1), Blocking: true}
		if local.Chain, err = localChain(cfg, p); err != nil {
			return dests, err
		}
		dests = append(dests, local)
		if overflows && len(local.Chain) > 1 {
			// The overflow skips the command file (with remote sinks, the
			// local destination exists only for it): the queue is full
			// because the core reads it too slowly.
			overflow, err := localFallbacks(cfg, p)
			if err != nil {
				return dests, err
			}
			dests[0].Overflow, dests[0].Blocking = overflow, false
			// The core reads in bursts: only a backlog this deep, not a
			// burst of clients, should send results past the command file.
			dests[0].Capacity = max(cfg.QueueSize, localOverflowDepth)
		}
	}
	for _, r := range kinds {
		if !r.on {
			continue
		}
		s, err := r.open()
		if err != nil {
			return dests, fmt.Errorf("%w: %w", errConfig, err)
		}
		if s, err = durableFor(cfg, p.Slot, s, stats, log); err != nil {
			return dests, fmt.Errorf("%w: %w", errConfig, err)
		}
		d := Destination{Name: r.name, Chain: []sink.Sink{s}, Capacity: r.capacity, Remote: true}
		dests = append(dests, d)
		fallback, err := fallbackChain(cfg, r.fallback, p)
		if err != nil {
			return dests, err
		}
		dests[len(dests)-1].Chain = append(dests[len(dests)-1].Chain, fallback...)
		if overflows {
			if dests[len(dests)-1].Overflow, err = fallbackChain(cfg, r.fallback, p); err != nil {
				return dests, err
			}
		}
	}
	if len(dests) == 0 {
		return nil, fmt.Errorf("%w: %s", errConfig, conf.NoSink)
	}
	var lossy *atomic.Uint64
	if stats != nil {
		lossy = &stats.DialectLossy
		registerSinks(stats, dests)
	}
	useDialect(dests, cfg.CommandFileDialect, lossy)
	return dests, nil
}

// registerSinks creates every counter of the destinations' sinks, so their
// series exist from the start at zero: a first rate() sees the first event.
func registerSinks(stats *counters.Stats, dests []Destination) {
	for _, d := range dests {
		stats.FellBack(d.Name)
		for _, s := range append(d.Chain, d.Overflow...) {
			stats.Emitted(s.Name())
			stats.SinkErrors(s.Name())
			stats.FellBack(s.Name())
			stats.SinkDown(s.Name())
		}
	}
}

// useDialect makes every sink a core reads (command file, spool, dump file,
// wherever in a chain or overflow) write command_file_dialect, counting its
// lossy results in lossy.
func useDialect(dests []Destination, d dialect.Dialect, lossy *atomic.Uint64) {
	for _, dest := range dests {
		for _, s := range append(dest.Chain[:len(dest.Chain):len(dest.Chain)], dest.Overflow...) {
			if ds, ok := s.(sink.Dialected); ok {
				ds.UseDialect(d, lossy)
			}
		}
	}
}

// CloseDestinations closes the sinks of destinations that will not run.
func CloseDestinations(dests []Destination) {
	for _, d := range dests {
		closeSinks(d.Chain)
		closeSinks(d.Overflow)
	}
}

func closeSinks(sinks []sink.Sink) {
	for _, s := range sinks {
		s.Close()
	}
}

// optionError reports an error of a remote engine's constructor (a file it
// could not load) as a configuration error of the option it names (an
// *option.Error), else of name.
func optionError(cfg *conf.Config, name string, err error) error {
	var oe *option.Error
	if errors.As(err, &oe) {
		name = oe.Option
	}
	return cfg.PathError(name, err)
}

// Check builds the remote sinks cfg configures, without their durable
// queues, and closes them again: it reads their key file and certificates
// as Destinations does, so that a configuration check refuses what the
// daemon would.
func Check(cfg *conf.Config) error {
	for _, r := range remotes(cfg, Process{Slot: -1}, nil, nil) {
		if !r.on {
			continue
		}
		s, err := r.open()
		if err != nil {
			return err // a conf error, with the file and line
		}
		s.Close()
	}
	return nil
}

// Replay delivers the results of path (an alternate_dump_file, a spool
// directory or a durable queue directory) to the destinations cfg
// configures (see replaySinks), as --replay does.
func Replay(cfg *conf.Config, path string, opts replay.Options) (replay.Report, error) {
	return replay.Run(path, func() ([]sink.Sink, error) { return replaySinks(cfg, path) }, opts)
}

// replaySinks opens the destinations a replay of input delivers to: every
// remote one cfg configures and, when cfg writes to the local core (see
// conf.Config.LocalSinks), its command_file, or check_result_path when
// there is no command file. The dump file, the last resort that no core
// reads, is never one, and neither is the spool a replay reads.
func replaySinks(cfg *conf.Config, input string) ([]sink.Sink, error) {
	var sinks []sink.Sink
	for _, r := range remotes(cfg, Process{Slot: -1}, nil, nil) {
		if !r.on {
			continue
		}
		s, err := r.open()
		if err != nil {
			closeSinks(sinks)
			return nil, fmt.Errorf("%w: %w", errConfig, err)
		}
		sinks = append(sinks, s)
	}
	if !cfg.LocalSinks() {
		return sinks, nil
	}
	var local sink.Sink
	switch {
	case cfg.CommandFile != "":
		c := sink.NewCommandFile(cfg.CommandFile, cfg.AppendToFile, false)
		// A running daemon may write the command file at the same time.
		c.Lock = true
		local = c
	case cfg.CheckResultPath != "" && !sameFile(cfg.CheckResultPath, input):
		s, err := spoolFor(cfg)
		if err != nil {
			closeSinks(sinks)
			return nil, err
		}
		local = s
	default:
		return sinks, nil
	}
	if d, ok := local.(sink.Dialected); ok {
		d.UseDialect(cfg.CommandFileDialect, nil)
	}
	return append(sinks, named{local, "local"}), nil
}

// sameFile says whether paths a and b name the same file.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// named is a sink under another name: the command file's own changes with
// the kind of file it last opened, and a replay's report keys on it.
type named struct {
	sink.Sink
	name string
}

func (n named) Name() string { return n.name }

// TakesCommands is the wrapped sink's: a capability the embedded
// interface does not carry over.
func (n named) TakesCommands() bool { return sink.TakesCommands(n.Sink) }
