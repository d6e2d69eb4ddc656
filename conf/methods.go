package conf

import (
	"slices"
	"strconv"

	"nsca_fast/stages/cipher"
)

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
	// Own marks the methods this project adds for NSClient++ (aes128,
	// aes192, gost; cipher.OwnMethods): ciphers stock has no method number
	// for, always served by the native engine whatever decryption_engine
	// says. Their numbers lie outside stock's 0..26 and are internal:
	// nsca.cfg names them.
	Own bool
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
	0:  {0, "none", true, "", false},
	1:  {1, "xor", true, "", false},
	2:  {2, "des", true, "", false},
	3:  {3, "tripledes", true, "", false},
	4:  {4, "cast-128", true, "", false},
	5:  {5, "cast-256", true, "", false},
	6:  {6, "xtea", true, "", false},
	7:  {7, "threeway", false, whyBlock, false},
	8:  {8, "blowfish", true, "", false},
	9:  {9, "twofish", true, "", false},
	10: {10, "loki97", true, "", false},
	11: {11, "rc2", true, "", false},
	12: {12, "arcfour", false, whyStream, false},
	14: {14, "rijndael-128", true, "", false},
	15: {15, "rijndael-192", true, "", false},
	16: {16, "rijndael-256", true, "", false},
	19: {19, "wake", false, whyStream, false},
	20: {20, "serpent", true, "", false},
	22: {22, "enigma", false, whyStream, false},
	23: {23, "gost", true, "", false},
	24: {24, "safer-sk64", false, whyBlock, false},
	25: {25, "safer-sk128", false, whyBlock, false},
	26: {26, "saferplus", true, "", false},
}

// ownMethods are the methods this project adds, as cipher's table has
// them; Name is what nsca.cfg says and what the cipher engine is labelled
// with.
var ownMethods = func() []Method {
	var out []Method
	for _, m := range cipher.OwnMethods() {
		out = append(out, Method{m.Number, m.Name, true, "", true})
	}
	return out
}()

// methodNames maps the names decryption_method accepts to a method number:
// libmcrypt's names of stock's methods (what stock's own documentation and
// send_nsca.cfg's comments call them: rijndael-128 is 14), and NSClient++'s
// encryption names, each mapped to the method that decrypts what NSClient++
// encrypts under that name (checked by tests/nscp_test.go). NSClient++'s
// aes/aes256/rijndael256 is stock's 14 (libmcrypt keys rijndael-128 with 32
// bytes), not rijndael-256 (16, a 256-bit block); its rijndael128 and
// rijndael192 are AES-128 and AES-192, which stock has no number for; its
// gost is not stock's 23, whose S-boxes differ, so libmcrypt's gost is
// written 23. The unusable methods' names are here so that their message
// says why they are refused.
var methodNames = map[string]int{
	// libmcrypt's names.
	"none": 0, "xor": 1, "des": 2, "tripledes": 3, "cast-128": 4, "cast-256": 5, "xtea": 6, "threeway": 7,
	"blowfish": 8, "twofish": 9, "loki97": 10, "rc2": 11, "arcfour": 12, "rijndael-128": 14,
	"rijndael-192": 15, "rijndael-256": 16, "wake": 19, "serpent": 20, "enigma": 22, "safer-sk64": 24,
	"safer-sk128": 25, "saferplus": 26,
	// NSClient++'s names.
	"3des": 3, "cast128": 4, "aes": 14, "aes256": 14, "rijndael256": 14,
	"aes128": cipher.MethodAES128, "rijndael128": cipher.MethodAES128,
	"aes192": cipher.MethodAES192, "rijndael192": cipher.MethodAES192, "gost": cipher.MethodGOST,
}

// MethodByNumber returns the method known by number n, usable or not: stock's
// 0..26 and this project's (cipher.OwnMethods). ok is false for numbers stock
// rejects outright (unassigned or outside 0..26) that are not ours either.
func MethodByNumber(n int) (m Method, ok bool) {
	for _, m := range ownMethods {
		if m.Number == n {
			return m, true
		}
	}
	if n < 0 || n >= len(methods) || methods[n].Name == "" {
		return Method{}, false
	}
	return methods[n], true
}

// MethodByName returns the method decryption_method=name selects (see
// MethodNames); ok is false for any other name.
func MethodByName(name string) (m Method, ok bool) {
	n, ok := methodNames[name]
	if !ok {
		return Method{}, false
	}
	return MethodByNumber(n)
}

// MethodNames lists the names decryption_method accepts for a usable
// method, grouped by the method they select in number order, as "name (=
// number)" for stock methods and the bare name for this project's.
func MethodNames() []string {
	byMethod := map[int][]string{}
	for name, n := range methodNames {
		if m, _ := MethodByNumber(n); m.Usable {
			byMethod[n] = append(byMethod[n], name)
		}
	}
	var numbers []int
	for n := range byMethod {
		numbers = append(numbers, n)
	}
	slices.Sort(numbers)
	var out []string
	for _, n := range numbers {
		names := byMethod[n]
		slices.Sort(names)
		for _, name := range names {
			if m, _ := MethodByNumber(n); !m.Own {
				name += " (= " + strconv.Itoa(n) + ")"
			}
			out = append(out, name)
		}
	}
	return out
}

// NameOf is how nsca.cfg writes method m: stock's number, or this project's
// name for the methods it adds.
func NameOf(m Method) string {
	if m.Own {
		return m.Name
	}
	return strconv.Itoa(m.Number)
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
