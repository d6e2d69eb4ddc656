//go:build !amd64 || purego

package cipher

// Only the portable path exists off amd64.
const (
	desbsPortable = iota
	desbsAVX2
	desbsAVX512
)

var desbsBest, desbsPath = desbsPortable, desbsPortable

func desbsGroups() int { return 1 }

func (d *desbsBulk) fillPlanes(src []byte, n int) { d.planesGo(src, n) }

func (d *desbsBulk) encrypt(st []uint64, groups, u0 int) {
	d.loadGo((*[64]uint64)(st), u0)
	desbsRoundsGo((*[64]uint64)(st), d.keys)
}
