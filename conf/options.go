package conf

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/gearman"
	"nsca_fast/stages/emit/icinga2"
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
		kind: methodsKind{},
		doc: "Must equal send_nsca's encryption_method: " + methodList() + " (2 and up: libmcrypt in " +
			"8-bit CFB). For NSClient++ write its encryption name instead: " + strings.Join(MethodNames(), ", ") +
			"; aes128, aes192 and gost (Crypto++'s GOST, not stock's 23) are this project's own, always " +
			"served natively. Several methods separated by commas (1,14) are all accepted: a connection's " +
			"first packet is tried with each, with every password (password, password_file), and the rest " +
			"of the connection uses the one that decrypted it; the first listed is the one reports name."},
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
	{name: "decryption_engine", def: cipher.DefaultEngine, origin: originNew,
		kind: text(func(c *Config) *string { return &c.DecryptionEngine }, validEngine),
		doc: "What decrypts decryption_method 2 and up: auto (native where there is a native engine and its " +
			"start-up self-test against libmcrypt passes, libmcrypt otherwise), native (Go, with AES-NI, AVX2 and AVX-512 " +
			"assembly, for every usable method: 2 des, 3 tripledes, 4 cast-128, 5 cast-256, 6 xtea, 8 blowfish, " +
			"9 twofish, 10 loki97, 11 rc2, 14 rijndael-128, 15 rijndael-192, 16 rijndael-256, 20 serpent, 23 gost " +
			"and 26 saferplus; refusing to start on a failed self-test) or libmcrypt " +
			"(through cgo, as stock). The start-up line says which engine serves and why. A build without " +
			"libmcrypt (CGO_ENABLED=0) serves 0, 1 and the native methods only."},
	{name: "nsca_workers", def: "0", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.Workers }, 0, 100, ""),
		doc:  "Worker processes sharing the port with SO_REUSEPORT, 0..100. 0: serve in the main process."},
	{name: "nsca_threads_per_worker", def: "0", origin: originNscaFast,
		kind: integer(func(c *Config) *int { return &c.ThreadsPerWorker }, 0, 1000, ""),
		doc:  "Decrypt goroutines per worker, 0..1000. 0: one per CPU of the worker's share, the CPUs divided by nsca_workers."},
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
	{name: "dir_stats", origin: originNscaFast,
		kind: field[string]{ptr: func(c *Config) *string { return &c.DirStats },
			parse: parseStatsDir, valid: validStatsDir, format: func(s string) string { return s }},
		doc: "Directory in which each worker (the main process with nsca_workers=0, as slot 0) keeps " +
			"nsca-stats-<slot>.txt, the C++ nsca_fast's statistics file for Munin, rewritten every 5 seconds " +
			"and removed at exit; it must exist and be writable by nsca_user (under nsca_chroot, inside it). " +
			"Empty or 0: no statistics files (the C++ daemon's default is /tmp)."},

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
	{name: "payload_length", def: "512,4096", origin: originNew,
		kind: field[[]int]{ptr: func(c *Config) *[]int { return &c.PayloadLengths },
			parse: parsePayloadLengths, format: formatInts, number: true},
		doc: "Comma-separated plugin output field lengths accepted (NSClient++'s \"payload length\"), each " +
			strconv.Itoa(MinPayloadLength) + ".." + strconv.Itoa(MaxPayloadLength) + "; a packet is 208 bytes " +
			"more. 512 is NSCA 2.7's and NSClient++'s default (720-byte packets), 4096 send_nsca's (4304). The " +
			"first packet of a connection decides its size (the smallest accepted length whose version and CRC " +
			"check); all its packets have that size."},
	{name: "command_file_dialect", def: "nagios", origin: originNew,
		kind: field[dialect.Dialect]{ptr: func(c *Config) *dialect.Dialect { return &c.CommandFileDialect },
			parse: parseDialect, format: dialect.Dialect.String},
		doc: "Escaping of plugin output in command_file, check_result_path files and alternate_dump_file, " +
			"for the core that reads them: nagios (stock's, byte for byte; Nagios 4), icinga2 (Icinga 2's " +
			"command pipe) or naemon. Output a core cannot store exactly is written in a documented " +
			"substitute form and counted (nsca_dialect_lossy_total)."},
	{name: "metrics_address", origin: originNew,
		kind: text(func(c *Config) *string { return &c.MetricsAddress }, validHostPort),
		doc: "host:port on which to serve Prometheus metrics at /metrics (counters summed over the workers), " +
			"liveness at /healthz and readiness at /readyz. Empty: off."},

	{name: "stats_interval", def: "5", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.StatsInterval }, 0, 86400, " seconds"),
		doc: "Seconds between statistics lines in the log, 0..86400; a line is skipped when no counter " +
			"changed since the last one. 0: no statistics lines (the final one at exit stays)."},

	// Scaling out: a load balancer in front, distributed engines behind.
	{name: "proxy_protocol", def: "0", origin: originNew,
		kind: boolean(func(c *Config) *bool { return &c.ProxyProtocol }),
		doc: "1: every connection must begin with a PROXY protocol v1 or v2 header (HAProxy's send-proxy " +
			"or send-proxy-v2), from a peer in proxy_protocol_trusted; the client address it carries is used " +
			"for logging, allowed_hosts and strict_mode_spoofing. 0: no header is expected."},
	{name: "proxy_protocol_trusted", origin: originNew,
		kind: text(func(c *Config) *string { return &c.ProxyProtocolTrusted }, validHosts),
		doc: "Comma-separated IP addresses and CIDRs of the load balancers allowed to send a PROXY header; " +
			"any other peer is closed, so a client cannot forge its source. Required with proxy_protocol=1."},
	{name: "icinga2_api_url", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Icinga2.URL }, validURL),
		doc: "Base URL of an Icinga 2 API (https://host:5665): every result is also posted to " +
			"/v1/actions/process-check-result. Empty: off."},
	{name: "icinga2_api_user", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Icinga2.User }, nil),
		doc:  "ApiUser name for basic authentication; it needs the permission actions/process-check-result."},
	{name: "icinga2_api_password", origin: originNew, secret: true,
		kind: text(func(c *Config) *string { return &c.Icinga2.Password }, nil),
		doc:  "Password of icinga2_api_user."},
	{name: "icinga2_client_cert", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Icinga2.CertFile }, nil),
		doc:  "PEM client certificate to authenticate with instead of a password (an ApiUser with client_cn)."},
	{name: "icinga2_client_key", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Icinga2.KeyFile }, nil),
		doc:  "PEM private key of icinga2_client_cert."},
	{name: "icinga2_ca_file", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Icinga2.CAFile }, nil),
		doc:  "PEM CA certificate(s) that sign the API's certificate. Empty: the system's CAs."},
	{name: "icinga2_verify_tls", def: "1", origin: originNew,
		kind: boolean(func(c *Config) *bool { return &c.Icinga2.VerifyTLS }),
		doc:  "1: verify the API's certificate and name. 0: do not (only for testing)."},
	{name: "icinga2_max_in_flight", def: strconv.Itoa(icinga2.DefaultMaxInFlight), origin: originNew,
		kind: integer(func(c *Config) *int { return &c.Icinga2.MaxInFlight }, 1, 1024, ""),
		doc:  "Most requests to the API at once, 1..1024, over keep-alive connections."},
	{name: "icinga2_timeout", def: secondsText(icinga2.DefaultTimeout), origin: originNew,
		kind: seconds(func(c *Config) *time.Duration { return &c.Icinga2.Timeout }, 1, 300),
		doc:  "Seconds one request may take, 1..300."},
	{name: "icinga2_retries", def: strconv.Itoa(icinga2.DefaultRetries), origin: originNew,
		kind: integer(func(c *Config) *int { return &c.Icinga2.Retries }, 0, 100, ""),
		doc: "Retries, with doubling back-off, of a request that failed with 5xx, 401, 403 or a lost connection, " +
			"0..100; then the result goes to icinga2_fallback. A result refused for good (404 unknown object, " +
			"400) is logged, counted and not retried."},
	{name: "icinga2_queue_size", def: "10000", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.Icinga2.QueueSize }, 1, 1000000, ""),
		doc: "Results waiting for the API, 1..1000000; when the queue is full, further results go to " +
			"icinga2_fallback at once, so a slow API never stalls the other sinks."},
	{name: "icinga2_fallback", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Icinga2.Fallback }, validFallback),
		doc:  fallbackDoc("icinga2")},
	{name: "gearman_server", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Gearman.Servers }, validServers),
		doc: "Comma-separated host:port list of Gearman job servers (mod_gearman's server=), tried in order: " +
			"every result is also submitted as a background job for mod_gearman. Empty: off."},
	{name: "gearman_result_queue", def: gearman.DefaultQueue, origin: originNew,
		kind: text(func(c *Config) *string { return &c.Gearman.Queue }, nil),
		doc:  "Gearman function (queue) the results are submitted to, as mod_gearman's result_queue=."},
	{name: "gearman_encryption", def: "1", origin: originNew,
		kind: yesNo(func(c *Config) *bool { return &c.Gearman.Encryption }),
		doc:  "1 (yes): encrypt jobs with AES-256 under gearman_key, as mod_gearman's encryption=yes. 0 (no): base64 only."},
	{name: "gearman_key", origin: originNew, secret: true,
		kind: text(func(c *Config) *string { return &c.Gearman.Key }, nil),
		doc:  "mod_gearman's shared key (key=); at most 32 bytes are used."},
	{name: "gearman_keyfile", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Gearman.KeyFile }, nil),
		doc:  "File holding the key (mod_gearman's keyfile=); when set, it takes precedence over gearman_key."},
	{name: "gearman_timeout", def: secondsText(gearman.DefaultTimeout), origin: originNew,
		kind: seconds(func(c *Config) *time.Duration { return &c.Gearman.Timeout }, 1, 300),
		doc:  "Seconds a connect, submit or reply may take, 1..300."},
	{name: "gearman_queue_size", def: "10000", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.Gearman.QueueSize }, 1, 1000000, ""),
		doc: "Results waiting for the job servers, 1..1000000; when the queue is full, further results go to " +
			"gearman_fallback at once."},
	{name: "gearman_fallback", origin: originNew,
		kind: text(func(c *Config) *string { return &c.Gearman.Fallback }, validFallback),
		doc:  fallbackDoc("gearman")},
	{name: "queue_directory", origin: originNew,
		kind: text(func(c *Config) *string { return &c.QueueDirectory }, nil),
		doc: "Directory of the durable queues of the remote sinks (icinga2, gearman): each keeps, in its own " +
			"subdirectory (<sink>, or <sink>-<slot> in a worker process), the results its engine could not take at " +
			"once, and delivers them in order when the engine is back, across restarts and kill -9; the queues of " +
			"worker slots no longer configured are taken over by the remaining processes. Created 0750 if " +
			"missing. Empty: memory queues only (icinga2_queue_size, gearman_queue_size)."},
	{name: "queue_max_bytes", def: "1073741824", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.QueueMaxBytes }, 65536, 1<<40, " bytes"),
		doc: "Bytes each durable queue may hold on disk, 65536..2^40; results past it go to the sink's " +
			"fallback at once, counted (fell_back) and logged."},
	{name: "queue_fsync", def: "batch", origin: originNew,
		kind: text(func(c *Config) *string { return &c.QueueFsync }, validFsync),
		doc: "When the durable queues force appended results to disk: never (the kernel writes back; a power " +
			"loss may cost the last 30 s or so), batch (each batch of results is synced before it counts as " +
			"queued) or always (each result and each acknowledgement is synced)."},

	// Several secrets and client identities.
	{name: "password_file", origin: originNew,
		kind: text(func(c *Config) *string { return &c.PasswordFile }, nil),
		doc: "File of further passwords, one per line, verbatim (a trailing carriage return is removed; empty " +
			"lines and lines starting with # are skipped), each accepted beside password with every " +
			"decryption_method: a site changes its password while clients change one by one, and " +
			"nsca_secret_matches_total{secret=\"password_file:LINE/METHOD\"} shows when the old one is no longer " +
			"used. With password_file and no password line, only the file's passwords are accepted. Read at " +
			"start and at every reload; keep it readable by the daemon's user only."},
	{name: "identities_file", origin: originNew,
		kind: text(func(c *Config) *string { return &c.IdentitiesFile }, nil),
		doc: "File of client identities in nsca-ng's authorize syntax (authorize \"name\" { password = ...; " +
			"hosts = ...; services = ...; commands = ...; networks = ...; decryption_method = ... }, \"*\" as " +
			"fallback, include(...)): each identity's password and method are tried for the connections from " +
			"its networks, most specific first, and its results are refused unless its hosts or services allow " +
			"them (counted in nsca_identity_refused_total). Clients with the server's own password (password, " +
			"password_file) get the rights of the \"*\" block, or every right when there is none; without " +
			"password and password_file only identities are accepted. Empty: no identities."},
	// nsca-ng clients.
	{name: "nsca_ng_listen", origin: originNew,
		kind: text(func(c *Config) *string { return &c.NscaNGListen }, validHostPort),
		doc: "address:port on which to serve nsca-ng clients (protocol version 1 over TLS with pre-shared keys; " +
			"nsca-ng's port is 5668), with the identities of identities_file. Empty: off."},
	{name: "nsca_ng_threads", def: "1", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.NscaNGThreads }, 1, 64, ""),
		doc:  "Goroutines per worker that run the TLS sessions of nsca-ng clients, 1..64."},
	{name: "nsca_ng_max_sessions", def: "1024", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.NscaNGMaxSessions }, 1, 1000000, ""),
		doc:  "Open nsca-ng connections per worker, 1..1000000; more are closed at once, counted and logged."},
	{name: "nsca_ng_handshake_timeout", def: "10", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.NscaNGHandshakeTimeout }, 1, 3600, " seconds"),
		doc:  "Seconds an nsca-ng client has to finish the TLS handshake, 1..3600."},
	{name: "nsca_ng_timeout", def: "60", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.NscaNGTimeout }, 1, 86400, " seconds"),
		doc:  "Seconds an nsca-ng session may stay idle before the server bails out, 1..86400 (nsca-ng's timeout)."},
	{name: "nsca_ng_max_command_size", def: "16384", origin: originNew,
		kind: integer(func(c *Config) *int { return &c.NscaNGMaxCommandSize }, 1, 1<<20, " bytes"),
		doc:  "Longest command an nsca-ng client may push, 1..1048576 bytes; longer ones are refused (nsca-ng's max_command_size)."},
	{name: "nsca_ng_tls_ciphers", def: "PSK-AES256-CBC-SHA:PSK-AES128-CBC-SHA:PSK-3DES-EDE-CBC-SHA:PSK-RC4-SHA", origin: originNew,
		kind: text(func(c *Config) *string { return &c.NscaNGCiphers }, validCipherList),
		doc: "OpenSSL cipher list offered to nsca-ng clients for TLS 1.2 and older, nsca-ng's default (OpenSSL 3 " +
			"has only the first two); TLS 1.3 uses OpenSSL's suites."},
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

// seconds is integer for a duration option written in whole seconds.
func seconds(ptr func(*Config) *time.Duration, lo, hi int) kind {
	valid := integer(nil, lo, hi, " seconds").(field[int]).valid
	parse := func(s string) (time.Duration, error) {
		n, err := parseInt(s)
		return time.Duration(n) * time.Second, err
	}
	return field[time.Duration]{ptr: ptr, parse: parse, number: true, format: secondsText,
		valid: func(d time.Duration) error { return valid(int(d / time.Second)) }}
}

// secondsText is d in whole seconds, as nsca.cfg writes it.
func secondsText(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

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

// parseDialect reads command_file_dialect; its message names the valid
// values, as the other options' do.
func parseDialect(s string) (dialect.Dialect, error) {
	d, err := dialect.Parse(s)
	if err != nil {
		return d, fmt.Errorf("is not a dialect; use %s", strings.Join(dialect.Names(), ", "))
	}
	return d, nil
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
		return fmt.Errorf("is not a decryption method; use one of %s", methodChoices())
	}
	if !m.Usable {
		return fmt.Errorf("(%s) is unusable: %s; send_nsca cannot use it either", m.Name, m.Why)
	}
	return nil
}

// parseMethod reads decryption_method: a stock number or a name of
// MethodNames. This project's own methods have internal numbers that the
// file must not use, so that no number of ours can ever clash with a client's.
func parseMethod(s string) (int, error) {
	if m, ok := MethodByName(s); ok {
		return m.Number, nil
	}
	n, err := parseInt(s)
	if err != nil {
		return 0, fmt.Errorf("is neither a method number nor a method name; use one of %s", methodChoices())
	}
	if m, ok := MethodByNumber(n); ok && m.Own {
		return 0, fmt.Errorf("is not a decryption method; write its name, %s", m.Name)
	}
	return n, nil
}

// formatMethod writes decryption_method as parseMethod reads it back.
func formatMethod(n int) string {
	if m, ok := MethodByNumber(n); ok {
		return NameOf(m)
	}
	return strconv.Itoa(n)
}

func validEngine(s string) error {
	if cipher.IsEngine(s) {
		return nil
	}
	return fmt.Errorf("is not a decryption engine; use %s, %s or %s", cipher.EngineLibmcrypt, cipher.EngineNative, cipher.EngineAuto)
}

// Bounds of payload_length, the wire format's (see codec.MaxPayloadLength).
const (
	MinPayloadLength = codec.MinPayloadLength
	MaxPayloadLength = codec.MaxPayloadLength
)

// parsePayloadLengths reads payload_length into ascending distinct lengths.
func parsePayloadLengths(s string) ([]int, error) {
	var out []int
	for _, entry := range strings.Split(s, ",") {
		entry = strings.Trim(entry, " \t")
		n, err := parseInt(entry)
		switch {
		case entry == "":
			return nil, errors.New("has an empty entry; write lengths separated by commas, e.g. 512,4096")
		case err != nil:
			return nil, fmt.Errorf("has a bad entry %s: %v", show(entry), err)
		case n < MinPayloadLength || n > MaxPayloadLength:
			return nil, fmt.Errorf("has %d, outside %d..%d", n, MinPayloadLength, MaxPayloadLength)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func formatInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// methodChoices is every valid decryption_method value, for messages.
func methodChoices() string {
	return methodList() + ", or a name: " + strings.Join(MethodNames(), ", ")
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
// validCipherList accepts what an OpenSSL cipher list is made of; whether
// OpenSSL knows the ciphers is for the listener to say when it starts.
func validCipherList(s string) error {
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(":+-!@=,_.", r)) {
			return fmt.Errorf("holds %q, which is no part of an OpenSSL cipher list", r)
		}
	}
	return nil
}

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

// parseHost reads one entry of allowed_hosts: an address, or a network as
// address/bits. Its messages are the operator's, not netip's.
func parseHost(entry string) (netip.Prefix, error) {
	if entry == "" {
		return netip.Prefix{}, errors.New("empty entry")
	}
	addr, bits, isNet := strings.Cut(entry, "/")
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s is not an IPv4 or IPv6 address (write one such as 192.0.2.5, or a network such as 192.0.2.0/24)", show(addr))
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("zoned addresses are not supported")
	}
	if !isNet {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	n, err := strconv.Atoi(bits)
	switch {
	case err != nil || strconv.Itoa(n) != bits:
		return netip.Prefix{}, fmt.Errorf("the prefix length %s after \"/\" is not a number", show(bits))
	case n < 0 || n > a.BitLen():
		return netip.Prefix{}, fmt.Errorf("the prefix length %d is outside 0..%d", n, a.BitLen())
	}
	// NRPE-style lists may name a host inside the network; what is meant
	// is the network.
	return netip.PrefixFrom(a, n).Masked(), nil
}

// Values of the *_fallback options.
const (
	FallbackSpool = "spool"
	FallbackDump  = "dump"
	FallbackNone  = "none"
)

func fallbackDoc(prefix string) string {
	return "Where results go that the " + prefix + " sink could not deliver (after its retries, or when its " +
		"queue is full): spool (check_result_path), dump (alternate_dump_file) or none (counted and logged " +
		"as dropped). Empty: spool if check_result_path is set, else dump if alternate_dump_file is set, else none."
}

// parseStatsDir reads dir_stats. 0 is off: it is what this option held
// when it was an ignored flag, so files written then keep loading.
func parseStatsDir(s string) (string, error) {
	if s == "0" {
		return "", nil
	}
	return s, nil
}

// validStatsDir wants an absolute directory, so that a value meant as a
// flag (1) is refused instead of naming a directory.
func validStatsDir(s string) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	case s != "" && !strings.HasPrefix(s, "/"):
		return errors.New("is not an absolute path: name the directory of the statistics files, or write 0 for none")
	}
	return nil
}

// validFsync checks queue_fsync: the policies of package queue.
func validFsync(s string) error {
	switch s {
	case "never", "batch", "always":
		return nil
	}
	return errors.New("is not a sync policy; use never, batch or always")
}

func validFallback(s string) error {
	switch s {
	case "", FallbackSpool, FallbackDump, FallbackNone:
		return nil
	}
	return errors.New("is not a fallback; use spool, dump or none")
}

// validURL checks an http or https base URL.
func validURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("must start with https:// (or http://)")
	case u.Host == "":
		return errors.New("has no host")
	}
	return nil
}

// validServers checks a comma-separated host:port list.
func validServers(s string) error {
	_, err := splitServers(s)
	return err
}

func splitServers(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, entry := range strings.Split(s, ",") {
		entry = strings.Trim(entry, " \t\r")
		host, port, err := net.SplitHostPort(entry)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if err == nil {
			if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
				err = errors.New("bad port")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("has a bad entry %s: %v (want host:port)", show(entry), err)
		}
		out = append(out, entry)
	}
	return out, nil
}

// yesNo is a flag written as 1/0 or, as mod_gearman writes it, yes/no or
// on/off.
func yesNo(ptr func(*Config) *bool) kind {
	parse := func(s string) (bool, error) {
		switch strings.ToLower(s) {
		case "yes", "on", "true":
			return true, nil
		case "no", "off", "false":
			return false, nil
		}
		n, err := parseInt(s)
		if err != nil {
			return false, fmt.Errorf("%v: write 1 (yes) or 0 (no)", err)
		}
		return n > 0, nil
	}
	b := boolean(ptr).(field[bool])
	b.parse = parse
	return b
}
