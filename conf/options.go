package conf

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Values of Option.Origin: who introduced an option, so documentation can
// tell an operator which options their old file may hold.
const (
	originStock    = "stock"
	originNscaFast = "nsca_fast"
	originNew      = "new"
)

// option is one row of the option table: everything this package knows
// about one option.
type option struct {
	name   string
	def    string // default, in nsca.cfg syntax
	origin string
	doc    string
	secret bool // the value never appears in Dump or in messages
	kind   kind
}

// options is the table. Its order is Dump's order and the documentation's:
// stock options first, as stock's sample file lists them, then nsca_fast's,
// then ours.
var options = []option{
	// Stock nsca 2.10.
	{name: "pid_file", origin: originStock,
		kind: text(func(c *Config) *string { return &c.PidFile }, nil),
		doc:  "File the daemon writes its process id to at start and removes at exit. Empty: no pid file."},
	{name: "server_port", def: "5667", origin: originStock,
		kind: integer(func(c *Config) *int { return &c.ServerPort }, 1, 65535, ""),
		doc:  "TCP port to listen on, 1..65535. Ports below 1024 need root."},
	{name: "server_address", origin: originStock,
		kind: text(func(c *Config) *string { return &c.ServerAddress }, nil),
		doc:  "Address or host name to listen on. Empty: every address of the machine."},
	{name: "nsca_user", origin: originStock,
		kind: text(func(c *Config) *string { return &c.User }, nil),
		doc:  "User (name or number) to run as once the port is bound. Empty: keep the user the daemon was started as."},
	{name: "nsca_group", origin: originStock,
		kind: text(func(c *Config) *string { return &c.Group }, nil),
		doc:  "Group (name or number) to run as once the port is bound. Empty: keep the starting group."},
	{name: "nsca_chroot", origin: originStock,
		kind: text(func(c *Config) *string { return &c.Chroot }, nil),
		doc: "Directory to chroot into once the port is bound; command_file and the other paths are then " +
			"resolved inside it. Empty: no chroot."},
	{name: "debug", def: "0", origin: originStock,
		kind: boolean(func(c *Config) *bool { return &c.Debug }),
		doc:  "1: log every connection and every check result received. 0: log problems only."},
	{name: "command_file", origin: originStock,
		kind: text(func(c *Config) *string { return &c.CommandFile }, nil),
		doc: "The monitoring core's external command file (a FIFO, or an existing regular file) that " +
			"results are written to. It is never created."},
	{name: "alternate_dump_file", origin: originStock,
		kind: text(func(c *Config) *string { return &c.AlternateDumpFile }, nil),
		doc: "Last resort: results that neither command_file nor check_result_path took (the FIFO is " +
			"missing, has no reader or stays full; the spool failed or is at its cap) are appended here as " +
			"command lines; created if needed. Empty: such results are dropped, counted and logged."},
	{name: "aggregate_writes", def: "0", origin: originStock,
		kind: boolean(func(c *Config) *bool { return &c.AggregateWrites }),
		doc:  "1: keep command_file open between results. 0: open and close it for each result, as stock does by default."},
	{name: "append_to_file", def: "0", origin: originStock,
		kind: boolean(func(c *Config) *bool { return &c.AppendToFile }),
		doc:  "1: open command_file for appending, for a regular file rather than a FIFO."},
	{name: "max_packet_age", def: "30", origin: originStock,
		kind: integer(func(c *Config) *int { return &c.MaxPacketAge }, 0, 900, " seconds"),
		doc: "Oldest packet accepted, in seconds since the connection's init packet, 0..900. " +
			"Enforced only with max_packet_age_enabled=1 (stock 2.10 never enforces it)."},
	{name: "password", origin: originStock, secret: true,
		kind: text(func(c *Config) *string { return &c.Password }, validPassword),
		doc: "Shared secret with send_nsca, at most 511 bytes, taken verbatim to the end of the line " +
			"(trailing blanks included). Empty: the key is all zero bytes."},
	{name: "decryption_method", def: "1", origin: originStock,
		kind: field[int]{ptr: func(c *Config) *int { return &c.DecryptionMethod },
			parse: parseInt, valid: validMethod, format: strconv.Itoa, number: true},
		doc: "Must equal send_nsca's encryption_method: " + methodList() + " (2 and up: libmcrypt in " +
			"8-bit CFB)."},
	{name: "log_facility", def: "daemon", origin: originStock,
		kind: text(func(c *Config) *string { return &c.LogFacility }, validFacility),
		doc:  "Syslog facility: " + strings.Join(facilities, ", ") + ". Stock ignores a bad one; we refuse to start."},
	{name: "check_result_path", origin: originStock,
		kind: text(func(c *Config) *string { return &c.CheckResultPath }, nil),
		doc: "The core's check result spool directory: results are written there as files. " +
			"Empty: results go to command_file only."},
	{name: "strict_mode_spoofing", def: "0", origin: originStock,
		kind: boolean(func(c *Config) *bool { return &c.StrictModeSpoofing }),
		doc:  "1: drop a result unless the host name it claims resolves to the sending peer's address."},

	// The C++ nsca_fast.
	{name: "decryption_mode", def: "1", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.DecryptionMode }, 0, 1, ""),
		doc: "0: a fresh libmcrypt instance per connection, as stock. 1: one keyed instance per decrypt " +
			"goroutine, re-aimed at each connection's IV (faster)."},
	{name: "nsca_workers", def: "0", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.Workers }, 0, 100, ""),
		doc:  "Worker processes sharing the port with SO_REUSEPORT, 0..100. 0: serve in the main process."},
	{name: "nsca_threads_per_worker", def: "0", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.ThreadsPerWorker }, 0, 1000, ""),
		doc:  "Decrypt goroutines per worker, 0..1000. 0: one per CPU."},
	{name: "max_checks_per_connection", def: "5000", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.MaxChecksPerConnection }, 0, noLimit, ""),
		doc:  "A connection that sends more results than this is closed. 0: no limit."},
	{name: "max_packet_age_enabled", def: "0", origin: originNscaFast,
		kind: boolean(func(c *Config) *bool { return &c.MaxPacketAgeEnabled }),
		doc:  "1: drop packets older than max_packet_age. 0: accept any age, as stock 2.10 does."},
	{name: "check_result_path_max_files", def: "0", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.CheckResultPathMaxFiles }, 0, noLimit, ""),
		doc: "Most unprocessed result files in check_result_path; beyond it results wait in a bounded queue. " +
			"0: no cap."},
	{name: "dir_stats", def: "0", origin: originNscaFast,
		kind: boolean(func(c *Config) *bool { return &c.DirStats }),
		doc:  "Accepted so nsca_fast's sample file loads; has no effect."},

	// New in this project.
	{name: "connection_timeout", def: "10", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.ConnectionTimeout }, 1, 3600, " seconds"),
		doc:  "Seconds a client may stay idle or too slow before it is closed, 1..3600 (stock's fixed socket timeout is 10)."},
	{name: "max_connections", def: "0", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.MaxConnections }, 0, noLimit, ""),
		doc:  "Open connections per worker; more are closed at once. 0: sized for the machine."},
	{name: "reader_threads", def: "1", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.ReaderThreads }, 1, 64, ""),
		doc:  "Goroutines per worker that read from connections with epoll, 1..64."},
	{name: "queue_size", def: "128", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.QueueSize }, 1, 1000000, ""),
		doc:  "Capacity of each queue between pipeline stages, 1..1000000; bounds memory under overload."},
	{name: "allowed_hosts", origin: originNew,
		kind: text(func(c *Config) *string { return &c.AllowedHosts }, validHosts),
		doc: "Comma-separated IP addresses and CIDRs allowed to connect; others are closed before the " +
			"init packet. Empty: everyone."},
	{name: "spool_file_mode", def: "0600", origin: originNew,
		kind: field[uint32]{ptr: func(c *Config) *uint32 { return &c.SpoolFileMode },
			parse: parseOctal, valid: validMode, format: formatOctal, number: true},
		doc: "Permission bits, in octal, of the files written into check_result_path. 0600 as stock: the " +
			"core runs as the same user."},
	{name: "metrics_address", origin: originNew,
		kind: text(func(c *Config) *string { return &c.MetricsAddress }, validHostPort),
		doc: "host:port on which to serve Prometheus metrics at /metrics (counters summed over the workers). " +
			"Empty: off."},
}

// byName finds a row by its exact name, as Parse needs for every line.
var byName = func() map[string]*option {
	m := make(map[string]*option, len(options))
	for i := range options {
		m[options[i].name] = &options[i]
	}
	return m
}()

// describe turns a value's problem into a message naming the option, and the
// value unless it is secret.
func (o *option) describe(value string, problem error) string {
	if o.secret {
		return o.name + " " + problem.Error()
	}
	return o.name + "=" + show(value) + " " + problem.Error()
}

// crlfWarning explains what a trailing carriage return does to this option.
func (o *option) crlfWarning() string {
	if o.kind.numeric() {
		return "the value ends in a carriage return (CRLF line endings); it is ignored for this " +
			"numeric option, but convert the file to LF line endings"
	}
	return "the value ends in a carriage return (CRLF line endings) that stays part of it, as in stock; " +
		"convert the file to LF line endings"
}

// kind is how an option's text becomes a Config field and back.
type kind interface {
	set(c *Config, text string) error // parse, validate and store a value
	check(c *Config) error            // validate the value stored in c
	text(c *Config) string            // the stored value in nsca.cfg syntax
	numeric() bool                    // surrounding blanks are not part of the value
}

// field implements kind for a Config field of type T. Messages returned by
// parse and valid are reasons that read after "name=value ".
type field[T any] struct {
	ptr    func(*Config) *T
	parse  func(string) (T, error)
	valid  func(T) error // nil: every parsed value is valid
	format func(T) string
	number bool // trim blanks (and a CRLF's '\r') before parsing
}

func (f field[T]) set(c *Config, s string) error {
	if f.number {
		// Stock's atoi skips leading blanks and stops at trailing junk; we
		// allow only blanks around the number, so "12abc" is an error.
		s = strings.Trim(strings.TrimSuffix(s, "\r"), " \t")
	}
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	if err := f.validate(v); err != nil {
		return err
	}
	*f.ptr(c) = v
	return nil
}

func (f field[T]) check(c *Config) error { return f.validate(*f.ptr(c)) }
func (f field[T]) text(c *Config) string { return f.format(*f.ptr(c)) }
func (f field[T]) numeric() bool         { return f.number }

func (f field[T]) validate(v T) error {
	if f.valid == nil {
		return nil
	}
	return f.valid(v)
}

// noLimit is the upper bound of options that only must not be negative.
const noLimit = math.MaxInt

// integer is a decimal option in lo..hi; unit (with its leading space) is
// appended to the upper bound in messages, where stock names it too.
func integer(ptr func(*Config) *int, lo, hi int, unit string) kind {
	valid := func(v int) error {
		switch {
		case v < lo && lo == 0:
			return errors.New("cannot be negative")
		case v < lo:
			return fmt.Errorf("must be at least %d", lo)
		case v > hi:
			return fmt.Errorf("cannot be greater than %d%s", hi, unit)
		}
		return nil
	}
	return field[int]{ptr: ptr, parse: parseInt, valid: valid, format: strconv.Itoa, number: true}
}

// boolean is a stock-style flag: a decimal number, true when above zero.
func boolean(ptr func(*Config) *bool) kind {
	parse := func(s string) (bool, error) {
		n, err := parseInt(s)
		if err != nil {
			return false, fmt.Errorf("%v: write 1 for yes, 0 for no", err)
		}
		return n > 0, nil
	}
	format := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	return field[bool]{ptr: ptr, parse: parse, format: format, number: true}
}

// text is a string option taken verbatim; valid (optional) adds checks to
// the NUL check every string gets, since no path or secret can hold a NUL.
func text(ptr func(*Config) *string, valid func(string) error) kind {
	all := func(s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return errors.New("contains a NUL byte")
		}
		if valid != nil {
			return valid(s)
		}
		return nil
	}
	verbatim := func(s string) (string, error) { return s, nil }
	format := func(s string) string { return s }
	return field[string]{ptr: ptr, parse: verbatim, valid: all, format: format}
}

func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, errors.New("is out of range for a number")
	case err != nil:
		return 0, errors.New("is not a decimal integer")
	}
	return n, nil
}

func parseOctal(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, errors.New("is not an octal number")
	}
	return uint32(n), nil
}

func validMode(m uint32) error {
	if m&^0o777 != 0 {
		return errors.New("has bits beyond 0777: only permission bits are allowed")
	}
	return nil
}

func formatOctal(m uint32) string { return fmt.Sprintf("%04o", m) }

func validPassword(s string) error {
	if len(s) > MaxPasswordLen {
		return fmt.Errorf("is too long: %d bytes, at most %d", len(s), MaxPasswordLen)
	}
	return nil
}

func validMethod(n int) error {
	m, ok := MethodByNumber(n)
	if !ok {
		return fmt.Errorf("is not a decryption method; use one of %s", methodList())
	}
	if !m.Usable {
		return fmt.Errorf("(%s) is unusable: %s; send_nsca cannot use it either", m.Name, m.Why)
	}
	return nil
}

// methodList names the usable methods for messages and documentation.
func methodList() string {
	var parts []string
	for _, m := range UsableMethods() {
		parts = append(parts, strconv.Itoa(m.Number)+" "+m.Name)
	}
	return strings.Join(parts, ", ")
}

// facilities are the names stock's get_log_facility knows, spelled right.
var facilities = []string{
	"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
}

func validFacility(s string) error {
	switch {
	case slices.Contains(facilities, s):
		return nil
	case s == "lrp":
		// Stock's table misspells lpr, so a stock file may say lrp.
		return errors.New("is stock's misspelling of lpr; write lpr")
	}
	return errors.New("is not a syslog facility; use one of " + strings.Join(facilities, ", "))
}

// validHostPort checks a listening address such as 127.0.0.1:9667.
func validHostPort(s string) error {
	if s == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		return fmt.Errorf("is not host:port: %w", err)
	}
	return nil
}

func validHosts(s string) error {
	_, err := parseHosts(s)
	return err
}

// parseHosts reads allowed_hosts. Blanks around entries are ignored because
// they cannot be part of an address.
func parseHosts(s string) ([]netip.Prefix, error) {
	if s == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, entry := range strings.Split(s, ",") {
		entry = strings.Trim(entry, " \t\r")
		p, err := parseHost(entry)
		if err != nil {
			return nil, fmt.Errorf("has a bad entry %s: %v", show(entry), err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseHost(entry string) (netip.Prefix, error) {
	if entry == "" {
		return netip.Prefix{}, errors.New("empty entry")
	}
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, err
		}
		// NRPE-style lists may name a host inside the network; what is
		// meant is the network.
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(entry)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("zoned addresses are not supported")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
