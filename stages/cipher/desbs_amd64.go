//go:build amd64 && !purego

package cipher

import "golang.org/x/sys/cpu"

// useDESAVX2 selects the AVX2 rounds; tests turn it off to cover the
// portable ones.
var useDESAVX2 = cpu.X86.HasAVX2

func desbsGroups() int {
	if useDESAVX2 {
		return 4
	}
	return 1
}

func (d *desbsBulk) rounds(st []uint64, groups int) {
	if groups == 4 {
		desbsRoundsAVX2(&st[0], &d.keys[0], len(d.keys)/(48*16))
		return
	}
	desbsRoundsGo((*[64]uint64)(st), d.keys)
}

// desbsRoundsAVX2 is desbsRoundsGo on 256 lanes: st is 64 words of four
// uint64s each, keys 48 masks per round for 16*stages rounds.
//
//go:noescape
func desbsRoundsAVX2(st *uint64, keys *uint64, stages int)
