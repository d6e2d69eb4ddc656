//go:build !amd64 || purego

package cipher

// useDESAVX2 is false off amd64.
var useDESAVX2 = false

func desbsGroups() int { return 1 }

func (d *desbsBulk) rounds(st []uint64, groups int) {
	desbsRoundsGo((*[64]uint64)(st), d.keys)
}
