package conf

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/option"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/gearman"
	"nsca_fast/stages/emit/icinga2"
	"nsca_fast/stages/nrdp"
)

// dumpValue returns the value Dump shows for name, so that one generic check
// covers every option's parsing without naming its Go field.
func dumpValue(t *testing.T, c *Config, name string) string {
	t.Helper()
	for _, l := range c.Dump() {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return v
		}
	}
	t.Fatalf("Dump has no line for %s", name)
	return ""
}

func TestDefault(t *testing.T) {
	want := &Config{
		ServerPort:             5667,
		MaxPacketAge:           30,
		DecryptionMethod:       1,
		LogFacility:            "daemon",
		DecryptionMode:         1,
		MaxChecksPerConnection: 5000,
		DecryptionEngine:       "auto",
		WorkersSpread:          "load",
		PayloadLengths:         []int{512, 4096},
		ConnectionTimeout:      10,
		StatsInterval:          300,
		ReaderThreads:          1,
		QueueSize:              128,
		SpoolFileMode:          0o600,
		Icinga2: icinga2.Options{VerifyTLS: true, MaxInFlight: 8, Timeout: 10 * time.Second, Retries: 3,
			QueueSize: 10000},
		Gearman:                gearman.Options{Queue: "check_results", Encryption: true, Timeout: 10 * time.Second, QueueSize: 10000},
		QueueMaxBytes:          1 << 30,
		QueueFsync:             "batch",
		NscaNGThreads:          1,
		NscaNGMaxSessions:      1024,
		NscaNGHandshakeTimeout: 10,
		NscaNGTimeout:          60,
		NscaNGMaxCommandSize:   16384,
		NscaNGCiphers:          "PSK-AES256-CBC-SHA:PSK-AES128-CBC-SHA:PSK-3DES-EDE-CBC-SHA:PSK-RC4-SHA",
		MaxHandshakesPerSource: 8,
		NRDP: nrdp.Options{MaxConnections: 128, MaxRequestSize: 2 << 20, HeaderTimeout: 10 * time.Second,
			Timeout: 30 * time.Second, IdleTimeout: time.Minute},
		Lines: map[string]int{},
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestTableMatchesConfig guards the one-row-per-option rule: every option
// field of Config has a row, and every row's documented default is what
// Default() holds.
func TestTableMatchesConfig(t *testing.T) {
	fields := reflect.TypeFor[Config]().NumField() - 5 // File, Lines, Warnings, cipher, MoreMethods
	// The remote engines' options are a field each, of a field per option.
	fields += reflect.TypeFor[icinga2.Options]().NumField() - 1
	fields += reflect.TypeFor[gearman.Options]().NumField() - 1
	fields += reflect.TypeFor[nrdp.Options]().NumField() - 1
	if len(options) != fields {
		t.Errorf("%d options for %d option fields of Config", len(options), fields)
	}
	d := Default()
	seen := map[string]bool{}
	for _, o := range Options() {
		if seen[o.Name] {
			t.Errorf("option %s listed twice", o.Name)
		}
		seen[o.Name] = true
		if o.Doc == "" {
			t.Errorf("option %s has no doc", o.Name)
		}
		if !slices.Contains([]string{option.OriginStock, option.OriginNscaFast, option.OriginNew}, o.Origin) {
			t.Errorf("option %s has origin %q", o.Name, o.Origin)
		}
		if got := byName[o.Name].Kind.Text(d); got != o.Default {
			t.Errorf("option %s: table default %q, Default() holds %q", o.Name, o.Default, got)
		}
	}
}

// TestOptionValues parses one line per case and checks the effective value
// (through Dump) or the error. Every option has valid and invalid cases.
func TestOptionValues(t *testing.T) {
	type tc struct {
		value string // after "name="
		want  string // Dump's value on success
		err   string // substring of the error; "" for success
		warn  string // substring of the one warning on success; "": none
	}
	bad := func(value, err string) tc { return tc{value: value, err: err} }
	ok := func(value, want string) tc { return tc{value: value, want: want} }
	// warned is a value stock runs with (and so does nsca_fast) that is
	// probably not what its author meant.
	warned := func(value, want, warn string) tc { return tc{value: value, want: want, warn: warn} }
	notNumber := "is not a number; stock nsca reads only its leading digits"
	inline := `only a "#" at the start of a line begins a comment`
	blank := "ends in a blank (space or tab)"
	notInt := "is not a decimal integer"
	nul := "contains a NUL byte"
	boolCases := []tc{ok("1", "1"), ok("0", "0"), ok("7", "1"), ok("-1", "0"), ok(" 1\t", "1"),
		bad("yes", notInt), bad("1x", notInt), bad("true", notInt), bad("1 # on", inline)}
	// Stock's flags are read as stock's atoi reads them.
	stockBoolCases := []tc{ok("1", "1"), ok("0", "0"), ok("7", "1"), ok("-1", "0"), ok(" 1\t", "1"),
		warned("yes", "0", "=yes "+notNumber+" (0 when there are none), 0, and so does nsca_fast: write "),
		warned("1x", "1", notNumber), warned("true", "0", "(1 for yes, 0 for no)"), warned("1 # on", "1", inline),
		bad("99999999999999999999", "out of range")}
	textCases := []tc{ok("/a/b", "/a/b"), warned("x y ", `"x y "`, blank), ok(" lead", `" lead"`), bad("a\x00b", nul),
		warned("/a # b", "/a # b", inline), ok("/a#b", "/a#b")}
	secretCases := []tc{warned("s3cret ", "********", "a client whose password lacks it is refused"),
		bad("a\x00b", "contains a NUL byte")}
	cases := map[string][]tc{
		"pid_file": textCases,
		"server_port": {ok("1", "1"), ok("65535", "65535"), ok(" 5668 ", "5668"), ok("\t80", "80"),
			ok("+22", "22"), ok("0010", "10"), bad("0", "must be at least 1"),
			bad("65536", "cannot be greater than 65535"), bad("-1", "must be at least 1"),
			warned("5667abc", "5667", notNumber), bad("0x10", "server_port=0x10 is read as 0, as stock nsca reads it, which must be at least 1"), warned("1_000", "1", notNumber),
			warned("1e3", "1", notNumber), warned("5667 # the port", "5667", "reads the number before it, 5667"),
			bad(" ", notInt), bad("99999999999999999999", "out of range")},
		"server_address": {ok("127.0.0.1", "127.0.0.1"), ok("::1", "::1"), ok("nagios.example", "nagios.example"),
			bad("\x00", nul)},
		"nsca_user":           textCases,
		"nsca_group":          textCases,
		"nsca_chroot":         textCases,
		"debug":               stockBoolCases,
		"command_file":        textCases,
		"alternate_dump_file": textCases,
		"aggregate_writes":    stockBoolCases,
		"append_to_file":      stockBoolCases,
		"max_packet_age": {ok("0", "0"), ok("900", "900"), ok("45", "45"),
			bad("901", "max_packet_age=901 cannot be greater than 900 seconds"),
			bad("-1", "cannot be negative"), warned("30s", "30", "max_packet_age=30s "+notNumber),
			bad("901s", "cannot be greater than 900")},
		"password": {ok("s3cret", "********"), warned(" ", "********", blank),
			warned("pw # the password", "********", "stock nsca and send_nsca take the text"),
			ok(strings.Repeat("p", 511), "********"),
			bad(strings.Repeat("p", 512), "password is too long: 512 bytes, at most 511"),
			bad("a\x00", nul)},
		"decryption_method": {ok("0", "0"), ok("1", "1"), ok("3", "3"), ok("14", "14"), ok("26", "26"),
			ok(" 8 ", "8"), bad("13", "decryption_method=13 is not a decryption method; use one of 0 none, 1 xor"),
			bad("17", "is not a decryption method"), bad("18", "is not a decryption method"),
			bad("21", "is not a decryption method"), bad("27", "is not a decryption method"),
			bad("-1", "is not a decryption method"),
			// NSClient++'s names, and the methods this project adds.
			ok("des", "2"), ok("3des", "3"), ok("cast128", "4"), ok("xtea", "6"), ok("blowfish", "8"),
			ok("twofish", "9"), ok("rc2", "11"), ok("aes", "14"), ok("aes256", "14"), ok("rijndael256", "14"),
			ok("serpent", "20"), ok("none", "0"), ok("xor", "1"), ok("aes128", "aes128"),
			ok("rijndael128", "aes128"), ok("aes192", "aes192"), ok("rijndael192", "aes192"), ok("gost", "gost"),
			// libmcrypt's names.
			ok("tripledes", "3"), ok("cast-128", "4"), ok("cast-256", "5"), ok("loki97", "10"),
			ok("rijndael-128", "14"), ok("rijndael-192", "15"), ok("rijndael-256", "16"), ok("saferplus", "26"),
			bad("threeway", "(threeway) is unusable"), bad("arcfour", "(arcfour) is unusable"),
			bad("Tripledes", "is neither a method number nor a method name; use one of 0 none, 1 xor"),
			bad("AES", "or a name: none (= 0), xor (= 1), des (= 2), 3des (= 3), tripledes (= 3)"),
			bad("cast_128", "aes128, rijndael128, aes192"),
			bad("rijndael", "aes128 and rijndael128 (no dash), aes192 and rijndael192, and gost are NSClient++'s"),
			// As stock's atoi, but a word is never read as 0: no encryption.
			warned("14 # rijndael-128", "14", "reads the number before it, 14"), warned("14x", "14", notNumber),
			bad("100", "is not a decryption method; write its name, aes128"), bad("102", "write its name, gost"),
			bad("7", "decryption_method=7 (threeway) is unusable: "+whyBlock+"; send_nsca cannot use it either"),
			bad("12", "decryption_method=12 (arcfour) is unusable: a stream cipher, libmcrypt cannot open it "+
				"in 8-bit cfb mode; send_nsca cannot use it either"),
			bad("19", "(wake) is unusable: "+whyStream), bad("22", "(enigma) is unusable: "+whyStream),
			bad("24", "(safer-sk64) is unusable: "+whyBlock), bad("25", "(safer-sk128) is unusable: "+whyBlock),
			// Several methods, for a change of method without a flag day.
			ok("1,14", "1,14"), ok(" 14 , aes128", "14,aes128"), ok("3des,xor", "3,1"),
			bad("1,", "has an empty entry; write methods separated by commas"),
			bad("1,13", "has a bad entry 13: is not a decryption method"),
			bad("1,12", "has a bad entry 12: (arcfour) is unusable"), bad("14,aes", "lists aes twice")},
		"log_facility": {ok("daemon", "daemon"), ok("local7", "local7"), ok("lpr", "lpr"), ok("authpriv", "authpriv"),
			ok("lrp", "lpr"), warned("Daemon", "daemon", "is not a syslog facility; stock nsca logs that and uses daemon"),
			warned("local9", "daemon", "log_facility=local9 is not a syslog facility"),
			warned("daemon ", "daemon", `log_facility="daemon " is not a syslog facility`), bad("a\x00", nul)},
		"check_result_path": append(textCases,
			// Writability belongs to the sink at startup, not to the parser.
			ok("/nonexistent/spool", "/nonexistent/spool")),
		"strict_mode_spoofing": stockBoolCases,
		"password_file":        textCases,
		"identities_file":      textCases,
		"decryption_mode":      {ok("0", "0"), ok("1", "1"), bad("2", "cannot be greater than 1"), bad("-1", "cannot be negative")},
		"decryption_engine": {ok("libmcrypt", "libmcrypt"), ok("native", "native"), ok("auto", "auto"),
			bad("Native", "decryption_engine=Native is not a decryption engine; use libmcrypt, native or auto"),
			bad("go", "is not a decryption engine")},
		"payload_length": {ok("512,4096", "512,4096"), ok("4096, 512", "512,4096"), ok(" 1024 ", "1024"),
			ok("8192,512,8192", "512,8192"), ok("65536", "65536"),
			bad("511", "payload_length=511 has 511, outside 512..65536"), bad("65537", "outside 512..65536"),
			bad("512,", "has an empty entry"), bad("512;4096", "has a bad entry 512;4096: is not a decimal integer"),
			bad("x", "has a bad entry")},
		"nsca_workers": {ok("0", "0"), ok("100", "100"), bad("101", "cannot be greater than 100"), bad("x", notInt)},
		"nsca_workers_spread": {ok("load", "load"), ok("always", "always"),
			bad("Always", "nsca_workers_spread=Always is not a way to spread connections; use load or always"), bad("random", "is not a way")},
		"nsca_threads_per_worker": {ok("0", "0"), ok("1000", "1000"), bad("1001", "cannot be greater than 1000"),
			bad("-5", "cannot be negative")},
		"max_checks_per_connection": {ok("0", "0"), ok("1", "1"), ok("1000000000", "1000000000"),
			bad("-1", "cannot be negative"), bad("many", notInt)},
		"max_packet_age_enabled": boolCases,
		"check_result_path_max_files": {ok("0", "0"), ok("100000", "100000"), bad("-1", "cannot be negative"),
			bad("1k", notInt)},
		"dir_stats": {ok("/var/lib/munin-stats", "/var/lib/munin-stats"), ok("0", `""`),
			bad("1", "dir_stats=1 is not an absolute path"), bad("tmp", "is not an absolute path")},
		"stats_interval": {ok("0", "0"), ok("86400", "86400"), bad("86401", "stats_interval=86401 cannot be greater than 86400"),
			bad("-1", "stats_interval=-1 cannot be negative")},
		"connection_timeout": {ok("1", "1"), ok("3600", "3600"), bad("0", "connection_timeout=0 must be at least 1:"),
			bad("3601", "cannot be greater than 3600 seconds"), bad("10s", notInt)},
		"max_connections": {ok("0", "0"), ok("20000", "20000"), bad("-1", "cannot be negative"), bad("1.5", notInt)},
		"reader_threads": {ok("1", "1"), ok("64", "64"), bad("0", "must be at least 1"),
			bad("65", "cannot be greater than 64")},
		"queue_size": {ok("1", "1"), ok("1000000", "1000000"), bad("0", "must be at least 1"),
			bad("1000001", "cannot be greater than 1000000")},
		"allowed_hosts": {ok("127.0.0.1", "127.0.0.1"), ok("10.0.0.0/8, ::1 ,2001:db8::/32", "10.0.0.0/8, ::1 ,2001:db8::/32"),
			warned(" 10.0.0.1\t", `" 10.0.0.1\t"`, blank),
			bad("10.0.0.256", "allowed_hosts=10.0.0.256 has a bad entry 10.0.0.256: 10.0.0.256 is not an IPv4 or IPv6 address (write one"),
			bad("10.0.0.1,,10.0.0.2", `has a bad entry "": empty entry`),
			bad("10.0.0.1,nagios.example", "has a bad entry nagios.example"),
			bad("10.0.0.0/33", "has a bad entry 10.0.0.0/33: the prefix length 33 is outside 0..32: bad value"),
			bad("10.0.0.0/x", `has a bad entry 10.0.0.0/x: the prefix length x after "/" is not a number: bad value`),
			bad("::1/129", "the prefix length 129 is outside 0..128"),
			bad("fe80::1%eth0", "zoned addresses are not supported"), bad(",", "empty entry")},
		"spool_file_mode": {ok("0600", "0600"), ok("644", "0644"), ok("0", "0000"), ok(" 0640 ", "0640"),
			ok("0777", "0777"), bad("01777", "has bits beyond 0777"), bad("0800", "is not an octal number"),
			bad("rw", "is not an octal number"), bad("-1", "is not an octal number")},
		"command_file_dialect": {ok("nagios", "nagios"), ok("icinga2", "icinga2"), ok("naemon", "naemon"),
			bad("Icinga2", "command_file_dialect=Icinga2 is not a dialect; use nagios, icinga2, naemon"),
			bad("icinga", "is not a dialect")},
		"metrics_address": {ok("127.0.0.1:9667", "127.0.0.1:9667"), ok(":9667", ":9667"), ok("[::1]:9667", "[::1]:9667"),
			bad("127.0.0.1", "is not host:port"), bad("localhost:http x", "is not host:port"), bad("127.0.0.1:99999", "is not host:port")},
		"proxy_protocol": boolCases,
		"proxy_protocol_trusted": {ok("127.0.0.1", "127.0.0.1"), ok("10.0.0.0/8,::1", "10.0.0.0/8,::1"),
			bad("haproxy.example", "proxy_protocol_trusted=haproxy.example has a bad entry haproxy.example"),
			bad("10.0.0.0/33", "has a bad entry 10.0.0.0/33")},
		"icinga2_api_url": {ok("https://127.0.0.1:5665", "https://127.0.0.1:5665"), ok("http://icinga:5665/x", "http://icinga:5665/x"),
			bad("127.0.0.1:5665", "is not a URL"), bad("icinga:5665", "must start with https://"), bad("https://", "has no host"), bad("ftp://x", "must start with https://")},
		"icinga2_api_user":     textCases,
		"icinga2_api_password": secretCases,
		"icinga2_client_cert":  textCases,
		"icinga2_client_key":   textCases,
		"icinga2_ca_file":      textCases,
		"icinga2_verify_tls":   boolCases,
		"icinga2_max_in_flight": {ok("1", "1"), ok("1024", "1024"), bad("0", "must be at least 1"),
			bad("1025", "cannot be greater than 1024")},
		"icinga2_timeout": {ok("1", "1"), ok("300", "300"), bad("0", "must be at least 1"),
			bad("301", "cannot be greater than 300 seconds")},
		"icinga2_retries":    {ok("0", "0"), ok("100", "100"), bad("-1", "cannot be negative"), bad("101", "cannot be greater than 100")},
		"icinga2_queue_size": {ok("1", "1"), ok("1000000", "1000000"), bad("0", "must be at least 1"), bad("x", notInt)},
		"icinga2_fallback": {ok("spool", "spool"), ok("dump", "dump"), ok("none", "none"),
			bad("fifo", "icinga2_fallback=fifo is not a fallback; use spool, dump or none"), bad("Spool", "is not a fallback")},
		"gearman_server": {ok("127.0.0.1:4730", "127.0.0.1:4730"), ok("a:4730, [::1]:4731", "a:4730, [::1]:4731"),
			bad("127.0.0.1", "gearman_server=127.0.0.1 has a bad entry 127.0.0.1"), bad("a:0", "bad port"),
			bad(":4730", "no host"), bad("a:4730,", `has a bad entry ""`)},
		"gearman_result_queue": {ok("check_results", "check_results"), ok("results_dc1", "results_dc1"),
			bad("a\x00b", nul)},
		"gearman_encryption": {ok("1", "1"), ok("0", "0"), ok("yes", "1"), ok("no", "0"), ok("On", "1"), ok("off", "0"),
			bad("maybe", "write 1 (yes) or 0 (no)")},
		"gearman_key":     secretCases,
		"gearman_keyfile": textCases,
		"gearman_timeout": {ok("1", "1"), ok("300", "300"), bad("0", "must be at least 1"),
			bad("301", "cannot be greater than 300 seconds")},
		"gearman_queue_size":        {ok("1", "1"), ok("1000000", "1000000"), bad("0", "must be at least 1"), bad("x", notInt)},
		"gearman_fallback":          {ok("spool", "spool"), ok("dump", "dump"), ok("none", "none"), bad("icinga2", "is not a fallback")},
		"queue_directory":           {ok("/var/lib/nsca_fast/queue", "/var/lib/nsca_fast/queue"), ok("q", "q"), bad("a\x00b", "NUL")},
		"queue_max_bytes":           {ok("65536", "65536"), ok("1073741824", "1073741824"), bad("65535", "must be at least 65536"), bad("x", notInt)},
		"queue_fsync":               {ok("never", "never"), ok("batch", "batch"), ok("always", "always"), bad("sometimes", "is not a sync policy")},
		"nsca_ng_listen":            {ok("127.0.0.1:5668", "127.0.0.1:5668"), ok(":5668", ":5668"), bad("5668", "is not host:port")},
		"nsca_ng_threads":           {ok("4", "4"), bad("0", "must be at least 1"), bad("65", "cannot be greater than 64")},
		"nsca_ng_max_sessions":      {ok("10", "10"), bad("0", "must be at least 1")},
		"nsca_ng_handshake_timeout": {ok("5", "5"), bad("0", "must be at least 1")},
		"nsca_ng_timeout":           {ok("15", "15"), bad("0", "must be at least 1")},
		"nsca_ng_max_command_size":  {ok("65536", "65536"), bad("0", "must be at least 1"), bad("2000000", "cannot be greater than")},
		"nsca_ng_tls_ciphers":       {ok("PSK-AES256-CBC-SHA", "PSK-AES256-CBC-SHA"), bad("PSK AES", "no part of an OpenSSL cipher list")},
		"max_handshakes_per_source": {ok("0", "0"), ok("16", "16"), bad("-1", "cannot be negative")},
		"nrdp_listen":               {ok("127.0.0.1:5669", "127.0.0.1:5669"), ok("[::1]:443", "[::1]:443"), bad("5669", "is not ADDRESS:PORT"), bad(":0", "needs a port")},
		"nrdp_tls_cert":             textCases,
		"nrdp_tls_key":              textCases,
		"nrdp_tokens":               {ok(" a , b", "********"), bad("a,,b", "has an empty token")},
		"nrdp_max_connections":      {ok("1", "1"), ok("65536", "65536"), bad("0", "must be at least 1"), bad("x", notInt)},
		"nrdp_max_request_size":     {ok("65536", "65536"), bad("65535", "must be at least 65536"), bad("x", notInt)},
		"nrdp_header_timeout":       {ok("1", "1"), bad("0", "must be at least 1"), bad("301", "cannot be greater than 300 seconds")},
		"nrdp_timeout":              {ok("300", "300"), bad("0", "must be at least 1")},
		"nrdp_idle_timeout":         {ok("3600", "3600"), bad("3601", "cannot be greater than 3600 seconds")},
	}
	for _, o := range options {
		var valid, invalid int
		for _, c := range cases[o.Name] {
			if c.err == "" {
				valid++
			} else {
				invalid++
			}
		}
		if valid == 0 || invalid == 0 {
			t.Errorf("option %s: %d valid and %d invalid cases; want some of each", o.Name, valid, invalid)
		}
	}
	for name, list := range cases {
		if byName[name] == nil {
			t.Errorf("cases for unknown option %s", name)
		}
		for _, c := range list {
			line := "# test\n" + name + "=" + c.value + "\n"
			got, err := Parse("t.cfg", []byte(line))
			switch {
			case c.err == "" && err != nil:
				t.Errorf("%q: %v", line, err)
			case c.err == "" && dumpValue(t, got, name) != c.want:
				t.Errorf("%q: Dump shows %s, want %s", line, dumpValue(t, got, name), c.want)
			case c.err == "" && got.Lines[name] != 2:
				t.Errorf("%q: Lines[%s] = %d, want 2", line, name, got.Lines[name])
			case c.err == "" && c.warn == "" && len(got.Warnings) != 0:
				t.Errorf("%q: warnings %q", line, got.Warnings)
			case c.warn != "" && (len(got.Warnings) != 1 || !strings.HasPrefix(got.Warnings[0], "conf: t.cfg:2: "+name) ||
				!strings.Contains(got.Warnings[0], c.warn)):
				t.Errorf("%q: warnings %q, want one at t.cfg:2 naming %s and saying %q", line, got.Warnings, name, c.warn)
			case c.err != "" && err == nil:
				t.Errorf("%q: no error, want %q", line, c.err)
			case c.err != "":
				if !errors.Is(err, ErrBadValue) || !strings.HasPrefix(err.Error(), "conf: t.cfg:2: "+name) ||
					!strings.Contains(err.Error(), c.err) {
					t.Errorf("%q: error %q, want ErrBadValue at t.cfg:2 containing %q", line, err, c.err)
				}
				if name == "password" && strings.Contains(err.Error(), "ppp") {
					t.Errorf("error shows the password: %v", err)
				}
			}
		}
	}
}

// TestFields checks that each option lands in its own Config field, with a
// file that sets every option to something other than its default.
func TestFields(t *testing.T) {
	file := `pid_file=/p
server_port=1234
server_address=10.1.2.3
nsca_user=u
nsca_group=g
nsca_chroot=/ch
debug=1
command_file=/cmd
alternate_dump_file=/dump
aggregate_writes=1
append_to_file=1
max_packet_age=60
password=pw
decryption_method=14
log_facility=local3
check_result_path=/spool
strict_mode_spoofing=1
decryption_mode=0
decryption_engine=native
nsca_workers=3
nsca_workers_spread=always
nsca_threads_per_worker=4
max_checks_per_connection=5
max_packet_age_enabled=1
check_result_path_max_files=6
dir_stats=/stats
connection_timeout=7
max_connections=8
reader_threads=9
queue_size=10
allowed_hosts=10.0.0.0/8
spool_file_mode=0640
payload_length=8192,1024
command_file_dialect=icinga2
metrics_address=127.0.0.1:9667
stats_interval=17
proxy_protocol=1
proxy_protocol_trusted=127.0.0.1
icinga2_api_url=https://icinga:5665
icinga2_api_user=nsca
icinga2_api_password=ipw
icinga2_client_cert=/c.crt
icinga2_client_key=/c.key
icinga2_ca_file=/ca.crt
icinga2_verify_tls=0
icinga2_max_in_flight=11
icinga2_timeout=12
icinga2_retries=13
icinga2_queue_size=14
icinga2_fallback=dump
gearman_server=g1:4730,g2:4730
gearman_result_queue=results
gearman_encryption=no
gearman_key=gk
gearman_keyfile=/gk
gearman_timeout=15
gearman_queue_size=16
gearman_fallback=spool
queue_directory=/q
queue_max_bytes=65536
queue_fsync=always
password_file=/pf
identities_file=/if
nsca_ng_listen=127.0.0.1:5668
nsca_ng_threads=2
nsca_ng_max_sessions=18
nsca_ng_handshake_timeout=19
nsca_ng_timeout=20
nsca_ng_max_command_size=21
max_handshakes_per_source=22
nsca_ng_tls_ciphers=PSK
nrdp_listen=127.0.0.1:5669
nrdp_tls_cert=/n.crt
nrdp_tls_key=/n.key
nrdp_tokens=t1,t2
nrdp_max_connections=22
nrdp_max_request_size=65537
nrdp_header_timeout=23
nrdp_timeout=24
nrdp_idle_timeout=25
`
	c, err := Parse("f.cfg", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File: "f.cfg", PidFile: "/p", ServerPort: 1234, ServerAddress: "10.1.2.3", User: "u", Group: "g",
		Chroot: "/ch", Debug: true, CommandFile: "/cmd", AlternateDumpFile: "/dump", AggregateWrites: true,
		AppendToFile: true, MaxPacketAge: 60, Password: "pw", DecryptionMethod: 14, LogFacility: "local3",
		CheckResultPath: "/spool", StrictModeSpoofing: true, DecryptionMode: 0, Workers: 3, WorkersSpread: "always", ThreadsPerWorker: 4,
		MaxChecksPerConnection: 5, MaxPacketAgeEnabled: true, CheckResultPathMaxFiles: 6, DirStats: "/stats",
		DecryptionEngine: "native", PayloadLengths: []int{1024, 8192},
		ConnectionTimeout: 7, MaxConnections: 8, ReaderThreads: 9, QueueSize: 10, AllowedHosts: "10.0.0.0/8",
		SpoolFileMode: 0o640, CommandFileDialect: dialect.Icinga2, MetricsAddress: "127.0.0.1:9667", StatsInterval: 17,
		ProxyProtocol: true, ProxyProtocolTrusted: "127.0.0.1",
		Icinga2: icinga2.Options{URL: "https://icinga:5665", User: "nsca", Password: "ipw", CertFile: "/c.crt",
			KeyFile: "/c.key", CAFile: "/ca.crt", MaxInFlight: 11, Timeout: 12 * time.Second, Retries: 13,
			QueueSize: 14, Fallback: "dump"},
		Gearman: gearman.Options{Servers: "g1:4730,g2:4730", Queue: "results", Key: "gk", KeyFile: "/gk",
			Timeout: 15 * time.Second, QueueSize: 16, Fallback: "spool"},
		QueueDirectory: "/q", QueueMaxBytes: 65536, QueueFsync: "always",
		PasswordFile: "/pf", IdentitiesFile: "/if",
		NscaNGListen: "127.0.0.1:5668", NscaNGThreads: 2, NscaNGMaxSessions: 18, NscaNGHandshakeTimeout: 19,
		NscaNGTimeout: 20, NscaNGMaxCommandSize: 21, MaxHandshakesPerSource: 22, NscaNGCiphers: "PSK", Lines: map[string]int{},
		NRDP: nrdp.Options{Listen: "127.0.0.1:5669", CertFile: "/n.crt", KeyFile: "/n.key", Tokens: []string{"t1", "t2"},
			MaxConnections: 22, MaxRequestSize: 65537, HeaderTimeout: 23 * time.Second, Timeout: 24 * time.Second,
			IdleTimeout: 25 * time.Second},
	}
	for i, o := range options {
		want.Lines[o.Name] = i + 1
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%+v\nwant\n%+v", c, want)
	}
	if openssl.Available() != nil {
		// A pure Go build refuses nsca_ng_listen (TestNGListenWithoutCgo).
		c.NscaNGListen = ""
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestErrors checks every kind of parse error with its exact message, so
// that file:line points at the offending line.
func TestErrors(t *testing.T) {
	cases := []struct {
		name, file string
		sentinel   error
		msg        string
	}{
		{"no equals", "# c\n\nserver_port=5667\nbogus\n", ErrSyntax,
			`conf: x.cfg:4: no "=" on this line (expected name=value): syntax error`},
		{"indented comment", "server_port=5667\n  # not a comment\n", ErrSyntax,
			`conf: x.cfg:2: no "=" on this line (expected name=value): syntax error`},
		{"blank with spaces", "debug=1\n \n", ErrSyntax,
			`conf: x.cfg:2: no "=" on this line (expected name=value): syntax error`},
		{"no name", "\n=5667", ErrSyntax, `conf: x.cfg:2: no option name before "=": syntax error`},
		{"no value", "#\n#\nserver_port=", ErrSyntax,
			`conf: x.cfg:3: server_port: no value after "=" (comment the line out to keep the default): syntax error`},
		{"no value for unknown", "nonsense=\n", ErrSyntax,
			`conf: x.cfg:1: nonsense: no value after "=" (comment the line out to keep the default): syntax error`},
		{"unknown", "debug=0\n\nfoo=bar\n", ErrUnknownOption, `conf: x.cfg:3: option foo: unknown option`},
		{"unknown, case", "Debug=1\n", ErrUnknownOption, `conf: x.cfg:1: option Debug: unknown option`},
		{"blanks around =", "server_port = 5667\n", ErrUnknownOption,
			`conf: x.cfg:1: option "server_port " (blanks around "=" are not allowed; write server_port=value): unknown option`},
		{"byte order mark later", "server_port=5667\n\ufeffdebug=1\n", ErrUnknownOption,
			`conf: x.cfg:2: option "\ufeffdebug": unknown option`},
		{"stock substring match", "my_command_file=/x\n", ErrUnknownOption,
			`conf: x.cfg:1: option my_command_file: unknown option`},
		{"bad value", "debug=0\ndebug=1\nserver_port=http\n", ErrBadValue,
			`conf: x.cfg:3: server_port=http is not a decimal integer: bad value`},
		{"first error wins", "a\nfoo=1\n", ErrSyntax,
			`conf: x.cfg:1: no "=" on this line (expected name=value): syntax error`},
		{"method", "decryption_method=12\n", ErrBadValue,
			"conf: x.cfg:1: decryption_method=12 (arcfour) is unusable: a stream cipher, libmcrypt cannot open it " +
				"in 8-bit cfb mode; send_nsca cannot use it either: bad value"},
		{"packet age", "max_packet_age=901", ErrBadValue,
			"conf: x.cfg:1: max_packet_age=901 cannot be greater than 900 seconds: bad value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse("x.cfg", []byte(c.file))
			if err == nil {
				t.Fatalf("no error; config %+v", got)
			}
			if got != nil {
				t.Errorf("config returned with an error")
			}
			if !errors.Is(err, c.sentinel) {
				t.Errorf("error %v does not wrap %v", err, c.sentinel)
			}
			if err.Error() != c.msg {
				t.Errorf("error\n%s\nwant\n%s", err, c.msg)
			}
		})
	}
}

func TestSyntax(t *testing.T) {
	file := "# a comment\n" +
		"\n" +
		"#server_port=1\n" +
		"password=a=b==c\n" +
		"command_file=/x#y \n" +
		"server_port=1111\n" +
		"debug=1\n" +
		"server_port=2222\n" +
		"debug=0" // no final newline
	c, err := Parse("s.cfg", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if c.Password != "a=b==c" {
		t.Errorf("password %q: the value runs from the first '='", c.Password)
	}
	if c.CommandFile != "/x#y " {
		t.Errorf("command_file %q: '#' and trailing blank are part of the value", c.CommandFile)
	}
	if c.ServerPort != 2222 || c.Lines["server_port"] != 8 {
		t.Errorf("server_port %d on line %d: the later line wins", c.ServerPort, c.Lines["server_port"])
	}
	if c.Debug || c.Lines["debug"] != 9 {
		t.Errorf("debug %v on line %d: the later line wins", c.Debug, c.Lines["debug"])
	}
	if _, set := c.Lines["pid_file"]; set {
		t.Errorf("Lines holds an option that was not set")
	}
	// Each of what stock does silently is said once, naming the line(s).
	want := []string{
		`conf: s.cfg:5: command_file="/x#y " ends in a blank (space or tab), which stock nsca keeps as part of the value`,
		"conf: s.cfg:8: server_port is set again: this line replaces line 6's value (the last one counts",
		"conf: s.cfg:9: debug is set again: this line replaces line 7's value",
	}
	if c.File != "s.cfg" || len(c.Warnings) != len(want) {
		t.Fatalf("File %q, warnings %q, want %d", c.File, c.Warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(c.Warnings[i], w) {
			t.Errorf("warning %q, want it to start %q", c.Warnings[i], w)
		}
	}
	if c, err := Parse("e.cfg", nil); err != nil || !reflect.DeepEqual(c.Dump(), Default().Dump()) {
		t.Errorf("an empty file should give the defaults: %v", err)
	}
}

func TestPasswordVerbatim(t *testing.T) {
	for _, pw := range []string{"secret ", "  two leading", "tab\tinside\t", "#hash", "ünïcödé", " "} {
		c, err := Parse("p.cfg", []byte("password="+pw+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Password != pw {
			t.Errorf("password %q, want %q", c.Password, pw)
		}
	}
}

// A CRLF file is read as its author meant: no carriage return in any value
// (stock keeps one at the end of each, so its password matches no client,
// and refuses the blank line), with one warning naming the first such line.
func TestCRLF(t *testing.T) {
	file := "server_port=5668\n# comment\r\nserver_address=127.0.0.1\r\npassword=pw\r\n\r\ncommand_file=/cmd\r\n"
	c, err := Parse("w.cfg", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if c.ServerPort != 5668 || c.ServerAddress != "127.0.0.1" || c.Password != "pw" || c.CommandFile != "/cmd" {
		t.Errorf("values %d %q %q %q, want no carriage return in any", c.ServerPort, c.ServerAddress, c.Password, c.CommandFile)
	}
	if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "conf: w.cfg:2: the file has CRLF (Windows) line endings") ||
		!strings.Contains(c.Warnings[0], "sed -i") {
		t.Errorf("warnings %q, want one naming line 2 and the fix", c.Warnings)
	}
	if strings.Contains(strings.Join(c.Warnings, "\n"), "pw") {
		t.Errorf("a warning shows the password: %q", c.Warnings)
	}
}

// A UTF-8 byte order mark, which stock refuses as part of the first
// option's name, is skipped with a warning.
func TestByteOrderMark(t *testing.T) {
	for _, file := range []string{"\ufeffserver_port=5668\n", "\ufeff# comment\nserver_port=5668\n"} {
		c, err := Parse("b.cfg", []byte(file))
		if err != nil {
			t.Fatalf("%q: %v", file, err)
		}
		if c.ServerPort != 5668 || len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "conf: b.cfg:1: the file starts with a UTF-8 byte order mark") {
			t.Errorf("%q: server_port %d, warnings %q", file, c.ServerPort, c.Warnings)
		}
	}
}

func TestMaxPacketAgeWithoutEnabledIsQuiet(t *testing.T) {
	c, err := Parse("a.cfg", []byte("max_packet_age=60\nmax_packet_age_enabled=0\ncommand_file=/c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 || c.Validate() != nil {
		t.Errorf("stock behaviour must not warn: %q %v", c.Warnings, c.Validate())
	}
}

func TestDump(t *testing.T) {
	d := Default()
	lines := d.Dump()
	if len(lines) != len(options) {
		t.Fatalf("%d lines for %d options", len(lines), len(options))
	}
	for i, o := range options {
		if !strings.HasPrefix(lines[i], o.Name+"=") {
			t.Errorf("line %d is %q, want option %s (table order)", i, lines[i], o.Name)
		}
	}
	if v := dumpValue(t, d, "password"); v != "(empty)" {
		t.Errorf("empty password shown as %q", v)
	}
	if v := dumpValue(t, d, "pid_file"); v != `""` {
		t.Errorf("empty string shown as %q", v)
	}
	c, err := Parse("d.cfg", []byte("password=hunter2 \ncommand_file=/a b\t\n"))
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(c.Dump(), "\n")
	if strings.Contains(all, "hunter2") || !strings.Contains(all, "\npassword=********\n") {
		t.Errorf("password not masked:\n%s", all)
	}
	if !strings.Contains(all, "\ncommand_file=\"/a b\\t\"\n") {
		t.Errorf("a trailing tab should be shown quoted:\n%s", all)
	}
	if !strings.Contains(all, "\nspool_file_mode=0600") || !strings.Contains(all, "\ndebug=0\n") {
		t.Errorf("modes are octal, flags 0/1:\n%s", all)
	}
}

// readOnlyDir returns a directory the test cannot create files in: mode
// 0555 for a user, a read-only tmpfs for root (who ignores the mode), or ""
// when root cannot mount one here.
func readOnlyDir(t *testing.T) string {
	dir := t.TempDir()
	if os.Getuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY, "size=64k"); err != nil {
		t.Logf("no read-only check_result_path case: mount tmpfs: %v", err)
		return ""
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func TestValidate(t *testing.T) {
	spool := t.TempDir()
	if err := os.WriteFile(filepath.Join(spool, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		file     string
		modify   func(*Config)
		sentinel error
		msg      string // substring; "" = valid
	}{
		{name: "command file", file: "command_file=/c"},
		{name: "spool only", file: "check_result_path=/s\ncheck_result_path_max_files=10"},
		{name: "both sinks", file: "command_file=/c\ncheck_result_path=/s"},
		{name: "age enabled", file: "command_file=/c\nmax_packet_age_enabled=1\nmax_packet_age=5"},
		{name: "no sink", file: "debug=1", sentinel: ErrConflict,
			msg: "conf: v.cfg: no sink: set command_file, check_result_path, icinga2_api_url or gearman_server: conflicting options"},
		{name: "cap without spool", file: "command_file=/c\n#\ncheck_result_path_max_files=10", sentinel: ErrConflict,
			msg: "conf: v.cfg:3: check_result_path_max_files=10 caps a spool that is not configured"},
		{name: "age 0 enabled", file: "command_file=/c\nmax_packet_age=0\nmax_packet_age_enabled=1", sentinel: ErrConflict,
			msg: "conf: v.cfg:3: max_packet_age_enabled=1 with max_packet_age=0 is ambiguous"},
		{name: "override out of range", file: "command_file=/c\nnsca_workers=5",
			modify: func(c *Config) { c.Workers = 101 }, sentinel: ErrBadValue,
			msg: "conf: v.cfg:2: nsca_workers=101 cannot be greater than 100: bad value"},
		{name: "override never set", file: "command_file=/c",
			modify: func(c *Config) { c.ThreadsPerWorker = -1 }, sentinel: ErrBadValue,
			msg: "conf: v.cfg: nsca_threads_per_worker=-1 cannot be negative: bad value"},
		{name: "method set in code", file: "command_file=/c",
			modify: func(c *Config) { c.DecryptionMethod = 25 }, sentinel: ErrBadValue,
			msg: "decryption_method=25 (safer-sk128) is unusable"},
		{name: "password set in code", file: "command_file=/c",
			modify: func(c *Config) { c.Password = strings.Repeat("q", 600) }, sentinel: ErrBadValue,
			msg: "conf: v.cfg: password is too long: 600 bytes, at most 511: bad value"},
		{name: "hosts set in code", file: "command_file=/c",
			modify: func(c *Config) { c.AllowedHosts = "1.2.3.4/40" }, sentinel: ErrBadValue,
			msg: "allowed_hosts=1.2.3.4/40 has a bad entry 1.2.3.4/40"},
		{name: "icinga2 only", file: "icinga2_api_url=https://i:5665\nicinga2_api_user=u\nicinga2_api_password=p"},
		{name: "gearman only", file: "gearman_server=g:4730\ngearman_encryption=0"},
		{name: "gearman keyfile", file: "gearman_server=g:4730\ngearman_keyfile=/k"},
		{name: "proxy trusted", file: "command_file=/c\nproxy_protocol=1\nproxy_protocol_trusted=10.0.0.1"},
		{name: "proxy untrusted", file: "command_file=/c\nproxy_protocol=1", sentinel: ErrConflict,
			msg: "conf: v.cfg:2: proxy_protocol=1 needs proxy_protocol_trusted"},
		{name: "icinga2 no auth", file: "icinga2_api_url=https://i:5665", sentinel: ErrConflict,
			msg: "conf: v.cfg:1: icinga2_api_url needs icinga2_api_user and icinga2_api_password, or icinga2_client_cert"},
		{name: "icinga2 cert no key", file: "icinga2_api_url=https://i:5665\nicinga2_client_cert=/c", sentinel: ErrConflict,
			msg: "conf: v.cfg:2: icinga2_client_cert and icinga2_client_key go together"},
		{name: "gearman no key", file: "gearman_server=g:4730", sentinel: ErrConflict,
			msg: "gearman_encryption=1 needs gearman_key or gearman_keyfile"},
		{name: "fallback spool unset", file: "gearman_server=g:4730\ngearman_key=k\ngearman_fallback=spool", sentinel: ErrConflict,
			msg: "conf: v.cfg:3: gearman_fallback=spool needs check_result_path"},
		{name: "fallback dump unset", file: "icinga2_api_url=https://i:5665\nicinga2_api_user=u\nicinga2_fallback=dump",
			sentinel: ErrConflict, msg: "conf: v.cfg:3: icinga2_fallback=dump needs alternate_dump_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("v.cfg", []byte(strings.ReplaceAll(c.file, "=/s", "="+spool)))
			if err != nil {
				t.Fatal(err)
			}
			if c.modify != nil {
				c.modify(cfg)
			}
			err = cfg.Validate()
			switch {
			case c.msg == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case c.msg == "":
			case err == nil:
				t.Errorf("Validate accepted it; want %q", c.msg)
			case !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.msg):
				t.Errorf("Validate: %v; want %v containing %q", err, c.sentinel, c.msg)
			}
		})
	}
	if err := Default().Validate(); err == nil || !strings.HasPrefix(err.Error(), "conf: defaults: no sink") {
		t.Errorf("Default().Validate() = %v", err)
	}
}

func TestMethods(t *testing.T) {
	usable := []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 14, 15, 16, 20, 23, 26}
	unusable := map[int]string{7: whyBlock, 24: whyBlock, 25: whyBlock, 12: whyStream, 19: whyStream, 22: whyStream}
	names := map[int]string{0: "none", 1: "xor", 2: "des", 3: "tripledes", 4: "cast-128", 5: "cast-256",
		6: "xtea", 7: "threeway", 8: "blowfish", 9: "twofish", 10: "loki97", 11: "rc2", 12: "arcfour",
		14: "rijndael-128", 15: "rijndael-192", 16: "rijndael-256", 19: "wake", 20: "serpent", 22: "enigma",
		23: "gost", 24: "safer-sk64", 25: "safer-sk128", 26: "saferplus"}
	for n := -2; n <= 30; n++ {
		m, ok := MethodByNumber(n)
		name, known := names[n]
		if ok != known {
			t.Errorf("MethodByNumber(%d) ok = %v", n, ok)
			continue
		}
		if !ok {
			continue
		}
		want := Method{Number: n, Name: name, Usable: unusable[n] == "", Why: unusable[n]}
		if m != want {
			t.Errorf("MethodByNumber(%d) = %+v, want %+v", n, m, want)
		}
	}
	var got []int
	for _, m := range UsableMethods() {
		got = append(got, m.Number)
	}
	if !slices.Equal(got, usable) {
		t.Errorf("UsableMethods() numbers %v, want %v", got, usable)
	}
	UsableMethods()[0].Name = "changed"
	if UsableMethods()[0].Name != "none" {
		t.Errorf("UsableMethods shares its backing array")
	}
	c := Default()
	c.DecryptionMethod = 8
	if m := c.Method(); m.Name != "blowfish" || !m.Usable {
		t.Errorf("Method() = %+v", m)
	}
	c.DecryptionMethod = 13
	if m := c.Method(); m.Usable || m.Number != 13 || m.Name != "invalid" {
		t.Errorf("Method() for 13 = %+v", m)
	}
}

func TestAllowedPrefixes(t *testing.T) {
	c := Default()
	if p, err := c.AllowedPrefixes(); p != nil || err != nil {
		t.Errorf("empty allowed_hosts: %v, %v; want nil (everyone)", p, err)
	}
	c.AllowedHosts = "10.1.2.3, 192.168.7.9/16 ,::1,2001:db8::/32,::ffff:10.9.9.9\r"
	p, err := c.AllowedPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.9.9.9/32")}
	if !slices.Equal(p, want) {
		t.Errorf("prefixes %v, want %v", p, want)
	}
	c.AllowedHosts = "10.0.0.1,bogus"
	if _, err := c.AllowedPrefixes(); !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("bad entry: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.cfg")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) ||
		!strings.HasPrefix(err.Error(), "conf: ") {
		t.Errorf("Load of a missing file: %v", err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Load of a directory: %v", err)
	}
	for _, tc := range []struct {
		body string
		perm os.FileMode
		warn bool
	}{
		{"command_file=/c\npassword=x\n", 0o600, false},
		{"command_file=/c\npassword=x\n", 0o640, false},
		{"command_file=/c\npassword=x\n", 0o644, true},
		{"command_file=/c\n", 0o644, false},
	} {
		path := filepath.Join(dir, "t.cfg")
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.perm); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		warned := len(c.Warnings) == 1 && strings.HasPrefix(c.Warnings[0], "conf: "+path+":2: password: ")
		if warned != tc.warn || len(c.Warnings) > 1 {
			t.Errorf("%q mode %04o: warnings %q", tc.body, tc.perm, c.Warnings)
		}
		if c.File != path {
			t.Errorf("File %q, want %q", c.File, path)
		}
	}
	bad := filepath.Join(dir, "bad.cfg")
	if err := os.WriteFile(bad, []byte("debug=1\nbogus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrSyntax) || !strings.HasPrefix(err.Error(), "conf: "+bad+":2: ") {
		t.Errorf("Load of a bad file: %v", err)
	}
}

// TestSample keeps the shipped nsca.cfg loadable, complete and honest about
// defaults.
func TestSample(t *testing.T) {
	c, err := Load("nsca.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	want := map[string]any{"CommandFile": "/var/lib/nagios4/rw/nagios.cmd", "PidFile": "/run/nsca.pid",
		"ServerPort": 5667, "User": "nagios", "Group": "nagios", "DecryptionMethod": 1}
	v := reflect.ValueOf(c).Elem()
	for f, w := range want {
		if got := v.FieldByName(f).Interface(); got != w {
			t.Errorf("%s = %v, want %v", f, got, w)
		}
	}
	data, err := os.ReadFile("nsca.cfg")
	if err != nil {
		t.Fatal(err)
	}
	text := "\n" + string(data)
	deliberate := map[string]bool{"pid_file": true, "nsca_user": true, "nsca_group": true,
		"command_file": true, "alternate_dump_file": true}
	d := Default()
	for _, o := range options {
		if !strings.Contains(text, "\n"+o.Name+"=") && !strings.Contains(text, "\n#"+o.Name+"=") {
			t.Errorf("sample has no line for %s", o.Name)
		}
		if !strings.Contains(text, "\n# "+o.Name+":") && !strings.Contains(text, "\n# "+o.Name+", ") &&
			!strings.Contains(text, ", "+o.Name+":") {
			t.Errorf("sample does not explain %s", o.Name)
		}
		if _, set := c.Lines[o.Name]; set && !deliberate[o.Name] && o.Kind.Text(c) != o.Kind.Text(d) {
			t.Errorf("sample sets %s=%s, but its default is %s", o.Name, o.Kind.Text(c), o.Kind.Text(d))
		}
	}
}

func TestEmbedded(t *testing.T) {
	c := Embedded()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	want := Default()
	want.File = EmbeddedFile
	want.ServerAddress = "127.0.0.1"
	want.CommandFile = "var/nsca.cmd"
	want.AlternateDumpFile = "var/nsca.dump"
	want.PidFile = "var/nsca.pid"
	want.Lines = c.Lines
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Embedded() =\n%+v\nwant\n%+v", c, want)
	}
	for _, name := range []string{"server_address", "server_port", "command_file", "alternate_dump_file",
		"pid_file", "decryption_method", "debug"} {
		if c.Lines[name] == 0 {
			t.Errorf("default.cfg does not set %s explicitly", name)
		}
	}
	for _, name := range []string{"password", "check_result_path"} {
		if c.Lines[name] != 0 {
			t.Errorf("default.cfg sets %s", name)
		}
	}
}

func TestRemoteSinkRoles(t *testing.T) {
	cases := []struct {
		file            string
		local, remote   bool
		icingaFallback  string
		gearmanFallback string
	}{
		{"command_file=/c\ncheck_result_path=/s", true, false, FallbackSpool, FallbackSpool},
		{"icinga2_api_url=https://i\nicinga2_api_user=u\nicinga2_api_password=p\ncheck_result_path=/s", false, true, FallbackSpool, FallbackSpool},
		{"icinga2_api_url=https://i\nicinga2_api_user=u\nicinga2_api_password=p\ncommand_file=/c\nalternate_dump_file=/d", true, true, FallbackDump, FallbackDump},
		{"gearman_server=g:1\ngearman_encryption=0\ngearman_fallback=none\ncheck_result_path=/s", false, true, FallbackSpool, FallbackNone},
		{"gearman_server=g:1\ngearman_encryption=0", false, true, FallbackNone, FallbackNone},
	}
	spool := t.TempDir() // Validate checks that check_result_path can be written
	for _, c := range cases {
		cfg, err := Parse("r.cfg", []byte(strings.ReplaceAll(c.file, "check_result_path=/s", "check_result_path="+spool)))
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatalf("%q: %v", c.file, err)
		}
		if cfg.LocalSinks() != c.local || cfg.RemoteSinks() != c.remote {
			t.Errorf("%q: local %v remote %v, want %v %v", c.file, cfg.LocalSinks(), cfg.RemoteSinks(), c.local, c.remote)
		}
		if got := cfg.Fallback(cfg.Icinga2.Fallback); got != c.icingaFallback {
			t.Errorf("%q: icinga2 fallback %s, want %s", c.file, got, c.icingaFallback)
		}
		if got := cfg.Fallback(cfg.Gearman.Fallback); got != c.gearmanFallback {
			t.Errorf("%q: gearman fallback %s, want %s", c.file, got, c.gearmanFallback)
		}
	}
}

// TestCPUShare: each of n workers gets the CPUs divided by n, at least one;
// the main process alone gets them all.
func TestCPUShare(t *testing.T) {
	n := runtime.NumCPU()
	for _, c := range []struct{ workers, want int }{{0, n}, {1, n}, {n, 1}, {10 * n, 1}} {
		if got := (&Config{Workers: c.workers}).CPUShare(); got != c.want {
			t.Errorf("nsca_workers=%d: share %d, want %d", c.workers, got, c.want)
		}
	}
}

// Changed names, in table order, each option whose effective value
// differs, secrets included (by name only), and nothing for the same file.
func TestChanged(t *testing.T) {
	parse := func(text string) *Config {
		t.Helper()
		c, err := Parse("nsca.cfg", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse("server_port=5667\npassword=a\nconnection_timeout=10\n")
	if got := parse("server_port=5667\npassword=a\nconnection_timeout=10\n").Changed(old); len(got) != 0 {
		t.Errorf("same file: changed %v", got)
	}
	got := parse("server_port=5667\npassword=b\nconnection_timeout=20\ndebug=0\n").Changed(old)
	if want := []string{"password", "connection_timeout"}; !slices.Equal(got, want) {
		t.Errorf("changed %v, want %v (debug=0 is the default)", got, want)
	}
}

// TestCppSample loads the C++ nsca_fast's sample nsca.cfg as it ships
// (testdata/nsca_fast_cpp.cfg, its keys and values unchanged), with its two
// commented-out options enabled too, and checks that every key means what
// it means there.
func TestCppSample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "nsca_fast_cpp.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("#command_file=", "command_file=",
		"#check_result_path_max_files=", "check_result_path_max_files=").Replace(string(data))
	c, err := Parse("nsca_fast_cpp.cfg", []byte(text))
	if err != nil {
		t.Fatalf("the C++ nsca_fast's sample is refused: %v", err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	want := map[string]any{
		"CheckResultPath": "/usr/local/nagios/var/checkresults", "PidFile": "/var/run/nagios/nsca.pid",
		"ServerPort": 5667, "ServerAddress": "0.0.0.0", "User": "nagios", "Group": "nogroup", "Debug": false,
		"CommandFile": "/usr/local/nagios/var/rw/nagios.cmd", "MaxPacketAge": 200, "Password": "password",
		"DecryptionMethod": 3, "DecryptionMode": 1, "Workers": 4, "ThreadsPerWorker": 4,
		"MaxChecksPerConnection": 1000, "MaxPacketAgeEnabled": false, "DirStats": "/tmp",
		"CheckResultPathMaxFiles": 1000000,
	}
	v := reflect.ValueOf(c).Elem()
	for f, w := range want {
		if got := v.FieldByName(f).Interface(); got != w {
			t.Errorf("%s = %v, want %v", f, got, w)
		}
	}
	// Every key of the file is one of the fields above.
	for name := range c.Lines {
		if byName[name] == nil {
			t.Errorf("key %s is not an option", name)
		}
	}
	if len(c.Lines) != len(want) {
		t.Errorf("the sample sets %d options, the test checks %d: %v", len(c.Lines), len(want), c.Lines)
	}
}
