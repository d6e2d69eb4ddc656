package conf

// Method describes one value of decryption_method. The numbers are stock's,
// shared with send_nsca's encryption_method, so that an existing pair of
// configuration files keeps meaning the same algorithm.
type Method struct {
	// Number is the value written in nsca.cfg.
	Number int
	// Name is libmcrypt's algorithm name ("none" and "xor" for 0 and 1),
	// which is what the cgo binding passes to mcrypt_module_open.
	Name string
	// Usable is false for the algorithms libmcrypt refuses to open in 8-bit
	// CFB; stock accepts them in nsca.cfg but then serves no client, so we
	// refuse them at startup instead.
	Usable bool
	// Why explains an unusable method; empty when Usable.
	Why string
}

// Reasons an algorithm cannot serve NSCA: stock always opens libmcrypt in
// 8-bit cfb mode, which libmcrypt rejects for these.
const (
	whyBlock  = "libmcrypt cannot open this block cipher in 8-bit cfb mode"
	whyStream = "a stream cipher, libmcrypt cannot open it in 8-bit cfb mode"
)

// methods is indexed by number; the zero entries (Name == "") are the
// numbers stock never assigned (13, 17, 18, 21).
var methods = [...]Method{
	0:  {0, "none", true, ""},
	1:  {1, "xor", true, ""},
	2:  {2, "des", true, ""},
	3:  {3, "tripledes", true, ""},
	4:  {4, "cast-128", true, ""},
	5:  {5, "cast-256", true, ""},
	6:  {6, "xtea", true, ""},
	7:  {7, "threeway", false, whyBlock},
	8:  {8, "blowfish", true, ""},
	9:  {9, "twofish", true, ""},
	10: {10, "loki97", true, ""},
	11: {11, "rc2", true, ""},
	12: {12, "arcfour", false, whyStream},
	14: {14, "rijndael-128", true, ""},
	15: {15, "rijndael-192", true, ""},
	16: {16, "rijndael-256", true, ""},
	19: {19, "wake", false, whyStream},
	20: {20, "serpent", true, ""},
	22: {22, "enigma", false, whyStream},
	23: {23, "gost", true, ""},
	24: {24, "safer-sk64", false, whyBlock},
	25: {25, "safer-sk128", false, whyBlock},
	26: {26, "saferplus", true, ""},
}

// MethodByNumber returns the method stock knows by number n, usable or not.
// ok is false for numbers stock rejects outright (unassigned or outside 0..26).
func MethodByNumber(n int) (m Method, ok bool) {
	if n < 0 || n >= len(methods) || methods[n].Name == "" {
		return Method{}, false
	}
	return methods[n], true
}

// UsableMethods returns the methods a client can actually use, in number
// order: none, xor and the libmcrypt algorithms that open in 8-bit CFB. The
// slice is fresh, so callers may keep or modify it.
func UsableMethods() []Method {
	var out []Method
	for _, m := range methods {
		if m.Usable {
			out = append(out, m)
		}
	}
	return out
}
