package conf

import (
	"slices"
	"strconv"
	"strings"

	"nsca_fast/conf/option"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/emit/dialect"
)

// row is one option of Config.
type row = option.Row[Config]

// options is the table. Its order is Dump's order and the documentation's:
// stock options first, as stock's sample file lists them, then nsca_fast's,
// then ours.
var options = slices.Concat(earlyOptions, engineRows(), laterOptions, nrdpRows)

// earlyOptions precede the remote engines' options in the table.
var earlyOptions = []row{
	// Stock nsca 2.10.
	{Name: "pid_file", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.PidFile }, nil),
		Doc:  "File the daemon writes its process id to at start and removes at exit. Empty: no pid file."},
	{Name: "server_port", Default: "5667", Origin: option.OriginStock,
		Kind: option.Integer(func(c *Config) *int { return &c.ServerPort }, 1, 65535, ""),
		Doc:  "TCP port to listen on, 1..65535. Ports below 1024 need root."},
	{Name: "server_address", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.ServerAddress }, nil),
		Doc:  "Address or host name to listen on. Empty: every address of the machine."},
	{Name: "nsca_user", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.User }, nil),
		Doc:  "User (name or number) to run as once the port is bound. Empty: keep the user the daemon was started as."},
	{Name: "nsca_group", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.Group }, nil),
		Doc:  "Group (name or number) to run as once the port is bound. Empty: keep the starting group."},
	{Name: "nsca_chroot", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.Chroot }, nil),
		Doc: "Directory to chroot into once the port is bound; command_file and the other paths are then " +
			"resolved inside it. Empty: no chroot."},
	{Name: "debug", Default: "0", Origin: option.OriginStock,
		Kind: option.Boolean(func(c *Config) *bool { return &c.Debug }),
		Doc:  "1: log every connection and every check result received. 0: log problems only."},
	{Name: "command_file", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.CommandFile }, nil),
		Doc: "The monitoring core's external command file (a FIFO, or an existing regular file) that " +
			"results are written to. It is never created."},
	{Name: "alternate_dump_file", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.AlternateDumpFile }, nil),
		Doc: "Last resort: results that neither command_file nor check_result_path took (the FIFO is " +
			"missing, has no reader or stays full; the spool failed or is at its cap) are appended here as " +
			"command lines; created if needed. Empty: such results are dropped, counted and logged."},
	{Name: "aggregate_writes", Default: "0", Origin: option.OriginStock,
		Kind: option.Boolean(func(c *Config) *bool { return &c.AggregateWrites }),
		Doc:  "1: keep command_file open between results. 0: open and close it for each result, as stock does by default."},
	{Name: "append_to_file", Default: "0", Origin: option.OriginStock,
		Kind: option.Boolean(func(c *Config) *bool { return &c.AppendToFile }),
		Doc:  "1: open command_file for appending, for a regular file rather than a FIFO."},
	{Name: "max_packet_age", Default: "30", Origin: option.OriginStock,
		Kind: option.Integer(func(c *Config) *int { return &c.MaxPacketAge }, 0, 900, " seconds"),
		Doc: "Oldest packet accepted, in seconds since the connection's init packet, 0..900. " +
			"Enforced only with max_packet_age_enabled=1 (stock 2.10 never enforces it)."},
	{Name: "password", Origin: option.OriginStock, Secret: true,
		Kind: option.Text(func(c *Config) *string { return &c.Password }, validPassword),
		Doc: "Shared secret with send_nsca, at most 511 bytes, taken verbatim to the end of the line " +
			"(trailing blanks included). Empty: the key is all zero bytes."},
	{Name: "decryption_method", Default: "1", Origin: option.OriginStock,
		Kind: methodsKind{},
		Doc: "Must equal send_nsca's encryption_method: " + methodList() + " (2 and up: libmcrypt in " +
			"8-bit CFB). A name may be written instead, libmcrypt's for stock's methods or NSClient++'s " +
			"encryption name: " + strings.Join(MethodNames(), ", ") + "; " + ownNote + ", always " +
			"served natively. Several methods separated by commas (1,14) are all accepted: a connection's " +
			"first packet is tried with each, with every password (password, password_file), and the rest " +
			"of the connection uses the one that decrypted it; the first listed is the one reports name."},
	{Name: "log_facility", Default: "daemon", Origin: option.OriginStock,
		Kind: option.Field[Config, string]{Ptr: func(c *Config) *string { return &c.LogFacility },
			Parse: parseFacility, Valid: validFacility, Format: func(s string) string { return s }},
		Doc: "Syslog facility: " + strings.Join(facilities, ", ") + " (stock's spelling lrp is read as lpr). " +
			"Another value is warned about and daemon is used, as stock does."},
	{Name: "check_result_path", Origin: option.OriginStock,
		Kind: option.Text(func(c *Config) *string { return &c.CheckResultPath }, nil),
		Doc: "The core's check result spool directory: results are written there as files. " +
			"Empty: results go to command_file only."},
	{Name: "strict_mode_spoofing", Default: "0", Origin: option.OriginStock,
		Kind: option.Boolean(func(c *Config) *bool { return &c.StrictModeSpoofing }),
		Doc:  "1: drop a result unless the host name it claims resolves to the sending peer's address."},

	// The C++ nsca_fast.
	{Name: "decryption_mode", Default: "1", Origin: option.OriginNscaFast,
		Kind: option.Integer(func(c *Config) *int { return &c.DecryptionMode }, 0, 1, ""),
		Doc: "0: a fresh libmcrypt instance per connection, as stock. 1: one keyed instance per decrypt " +
			"goroutine, re-aimed at each connection's IV (faster)."},
	{Name: "decryption_engine", Default: cipher.DefaultEngine, Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.DecryptionEngine }, validEngine),
		Doc: "What decrypts decryption_method 2 and up: auto (native where there is a native engine and its " +
			"start-up self-test against libmcrypt passes, libmcrypt otherwise), native (Go, with AES-NI, AVX2 and AVX-512 " +
			"assembly, for every usable method: 2 des, 3 tripledes, 4 cast-128, 5 cast-256, 6 xtea, 8 blowfish, " +
			"9 twofish, 10 loki97, 11 rc2, 14 rijndael-128, 15 rijndael-192, 16 rijndael-256, 20 serpent, 23 gost " +
			"and 26 saferplus; refusing to start on a failed self-test) or libmcrypt " +
			"(through cgo, as stock). The start-up line says which engine serves and why. A build without " +
			"libmcrypt (CGO_ENABLED=0) serves 0, 1 and the native methods only."},
	{Name: "nsca_workers", Default: "0", Origin: option.OriginNscaFast,
		Kind: option.Integer(func(c *Config) *int { return &c.Workers }, 0, 100, ""),
		Doc:  "Worker processes sharing the port with SO_REUSEPORT, 0..100. 0: serve in the main process."},
	{Name: "nsca_workers_spread", Default: SpreadLoad, Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.WorkersSpread }, validSpread),
		Doc: "Which workers new connections go to: load (the first worker only while it keeps up, every worker " +
			"once it uses more than 0.9 of a CPU or more than 16 connections wait for it) or always (every worker, " +
			"at random). A trickle spread over several workers costs more CPU per check than one worker taking it all."},
	{Name: "nsca_threads_per_worker", Default: "0", Origin: option.OriginNscaFast,
		Kind: option.Integer(func(c *Config) *int { return &c.ThreadsPerWorker }, 0, 1000, ""),
		Doc:  "Decrypt goroutines per worker, 0..1000. 0: one per CPU of the worker's share, the CPUs divided by nsca_workers."},
	{Name: "max_checks_per_connection", Default: "5000", Origin: option.OriginNscaFast,
		Kind: option.Integer(func(c *Config) *int { return &c.MaxChecksPerConnection }, 0, noLimit, ""),
		Doc:  "A connection that sends more results than this is closed. 0: no limit."},
	{Name: "max_packet_age_enabled", Default: "0", Origin: option.OriginNscaFast,
		Kind: option.Boolean(func(c *Config) *bool { return &c.MaxPacketAgeEnabled }),
		Doc:  "1: drop packets older than max_packet_age. 0: accept any age, as stock 2.10 does."},
	{Name: "check_result_path_max_files", Default: "0", Origin: option.OriginNscaFast,
		Kind: option.Integer(func(c *Config) *int { return &c.CheckResultPathMaxFiles }, 0, noLimit, ""),
		Doc: "Most unprocessed result files in check_result_path; beyond it results wait in a bounded queue. " +
			"0: no cap."},
	{Name: "dir_stats", Origin: option.OriginNscaFast,
		Kind: option.Field[Config, string]{Ptr: func(c *Config) *string { return &c.DirStats },
			Parse: parseStatsDir, Valid: validStatsDir, Format: func(s string) string { return s }},
		Doc: "Directory in which each worker (the main process with nsca_workers=0, as slot 0) keeps " +
			"nsca-stats-<slot>.txt, the C++ nsca_fast's statistics file for Munin, rewritten every 5 seconds " +
			"and removed at exit; it must exist and be writable by nsca_user (under nsca_chroot, inside it). " +
			"Empty or 0: no statistics files (the C++ daemon's default is /tmp)."},

	// New in this project.
	{Name: "connection_timeout", Default: "10", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.ConnectionTimeout }, 1, 3600, " seconds"),
		Doc:  "Seconds a client may stay idle or too slow before it is closed, 1..3600 (stock's fixed socket timeout is 10)."},
	{Name: "max_connections", Default: "0", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.MaxConnections }, 0, noLimit, ""),
		Doc:  "Open connections per worker; more are closed at once. 0: sized for the machine."},
	{Name: "reader_threads", Default: "1", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.ReaderThreads }, 1, 64, ""),
		Doc:  "Goroutines per worker that read from connections with epoll, 1..64."},
	{Name: "queue_size", Default: "128", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.QueueSize }, 1, 1000000, ""),
		Doc:  "Capacity of each queue between pipeline stages, 1..1000000; bounds memory under overload."},
	{Name: "allowed_hosts", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.AllowedHosts }, validHosts),
		Doc: "Comma-separated IP addresses and CIDRs allowed to connect; others are closed before the " +
			"init packet. Empty: everyone."},
	{Name: "spool_file_mode", Default: "0600", Origin: option.OriginNew,
		Kind: option.Field[Config, uint32]{Ptr: func(c *Config) *uint32 { return &c.SpoolFileMode },
			Parse: parseOctal, Valid: validMode, Format: formatOctal, Number: true},
		Doc: "Permission bits, in octal, of the files written into check_result_path. 0600 as stock: the " +
			"core runs as the same user."},
	{Name: "payload_length", Default: "512,4096", Origin: option.OriginNew,
		Kind: option.Field[Config, []int]{Ptr: func(c *Config) *[]int { return &c.PayloadLengths },
			Parse: parsePayloadLengths, Format: formatInts, Number: true},
		Doc: "Comma-separated plugin output field lengths accepted (NSClient++'s \"payload length\"), each " +
			strconv.Itoa(MinPayloadLength) + ".." + strconv.Itoa(MaxPayloadLength) + "; a packet is 208 bytes " +
			"more. 512 is NSCA 2.7's and NSClient++'s default (720-byte packets), 4096 send_nsca's (4304). The " +
			"first packet of a connection decides its size (the smallest accepted length whose version and CRC " +
			"check); all its packets have that size."},
	{Name: "command_file_dialect", Default: "nagios", Origin: option.OriginNew,
		Kind: option.Field[Config, dialect.Dialect]{Ptr: func(c *Config) *dialect.Dialect { return &c.CommandFileDialect },
			Parse: parseDialect, Format: dialect.Dialect.String},
		Doc: "Escaping of plugin output in command_file, check_result_path files and alternate_dump_file, " +
			"for the core that reads them: nagios (stock's, byte for byte; Nagios 4), icinga2 (Icinga 2's " +
			"command pipe) or naemon. Output a core cannot store exactly is written in a documented " +
			"substitute form and counted (nsca_dialect_lossy_total)."},
	{Name: "metrics_address", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.MetricsAddress }, validHostPort),
		Doc: "host:port on which to serve Prometheus metrics at /metrics (counters summed over the workers), " +
			"liveness at /healthz and readiness at /readyz. Empty: off."},

	{Name: "stats_interval", Default: "300", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.StatsInterval }, 0, 86400, " seconds"),
		Doc: "Most seconds between two statistics lines in the log while counters change, 0..86400: under " +
			"steady traffic one line per interval. Sooner, within 5 seconds (or the interval, if shorter), when " +
			"something noteworthy happened since the last line: results dropped or refused to an identity, " +
			"connections refused, a sink's write error, fallback or outage, damage in a durable queue; at most " +
			"one such line a minute while it goes on. No line while no counter changes. 0: no statistics lines " +
			"(the final one at exit stays)."},

	// Scaling out: a load balancer in front, distributed engines behind.
	{Name: "proxy_protocol", Default: "0", Origin: option.OriginNew,
		Kind: option.Boolean(func(c *Config) *bool { return &c.ProxyProtocol }),
		Doc: "1: every connection must begin with a PROXY protocol v1 or v2 header (HAProxy's send-proxy " +
			"or send-proxy-v2), from a peer in proxy_protocol_trusted; the client address it carries is used " +
			"for logging, allowed_hosts and strict_mode_spoofing. 0: no header is expected."},
	{Name: "proxy_protocol_trusted", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.ProxyProtocolTrusted }, validHosts),
		Doc: "Comma-separated IP addresses and CIDRs of the load balancers allowed to send a PROXY header; " +
			"any other peer is closed, so a client cannot forge its source. Required with proxy_protocol=1."},
}

// laterOptions follow the remote engines' options in the table.
var laterOptions = []row{
	{Name: "queue_directory", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.QueueDirectory }, nil),
		Doc: "Directory of the durable queues of the remote sinks (icinga2, gearman): each keeps, in its own " +
			"subdirectory (<sink>, or <sink>-<slot> in a worker process), the results its engine could not take at " +
			"once, and delivers them in order when the engine is back, across restarts and kill -9; the queues of " +
			"worker slots no longer configured are taken over by the remaining processes. Created 0750 if " +
			"missing. Empty: memory queues only (icinga2_queue_size, gearman_queue_size)."},
	{Name: "queue_max_bytes", Default: "1073741824", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.QueueMaxBytes }, 65536, 1<<40, " bytes"),
		Doc: "Bytes each durable queue may hold on disk, 65536..2^40; results past it go to the sink's " +
			"fallback at once, counted (fell_back) and logged."},
	{Name: "queue_fsync", Default: "batch", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.QueueFsync }, validFsync),
		Doc: "When the durable queues force appended results to disk: never (the kernel writes back; a power " +
			"loss may cost the last 30 s or so), batch (each batch of results is synced before it counts as " +
			"queued) or always (each result and each acknowledgement is synced)."},

	// Several secrets and client identities.
	{Name: "password_file", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.PasswordFile }, nil),
		Doc: "File of further passwords, one per line, verbatim (a trailing carriage return is removed; empty " +
			"lines and lines starting with # are skipped), each accepted beside password with every " +
			"decryption_method: a site changes its password while clients change one by one, and " +
			"nsca_secret_matches_total{secret=\"password_file:LINE/METHOD\"} shows when the old one is no longer " +
			"used. With password_file and no password line, only the file's passwords are accepted. Read at " +
			"start and at every reload; keep it readable by the daemon's user only."},
	{Name: "identities_file", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.IdentitiesFile }, nil),
		Doc: "File of client identities in nsca-ng's authorize syntax (authorize \"name\" { password = ...; " +
			"hosts = ...; services = ...; commands = ...; networks = ...; decryption_method = ... }, \"*\" as " +
			"fallback, include(...)): each identity's password and method are tried for the connections from " +
			"its networks, most specific first, and its results are refused unless its hosts or services allow " +
			"them (counted in nsca_identity_refused_total). Clients with the server's own password (password, " +
			"password_file) get the rights of the \"*\" block, or every right when there is none; without " +
			"password and password_file only identities are accepted. Empty: no identities."},
	// nsca-ng clients.
	{Name: "nsca_ng_listen", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.NscaNGListen }, validHostPort),
		Doc: "address:port on which to serve nsca-ng clients (protocol version 1 over TLS with pre-shared keys; " +
			"nsca-ng's port is 5668), with the identities of identities_file. Empty: off."},
	{Name: "nsca_ng_threads", Default: "1", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.NscaNGThreads }, 1, 64, ""),
		Doc:  "Goroutines per worker that run the TLS sessions of nsca-ng clients, 1..64."},
	{Name: "nsca_ng_max_sessions", Default: "1024", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.NscaNGMaxSessions }, 1, 1000000, ""),
		Doc:  "Open nsca-ng connections per worker, 1..1000000; more are closed at once, counted and logged."},
	{Name: "nsca_ng_handshake_timeout", Default: "10", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.NscaNGHandshakeTimeout }, 1, 3600, " seconds"),
		Doc:  "Seconds an nsca-ng client has to finish the TLS handshake, 1..3600."},
	{Name: "nsca_ng_timeout", Default: "60", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.NscaNGTimeout }, 1, 86400, " seconds"),
		Doc:  "Seconds an nsca-ng session may stay idle before the server bails out, 1..86400 (nsca-ng's timeout)."},
	{Name: "nsca_ng_max_command_size", Default: "16384", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.NscaNGMaxCommandSize }, 1, 1<<20, " bytes"),
		Doc:  "Longest command an nsca-ng client may push, 1..1048576 bytes; longer ones are refused (nsca-ng's max_command_size)."},
	{Name: "max_handshakes_per_source", Default: "8", Origin: option.OriginNew,
		Kind: option.Integer(func(c *Config) *int { return &c.MaxHandshakesPerSource }, 0, 1000000, ""),
		Doc: "Connections of one client address that may be in their TLS handshake at once, per worker, once over " +
			"half of nsca_ng_max_sessions are open, 0..1000000 (0: no cap); more are closed at once, counted as refused " +
			"and logged, so that one address that opens connections and says nothing cannot hold every session slot " +
			"until the handshake timeout. Below half, clients behind one address (a NAT) may all start at once."},
	{Name: "nsca_ng_tls_ciphers", Default: "PSK-AES256-CBC-SHA:PSK-AES128-CBC-SHA:PSK-3DES-EDE-CBC-SHA:PSK-RC4-SHA", Origin: option.OriginNew,
		Kind: option.Text(func(c *Config) *string { return &c.NscaNGCiphers }, validCipherList),
		Doc: "OpenSSL cipher list offered to nsca-ng clients for TLS 1.2 and older, nsca-ng's default (OpenSSL 3 " +
			"has only the first two); TLS 1.3 uses OpenSSL's suites."},
}

// byName finds a row by its exact name, as Parse needs for every line.
var byName = func() map[string]*row {
	m := make(map[string]*row, len(options))
	for i := range options {
		m[options[i].Name] = &options[i]
	}
	return m
}()
