package stages

import (
	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
)

// ngIdentityFile serves the nsca-ng listener from identities_file: a
// client's PSK identity is an identity's name, its password the key.
type ngIdentityFile struct {
	f    *identities.File
	keys []openssl.Key
}

// ngIdentitiesOf is the nsca-ng view of an identities file: every block
// with a password has a key ("*" the key of every name without a block).
func ngIdentitiesOf(f *identities.File) ngIdentities {
	n := &ngIdentityFile{f: f}
	for _, id := range f.Identities {
		if id.HasPassword {
			n.keys = append(n.keys, openssl.Key{Identity: id.Name, PSK: []byte(id.Password)})
		}
	}
	return n
}

func (n *ngIdentityFile) Keys() []openssl.Key { return n.keys }

// Lookup is the block named name, or the fallback "*", or nil.
func (n *ngIdentityFile) Lookup(name string) *identities.Identity { return n.f.Lookup(name) }
