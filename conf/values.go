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

	"nsca_fast/conf/option"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
)

// This file holds how the options of the table (options.go) read and check
// their values.

// noLimit is the upper bound of options that only must not be negative.
const noLimit = math.MaxInt

// parseDialect reads command_file_dialect; its message names the valid
// values, as the other options' do.
func parseDialect(s string) (dialect.Dialect, error) {
	d, err := dialect.Parse(s)
	if err != nil {
		return d, fmt.Errorf("is not a dialect; use %s", strings.Join(dialect.Names(), ", "))
	}
	return d, nil
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
	n, err := option.ParseInt(s)
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

// The values of nsca_workers_spread.
const (
	// SpreadLoad has new connections go to the first worker only while it
	// keeps up.
	SpreadLoad = "load"
	// SpreadAlways has the kernel spread new connections over every worker.
	SpreadAlways = "always"
)

func validSpread(s string) error {
	if s == SpreadLoad || s == SpreadAlways {
		return nil
	}
	return fmt.Errorf("is not a way to spread connections; use %s or %s", SpreadLoad, SpreadAlways)
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
		n, err := option.ParseInt(entry)
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
	return methodList() + ", or a name: " + strings.Join(MethodNames(), ", ") + " (" + ownNote + ")"
}

// ownNote tells the names of this project's methods from stock's look-alikes.
const ownNote = "aes128 and rijndael128 (no dash), aes192 and rijndael192, and gost are NSClient++'s " +
	"AES-128, AES-192 and Crypto++ GOST, this project's own methods, not stock's 14 (rijndael-128), " +
	"15 (rijndael-192) and 23 (libmcrypt's gost)"

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

// parseFacility reads log_facility: stock's table spells lpr "lrp", so a
// file that stock logs to lpr with says lrp.
func parseFacility(s string) (string, error) {
	if s == "lrp" {
		return "lpr", nil
	}
	return s, nil
}

func validFacility(s string) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	case slices.Contains(facilities, s):
		return nil
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
