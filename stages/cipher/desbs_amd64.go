//go:build amd64 && !purego

package cipher

import "golang.org/x/sys/cpu"

// The bitsliced DES paths, best last.
const (
	desbsPortable = iota
	desbsAVX2
	desbsAVX512
)

// desbsBest is the best path this CPU runs; desbsPath the one used, which
// tests lower to cover the others.
var (
	desbsBest = func() int {
		switch {
		case cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX2:
			return desbsAVX512
		case cpu.X86.HasAVX2:
			return desbsAVX2
		}
		return desbsPortable
	}()
	desbsPath = desbsBest
)

func desbsGroups() int {
	if desbsPath == desbsPortable {
		return 1
	}
	return 4
}

func (d *desbsBulk) fillPlanes(src []byte, n int) {
	if desbsPath == desbsPortable {
		d.planesGo(src, n)
		return
	}
	full := min(n, len(src)) / 32 * 32
	if full > 0 {
		desbsPlanesAVX2(&src[0], full, &d.planes[0][0])
	}
	var tmp [32]byte
	for at := full; at < n; at += 32 {
		clear(tmp[:])
		if at < len(src) {
			copy(tmp[:], src[at:])
		}
		desbsPlanesAVX2(&tmp[0], 32, &d.planes[0][at/8])
	}
}

func (d *desbsBulk) encrypt(st []uint64, groups, u0 int) {
	switch desbsPath {
	case desbsAVX512:
		desbsEncryptAVX512(&st[0], &d.planes[0][u0], &d.keys[0], len(d.keys)/(48*16))
	case desbsAVX2:
		desbsEncryptAVX2(&st[0], &d.planes[0][u0], &d.keys[0], len(d.keys)/(48*16))
	default:
		d.loadGo((*[64]uint64)(st), u0)
		desbsRoundsGo((*[64]uint64)(st), d.keys)
	}
}

// desbsEncryptAVX2 is loadGo and desbsRoundsGo on 256 lanes: st is 64
// words of four uint64s each (then the spill slots), planes the planes
// from the pass's first byte, keys 48 masks per round for 16*stages rounds.
//
//go:noescape
func desbsEncryptAVX2(st *uint64, planes *byte, keys *int32, stages int)

// desbsEncryptAVX512 is desbsEncryptAVX2 with VPTERNLOGQ and 32 registers.
//
//go:noescape
func desbsEncryptAVX512(st *uint64, planes *byte, keys *int32, stages int)

// desbsPlanesAVX2 is planesGo for n a multiple of 32 within src.
//
//go:noescape
func desbsPlanesAVX2(src *byte, n int, planes *byte)
