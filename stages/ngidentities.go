package stages

import (
	"net/netip"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
)

// ngIdentities serves the nsca-ng listener from identities_file: a
// client's PSK identity is an identity's name, its password the key.
type ngIdentities struct {
	f    *identities.File
	keys []openssl.Key
}

// NGIdentitiesOf is the nsca-ng view of an identities file: every block
// with a password has a key ("*" the key of every name without a block).
func NGIdentitiesOf(f *identities.File) NGIdentities {
	n := &ngIdentities{f: f}
	for _, id := range f.Identities {
		if id.HasPassword {
			n.keys = append(n.keys, openssl.Key{Identity: id.Name, PSK: []byte(id.Password)})
		}
	}
	return n
}

func (n *ngIdentities) Keys() []openssl.Key { return n.keys }

func (n *ngIdentities) Lookup(name string) NGIdentity {
	id := n.f.Lookup(name)
	if id == nil {
		return nil
	}
	return ngIdentity{id}
}

// ngIdentity is an authorize block: its rights as nsca-ng reads them, and
// its networks, ours.
type ngIdentity struct{ *identities.Identity }

func (i ngIdentity) From(addr netip.Addr) bool { return i.Specificity(addr) >= 0 }

func (i ngIdentity) Label() string { return i.Name }
