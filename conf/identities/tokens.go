package identities

import (
	"crypto/subtle"
	"fmt"
)

// An NRDP token names an identity through its own key,
//
//	authorize "web01" {
//		token = "Zq3...long random"       # or { "old", "new" } while clients change
//		hosts = "web01"
//	}
//
// and never through its password: the password is the nsca-ng PSK and
// the send_nsca key, while a token travels in every HTTP request, in
// clear over plain HTTP. A client that may only use NRDP needs no
// password; the fallback "*" takes no token, since it is no one's.

// ByToken returns the identity that token names, or nil. It compares
// every token of every identity in time that does not depend on where
// they differ, so that response times do not tell a guesser how much of
// a token it has right.
func (f *File) ByToken(token string) *Identity {
	var found *Identity
	for _, id := range f.Identities {
		for _, t := range id.Tokens {
			if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 && found == nil {
				found = id
			}
		}
	}
	return found
}

// HasTokens says whether any identity has a token.
func (f *File) HasTokens() bool {
	for _, id := range f.Identities {
		if len(id.Tokens) > 0 {
			return true
		}
	}
	return false
}

// checkTokens refuses an empty token, a token on the fallback and a token
// that names two identities (or one twice), which could only be a
// mistake: which rights would it carry?
func checkTokens(f *File) error {
	seen := map[string]*Identity{}
	for _, id := range f.Identities {
		if len(id.Tokens) > 0 && id.Name == Fallback {
			return fmt.Errorf("%w: %s: authorize %q: token names an identity, and the fallback is none", ErrBadValue, id.Where, id.Name)
		}
		for _, t := range id.Tokens {
			if t == "" {
				return fmt.Errorf("%w: %s: authorize %q: empty token", ErrBadValue, id.Where, id.Name)
			}
			if prev, dup := seen[t]; dup {
				return fmt.Errorf("%w: %s: authorize %q: its token is also one of authorize %q (%s)", ErrBadValue, id.Where, id.Name, prev.Name, prev.Where)
			}
			seen[t] = id
		}
	}
	return nil
}
