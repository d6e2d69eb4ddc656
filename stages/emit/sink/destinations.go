package sink

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/dialect"
)

// ErrConfig wraps settings no destination can be built from.
var ErrConfig = errors.New("sink: config")

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
	Chain []Sink
	// Overflow takes the results that find the queue full, written at once
	// by the emit stage (separate instances from Chain's, so the two never
	// share a file handle); what it cannot take is dropped, counted and
	// logged. With a single destination, or when Blocking, it is unused:
	// then a full queue makes the pipeline wait, and the clients with it.
	Overflow []Sink
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

// Chain builds the local sinks in the order results try them: the command
// file first and the spool if it fails (nsca_fast's behaviour; with only one
// of them set, that one), then the alternate dump file as the last resort.
func Chain(cfg *conf.Config) ([]Sink, error) {
	chain, err := localFallbacks(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.CommandFile != "" {
		c := NewCommandFile(cfg.CommandFile, cfg.AppendToFile, cfg.AggregateWrites)
		// conf refuses this too, but not under nsca_chroot, where the path
		// means something only now.
		if err := c.Probe(); errors.Is(err, ErrIsDir) {
			closeSinks(chain)
			return nil, fmt.Errorf("%w: %w", ErrConfig, cfg.PathError("command_file", err))
		}
		// Worker processes share the command file, and the nsca-ng
		// listener writes its other commands beside this sink: each write
		// of lines holds a lock, so a line longer than PIPE_BUF is never
		// interleaved.
		c.Lock = cfg.Workers > 0 || cfg.NscaNGListen != ""
		if cfg.CheckResultPath == "" {
			// A full pipe means the core is alive but slow. Without a spool
			// the only other place is the dump file, which the core never
			// reads: wait longer for the pipe (the pipeline holds back
			// meanwhile).
			c.FullWait = fullWaitWithoutSpool
		}
		chain = append([]Sink{c}, chain...)
	}
	if cfg.CommandFile == "" && cfg.CheckResultPath == "" {
		closeSinks(chain)
		return nil, fmt.Errorf("%w: no sink: set command_file or check_result_path", ErrConfig)
	}
	return chain, nil
}

// localFallbacks builds what takes the results the command file cannot:
// the spool, then the dump file, each if configured.
func localFallbacks(cfg *conf.Config) ([]Sink, error) {
	var out []Sink
	if cfg.CheckResultPath != "" {
		s, err := spoolFor(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if cfg.AlternateDumpFile != "" {
		out = append(out, NewDump(cfg.AlternateDumpFile))
	}
	return out, nil
}

func spoolFor(cfg *conf.Config) (Sink, error) {
	s := NewSpool(cfg.CheckResultPath, cfg.SpoolFileMode)
	if err := s.Writable(); err != nil {
		// In the words of --check-config, which checked it as the user
		// running it; here it is checked as nsca_user, inside nsca_chroot.
		return nil, fmt.Errorf("%w: %w", ErrConfig, cfg.PathError("check_result_path", err))
	}
	return s.Capped(cfg.CheckResultPathMaxFiles, max(cfg.QueueSize, 1)), nil
}

// fallbackChain builds a remote sink's fallback (a *_fallback option's
// value): a spool, a dump file, or nothing.
func fallbackChain(cfg *conf.Config, option string) ([]Sink, error) {
	switch cfg.Fallback(option) {
	case conf.FallbackSpool:
		s, err := spoolFor(cfg)
		if err != nil {
			return nil, err
		}
		return []Sink{s}, nil
	case conf.FallbackDump:
		return []Sink{NewDump(cfg.AlternateDumpFile)}, nil
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
	open     func() (Sink, error)
}

// remotes lists the remote destination kinds, on or off in cfg.
func remotes(cfg *conf.Config, stats *counters.Stats, log *counters.RateLog) []remote {
	return []remote{
		{cfg.Icinga2URL != "", "icinga2", "icinga2_api_url", cfg.Icinga2Fallback, cfg.Icinga2QueueSize, func() (Sink, error) { return newIcinga(cfg, stats, log) }},
		{cfg.GearmanServers != "", "gearman", "gearman_server", cfg.GearmanFallback, cfg.GearmanQueueSize, func() (Sink, error) { return newGearman(cfg) }},
	}
}

// WarnStranded logs each durable queue directory in queue_directory that
// still holds results for a remote destination cfg does not have (its
// option is unset): no process delivers them, and nothing else would say
// so; --replay does deliver them. A daemon calls it at each start and
// reload, in its only process or worker slot 0 (the other slots do
// nothing), not in inetd's process per connection.
func WarnStranded(cfg *conf.Config) {
	if cfg.QueueDirectory == "" || WorkerSlot > 0 {
		return
	}
	for _, r := range remotes(cfg, nil, nil) {
		if !r.on {
			warnStranded(cfg, r.name, r.option)
		}
	}
}

// Destinations builds every destination the config asks for: the local
// core (command file, spool, dump file), Icinga 2's API and Gearman. On an
// error, the sinks built so far are closed.
func Destinations(cfg *conf.Config, stats *counters.Stats, log *counters.RateLog) (dests []Destination, err error) {
	defer func() {
		if err != nil {
			CloseDestinations(dests)
			dests = nil
		}
	}()
	kinds := remotes(cfg, stats, log)
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
		if local.Chain, err = Chain(cfg); err != nil {
			return dests, err
		}
		dests = append(dests, local)
		if overflows && len(local.Chain) > 1 {
			// The overflow skips the command file (with remote sinks, the
			// local destination exists only for it): the queue is full
			// because the core reads it too slowly.
			overflow, err := localFallbacks(cfg)
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
			return dests, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if s, err = durableFor(cfg, s, stats, log); err != nil {
			return dests, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		d := Destination{Name: r.name, Chain: []Sink{s}, Capacity: r.capacity, Remote: true}
		dests = append(dests, d)
		fallback, err := fallbackChain(cfg, r.fallback)
		if err != nil {
			return dests, err
		}
		dests[len(dests)-1].Chain = append(dests[len(dests)-1].Chain, fallback...)
		if overflows {
			if dests[len(dests)-1].Overflow, err = fallbackChain(cfg, r.fallback); err != nil {
				return dests, err
			}
		}
	}
	if len(dests) == 0 {
		return nil, fmt.Errorf("%w: no sink: set command_file, check_result_path, icinga2_api_url or gearman_server", ErrConfig)
	}
	var lossy *atomic.Uint64
	if stats != nil {
		lossy = &stats.DialectLossy
	}
	useDialect(dests, cfg.CommandFileDialect, lossy)
	return dests, nil
}

// useDialect makes every sink a core reads (command file, spool, dump file,
// wherever in a chain or overflow) write command_file_dialect, counting its
// lossy results in lossy.
func useDialect(dests []Destination, d dialect.Dialect, lossy *atomic.Uint64) {
	for _, dest := range dests {
		for _, s := range append(dest.Chain[:len(dest.Chain):len(dest.Chain)], dest.Overflow...) {
			if ds, ok := s.(Dialected); ok {
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

func closeSinks(sinks []Sink) {
	for _, s := range sinks {
		s.Close()
	}
}

func newIcinga(cfg *conf.Config, stats *counters.Stats, log *counters.RateLog) (Sink, error) {
	s, err := NewIcinga(IcingaConfig{
		URL: cfg.Icinga2URL, User: cfg.Icinga2User, Password: cfg.Icinga2Password,
		CertFile: cfg.Icinga2ClientCert, KeyFile: cfg.Icinga2ClientKey, CAFile: cfg.Icinga2CAFile,
		Insecure: !cfg.Icinga2VerifyTLS, MaxInFlight: cfg.Icinga2MaxInFlight,
		Timeout: time.Duration(cfg.Icinga2Timeout) * time.Second, Retries: cfg.Icinga2Retries,
		Stats: stats, Log: log,
	})
	if err != nil {
		return nil, cfg.PathError("icinga2_api_url", err)
	}
	return s, nil
}

func newGearman(cfg *conf.Config) (Sink, error) {
	gc := GearmanConfig{
		Servers: cfg.GearmanServerList(), Queue: cfg.GearmanQueue, Encrypt: cfg.GearmanEncryption,
		Timeout: time.Duration(cfg.GearmanTimeout) * time.Second,
	}
	if cfg.GearmanEncryption {
		gc.Key = []byte(cfg.GearmanKey)
		if cfg.GearmanKeyFile != "" {
			key, err := ReadGearmanKeyFile(cfg.GearmanKeyFile)
			if err != nil {
				return nil, cfg.PathError("gearman_keyfile", err)
			}
			gc.Key = key
		}
	}
	s, err := NewGearman(gc)
	if err != nil {
		return nil, cfg.PathError("gearman_server", err)
	}
	return s, nil
}

// Check builds the remote sinks cfg configures, without their durable
// queues, and closes them again: it reads their key file and certificates
// as Destinations does, so that a configuration check refuses what the
// daemon would.
func Check(cfg *conf.Config) error {
	for _, r := range remotes(cfg, nil, nil) {
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
