// Package conf reads nsca.cfg with the rules of stock nsca 2.10 and checks
// every option before the daemon starts, so that an operator's existing file
// keeps working and a mistake is reported with its file and line instead of
// surfacing later as a daemon that silently serves nobody.
//
// Every option is one row of a table (options.go); parsing, defaults,
// validation, Dump and Options all read that table, so adding an option is
// adding a row and a Config field. A remote engine's options are one field
// of Config, their rows and checks declared by the engine's package and
// nested into the table (see engines).
package conf

import (
	_ "embed" // for the built-in default configuration
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strconv"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/option"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/gearman"
	"nsca_fast/stages/emit/icinga2"
	"nsca_fast/stages/nrdp"
)

// Sentinel errors, wrapped by every error this package returns, so that
// callers can tell a typo in a name from a bad value with errors.Is.
var (
	// ErrSyntax is wrapped for a line that is not name=value or has an
	// empty value.
	ErrSyntax = errors.New("syntax error")
	// ErrUnknownOption is wrapped for a name that is not an option. Stock
	// refuses these too, so a file stock accepts never hits it.
	ErrUnknownOption = errors.New("unknown option")
	// ErrBadValue is wrapped for a value that does not parse or is out of
	// range, whether found by Parse or by Validate.
	ErrBadValue = errors.New("bad value")
	// ErrConflict is wrapped by Validate for options that are each valid
	// but do not work together.
	ErrConflict = errors.New("conflicting options")
)

// EmbeddedFile is the file name Embedded reports in Config.File, warnings and
// errors, so log lines say which configuration the daemon runs on.
const EmbeddedFile = "default.cfg (built in)"

// MaxPasswordLen is stock's limit: its password buffer holds 511 bytes and a
// NUL, and send_nsca has the same buffer, so a longer one could never match.
const MaxPasswordLen = 511

// Config is the effective configuration: the defaults, overridden by what
// the file sets. Field comments give the option name; Options() documents
// each option's default and meaning.
type Config struct {
	// File is the name the configuration was parsed from, for messages.
	File string

	// Options of stock nsca 2.10.

	PidFile            string // pid_file
	ServerPort         int    // server_port
	ServerAddress      string // server_address; "" = all addresses
	User               string // nsca_user
	Group              string // nsca_group
	Chroot             string // nsca_chroot
	Debug              bool   // debug
	CommandFile        string // command_file
	AlternateDumpFile  string // alternate_dump_file
	AggregateWrites    bool   // aggregate_writes
	AppendToFile       bool   // append_to_file
	MaxPacketAge       int    // max_packet_age, seconds
	Password           string // password, verbatim (trailing blanks included)
	DecryptionMethod   int    // decryption_method, see MethodByNumber
	LogFacility        string // log_facility, a syslog facility name
	CheckResultPath    string // check_result_path
	StrictModeSpoofing bool   // strict_mode_spoofing

	// Options of the C++ nsca_fast this project replaces.

	DecryptionMode          int    // decryption_mode: 0 instance per connection, 1 per goroutine
	Workers                 int    // nsca_workers
	WorkersSpread           string // nsca_workers_spread: load or always
	ThreadsPerWorker        int    // nsca_threads_per_worker; 0 = CPUShare
	MaxChecksPerConnection  int    // max_checks_per_connection; 0 = unlimited
	MaxPacketAgeEnabled     bool   // max_packet_age_enabled
	CheckResultPathMaxFiles int    // check_result_path_max_files; 0 = no cap
	DirStats                string // dir_stats; "" = no statistics files

	// Decryption options new in this project.

	DecryptionEngine string // decryption_engine: one of cipher's engine names
	PayloadLengths   []int  // payload_length, ascending, each MinPayloadLength..MaxPayloadLength

	// Options new in this project.

	ConnectionTimeout int    // connection_timeout, seconds
	MaxConnections    int    // max_connections; 0 = sized for the machine
	ReaderThreads     int    // reader_threads
	QueueSize         int    // queue_size
	AllowedHosts      string // allowed_hosts; "" = everyone, see AllowedPrefixes
	SpoolFileMode     uint32 // spool_file_mode, permission bits
	// CommandFileDialect is command_file_dialect: the escaping of outputs
	// in the command file, spool files and the dump file.
	CommandFileDialect dialect.Dialect
	MetricsAddress     string // metrics_address; "" = no metrics endpoint
	StatsInterval      int    // stats_interval, seconds; 0 = no statistics lines

	// Scaling out.

	ProxyProtocol        bool   // proxy_protocol
	ProxyProtocolTrusted string // proxy_protocol_trusted, see TrustedProxies
	// Icinga2 and Gearman are the remote sinks' options (icinga2_*,
	// gearman_*), declared and checked as a whole by their packages.
	Icinga2        icinga2.Options
	Gearman        gearman.Options
	QueueDirectory string // queue_directory; "" = memory queues only
	QueueMaxBytes  int    // queue_max_bytes, per durable queue
	QueueFsync     string // queue_fsync: never, batch or always

	// Several secrets and client identities.

	// MoreMethods are the methods decryption_method lists after the
	// first, DecryptionMethod; see Methods.
	MoreMethods    []int
	PasswordFile   string // password_file; "" = password alone
	IdentitiesFile string // identities_file; "" = no identities
	// nsca-ng clients.

	NscaNGListen           string // nsca_ng_listen; "" = off
	NscaNGThreads          int    // nsca_ng_threads
	NscaNGMaxSessions      int    // nsca_ng_max_sessions
	NscaNGHandshakeTimeout int    // nsca_ng_handshake_timeout, seconds
	NscaNGTimeout          int    // nsca_ng_timeout, seconds
	NscaNGMaxCommandSize   int    // nsca_ng_max_command_size, bytes
	NscaNGCiphers          string // nsca_ng_tls_ciphers
	// MaxHandshakesPerSource is max_handshakes_per_source: connections
	// of one address in their TLS handshake (nsca-ng, HTTPS), 0 no cap.
	MaxHandshakesPerSource int
	// NRDP is the NRDP front end's options (nrdp_*), declared and checked
	// as a whole by its package.
	NRDP nrdp.Options

	// Lines maps an option name to the line that last set it, so that
	// Validate and the daemon can point at the line to fix.
	Lines map[string]int
	// Warnings are problems that do not stop the daemon, each prefixed with
	// "conf: file:line: ", for the caller to log.
	Warnings []string

	cipher chosen // see Cipher and Secrets
}

//go:embed default.cfg
var embedded []byte

// Default returns a Config holding every option's default and nothing else.
func Default() *Config {
	c := &Config{Lines: map[string]int{}}
	for _, o := range options {
		if err := o.Kind.Set(c, o.Default); err != nil {
			// The table is wrong: a build bug that the tests catch.
			panic(fmt.Sprintf("conf: default of %s: %v", o.Name, err))
		}
	}
	return c
}

// Embedded returns the built-in configuration the daemon runs on when it is
// started with -c builtin. It panics if that file does not parse, which can only
// be a build bug (the tests parse it).
func Embedded() *Config {
	c, err := Parse(EmbeddedFile, embedded)
	if err != nil {
		panic(err)
	}
	return c
}

// NoSink is why a configuration with no destination at all is refused.
const NoSink = "no sink: set command_file, check_result_path, icinga2_api_url or gearman_server"

// Validate checks every field against its option's rules again (the daemon
// may have changed fields from the command line since parsing) and then the
// rules that involve several options.
func (c *Config) Validate() error {
	for _, o := range options {
		if err := o.Kind.Check(c); err != nil {
			return fmt.Errorf("conf: %s: %s: %w", c.where(o.Name), o.Describe(o.Kind.Text(c), err), ErrBadValue)
		}
	}
	if c.CommandFile == "" && c.CheckResultPath == "" && !c.RemoteSinks() {
		return fmt.Errorf("conf: %s: %s: %w", c.where(""), NoSink, ErrConflict)
	}
	if err := c.validateRemote(); err != nil {
		return err
	}
	if c.CheckResultPathMaxFiles > 0 && c.CheckResultPath == "" {
		return fmt.Errorf("conf: %s: check_result_path_max_files=%d caps a spool that is not configured: "+
			"set check_result_path or remove the cap: %w",
			c.where("check_result_path_max_files"), c.CheckResultPathMaxFiles, ErrConflict)
	}
	if err := c.validateNG(); err != nil {
		return err
	}
	if err := c.NRDP.Validate(); err != nil {
		return c.engineError(err)
	}
	if c.MaxPacketAgeEnabled && c.MaxPacketAge == 0 {
		// Stock 2.7 read 0 as "no limit", nsca_fast as a limit of 0 seconds;
		// rather than pick one silently, make the operator say which.
		return fmt.Errorf("conf: %s: max_packet_age_enabled=1 with max_packet_age=0 is ambiguous: "+
			"set max_packet_age to 1..900 or max_packet_age_enabled=0: %w",
			c.where("max_packet_age_enabled"), ErrConflict)
	}
	return nil
}

// PathError reports that the path option name cannot be used, for err, in
// the shape of every configuration error: file, line, option and value.
func (c *Config) PathError(name string, err error) error {
	value := ""
	if o := byName[name]; o != nil {
		value = show(o.Kind.Text(c))
	}
	return fmt.Errorf("conf: %s: %s=%s: %w: %w", c.where(name), name, value, err, ErrBadValue)
}

// Dump returns the effective configuration as name=value lines in table
// order, for debug output and a configuration check. The password is never
// shown; values that would be ambiguous (empty, surrounding blanks, control
// characters) are shown quoted.
func (c *Config) Dump() []string {
	out := make([]string, 0, len(options))
	for _, o := range options {
		var v string
		switch {
		case o.Secret && o.Kind.Text(c) == "":
			v = "(empty)"
		case o.Secret:
			v = "********"
		default:
			v = show(o.Kind.Text(c))
		}
		out = append(out, o.Name+"="+v)
	}
	return out
}

// Changed lists, in table order, the options whose effective value in c
// differs from that in old, for the reload's log line: names only, so a
// changed password is reported without showing it.
func (c *Config) Changed(old *Config) []string {
	var out []string
	for _, o := range options {
		if o.Kind.Text(c) != o.Kind.Text(old) {
			out = append(out, o.Name)
		}
	}
	return out
}

// CPUShare is one process's share of the CPUs: all of them when the main
// process serves, else the number of CPUs divided by nsca_workers, at least
// one.
func (c *Config) CPUShare() int { return max(1, runtime.NumCPU()/max(c.Workers, 1)) }

// Method returns the decryption method configured. A number that is not a
// method (possible only if the field was set without Validate) yields a
// Method with Name "invalid" and Usable false.
func (c *Config) Method() Method {
	if m, ok := MethodByNumber(c.DecryptionMethod); ok {
		return m
	}
	return Method{Number: c.DecryptionMethod, Name: "invalid", Why: "not a decryption method"}
}

// AllowedPrefixes returns allowed_hosts as prefixes (a single address becomes
// a /32 or /128); nil means every peer is allowed. IPv4 entries are plain
// IPv4 prefixes, so the caller should Unmap a peer's 4in6 address before
// testing it.
func (c *Config) AllowedPrefixes() ([]netip.Prefix, error) {
	p, err := parseHosts(c.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("conf: %s: allowed_hosts %v: %w", c.where("allowed_hosts"), err, ErrBadValue)
	}
	return p, nil
}

// Option documents one configuration option, for generated documentation
// and help output.
type Option struct {
	Name    string // as written in nsca.cfg
	Default string // in nsca.cfg syntax; "" when the default is empty
	Origin  string // "stock", "nsca_fast" or "new": who introduced it
	Doc     string // one paragraph: meaning and accepted values
}

// Options returns every option in table order (the order of Dump).
func Options() []Option {
	out := make([]Option, len(options))
	for i, o := range options {
		out[i] = Option{Name: o.Name, Default: o.Default, Origin: o.Origin, Doc: o.Doc}
	}
	return out
}

// Where names the place an option was set, for messages: file:line if it
// came from the file, otherwise the file alone (or "defaults" for a Config
// from Default).
func (c *Config) Where(name string) string { return c.where(name) }

func (c *Config) where(name string) string {
	file := c.File
	if file == "" {
		file = "defaults"
	}
	if line := c.Lines[name]; name != "" && line > 0 {
		return file + ":" + strconv.Itoa(line)
	}
	return file
}

// show is how every message of this package shows a value.
func show(s string) string { return option.Show(s) }

// RemoteSinks says whether results also leave the machine: to Icinga 2's API
// or to Gearman. check_result_path and alternate_dump_file then serve as
// their fallbacks rather than as sinks of their own (see LocalSinks).
func (c *Config) RemoteSinks() bool {
	return slices.ContainsFunc(engines, func(e engine) bool { return e.options(c).On() })
}

// LocalSinks says whether results are written to the local core's command
// file or spool: always when no remote sink is set, otherwise only when
// command_file is set (then with check_result_path and alternate_dump_file
// as its fallbacks, as without remote sinks).
func (c *Config) LocalSinks() bool { return !c.RemoteSinks() || c.CommandFile != "" }

// TrustedProxies returns proxy_protocol_trusted as prefixes.
func (c *Config) TrustedProxies() ([]netip.Prefix, error) {
	p, err := parseHosts(c.ProxyProtocolTrusted)
	if err != nil {
		return nil, fmt.Errorf("conf: %s: proxy_protocol_trusted %v: %w", c.where("proxy_protocol_trusted"), err, ErrBadValue)
	}
	return p, nil
}

// Fallback resolves the *_fallback option value v: spool, dump or none,
// with "" meaning the spool if check_result_path is set, else the dump file
// if alternate_dump_file is set, else none.
func (c *Config) Fallback(v string) string {
	switch {
	case v != "":
		return v
	case c.CheckResultPath != "":
		return FallbackSpool
	case c.AlternateDumpFile != "":
		return FallbackDump
	}
	return FallbackNone
}

// validateRemote checks the options of the load balancer and remote sinks
// that only make sense together.
func (c *Config) validateRemote() error {
	conflict := func(name, format string, args ...any) error {
		return fmt.Errorf("conf: %s: %s: %w", c.where(name), fmt.Sprintf(format, args...), ErrConflict)
	}
	if c.ProxyProtocol && c.ProxyProtocolTrusted == "" {
		return conflict("proxy_protocol", "proxy_protocol=1 needs proxy_protocol_trusted: the addresses of "+
			"the load balancers allowed to send a PROXY header")
	}
	for _, e := range engines {
		name, value := e.fallback(c)
		switch c.Fallback(value) {
		case FallbackSpool:
			if c.CheckResultPath == "" {
				return conflict(name, "%s=spool needs check_result_path", name)
			}
		case FallbackDump:
			if c.AlternateDumpFile == "" {
				return conflict(name, "%s=dump needs alternate_dump_file", name)
			}
		}
	}
	for _, e := range engines {
		if o := e.options(c); o.On() {
			if err := o.Validate(); err != nil {
				return c.engineError(err)
			}
		}
	}
	return nil
}

// engine is a remote engine as Config holds it: a field of Config whose
// rows and Validate are the engine package's, plus the <name>_fallback row,
// which is this package's since it resolves and checks every fallback.
type engine struct {
	rows     []row                              // in table order, <name>_fallback last
	options  func(*Config) engineOptions        // its field of Config
	fallback func(*Config) (name, value string) // its <name>_fallback option
}

// engineOptions is what Config asks of a remote engine's options besides
// their rows.
type engineOptions interface {
	On() bool        // the engine is configured
	Validate() error // the options as a whole, when on; a *option.Error
	Files() []string // the options naming files the engine reads
}

// engines are the remote engines, in table order. Adding one is a field of
// Config and an entry here.
var engines = []engine{
	remote("icinga2", func(c *Config) *icinga2.Options { return &c.Icinga2 }, icinga2.Rows(),
		func(o *icinga2.Options) *string { return &o.Fallback }),
	remote("gearman", func(c *Config) *gearman.Options { return &c.Gearman }, gearman.Rows(),
		func(o *gearman.Options) *string { return &o.Fallback }),
}

// remote makes the engine called name whose options get finds in a
// Config: rows are its package's, fallback finds the field of its
// <name>_fallback option.
func remote[T any, PT interface {
	*T
	engineOptions
}](name string, get func(*Config) *T, rows []option.Row[T], fallback func(*T) *string) engine {
	fb := name + "_fallback"
	rows = append(rows[:len(rows):len(rows)], option.Row[T]{Name: fb, Origin: option.OriginNew,
		Kind: option.Text(fallback, validFallback), Doc: fallbackDoc(name)})
	return engine{
		rows:     option.Nest(get, rows),
		options:  func(c *Config) engineOptions { return PT(get(c)) },
		fallback: func(c *Config) (string, string) { return fb, *fallback(get(c)) },
	}
}

// nrdpRows are the NRDP front end's options, its package's rows.
var nrdpRows = option.Nest(func(c *Config) *nrdp.Options { return &c.NRDP }, nrdp.Rows())

// engineRows are the rows of every remote engine, in table order.
func engineRows() []row {
	var out []row
	for _, e := range engines {
		out = append(out, e.rows...)
	}
	return out
}

// engineError reports a remote engine's *option.Error with the file
// and line of the option it names: a conflict in its own words, a bad value
// as PathError does.
func (c *Config) engineError(err error) error {
	var oe *option.Error
	if errors.As(err, &oe) && oe.Conflict {
		return fmt.Errorf("conf: %s: %s: %w", c.where(oe.Option), oe.Reason, ErrConflict)
	}
	if errors.As(err, &oe) {
		return c.PathError(oe.Option, err)
	}
	return fmt.Errorf("conf: %s: %w: %w", c.File, err, ErrBadValue)
}

// validateNG refuses an nsca-ng listener this build or configuration
// cannot serve: without cgo there is no OpenSSL, and without identities
// no client could authenticate.
func (c *Config) validateNG() error {
	if c.NscaNGListen == "" {
		return nil
	}
	if err := openssl.Available(); err != nil {
		return c.PathError("nsca_ng_listen", err)
	}
	if c.IdentitiesFile == "" {
		return fmt.Errorf("conf: %s: nsca_ng_listen=%s needs identities_file: nsca-ng clients authenticate as its "+
			"identities: %w", c.where("nsca_ng_listen"), c.NscaNGListen, ErrConflict)
	}
	return nil
}
