package nscang

import (
	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
)

// identityFile serves the nsca-ng listener from identities_file: a
// client's PSK identity is an identity's name, its password the key.
type identityFile struct {
	f    *identities.File
	keys []openssl.Key
}

// FileIdentities is the nsca-ng view of an identities file: every block
// with a password has a key ("*" the key of every name without a block).
func FileIdentities(f *identities.File) Identities {
	n := &identityFile{f: f}
	for _, id := range f.Identities {
		if id.HasPassword {
			n.keys = append(n.keys, openssl.Key{Identity: id.Name, PSK: []byte(id.Password)})
		}
	}
	return n
}

func (n *identityFile) Keys() []openssl.Key { return n.keys }

// Lookup is the block named name, or the fallback "*", or nil.
func (n *identityFile) Lookup(name string) *identities.Identity { return n.f.Lookup(name) }
