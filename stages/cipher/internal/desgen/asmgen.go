package main

import (
	"bytes"
	"fmt"
)

// The assembly runs the same circuits as the Go code, 256 lanes per ymm
// register. Per S-box the gates are straight-line code; registers are given
// out by farthest next use, a gate's value pushed out of them is stored in a
// spill slot (and then read back, or used as a memory operand where the
// instruction takes one), and an input pushed out is computed again, since
// it is a load and an XOR with the key mask.

type isa struct {
	nregs int
	reg   func(int) string
	width int // bytes per word
}

var avx2 = isa{nregs: 16, reg: func(i int) string { return fmt.Sprintf("Y%d", i) }, width: 32}

type allocator struct {
	w       *bytes.Buffer
	is      isa
	sbox    int
	regOf   map[ref]int
	valOf   []ref // by register; -100 when free
	spilled map[ref]int
	slots   *int // spill slots used so far (shared, for the frame size)
	uses    map[ref][]int
	pos     int
}

func (al *allocator) emit(format string, args ...any) {
	fmt.Fprintf(al.w, "\t"+format+"\n", args...)
}

func (al *allocator) nextUse(v ref) int {
	for _, u := range al.uses[v] {
		if u >= al.pos {
			return u
		}
	}
	return 1 << 30
}

// free registers whose value has no use left at or after the current op.
func (al *allocator) dropDead(after int) {
	for r, v := range al.valOf {
		if v == -100 {
			continue
		}
		dead := true
		for _, u := range al.uses[v] {
			if u > after {
				dead = false
			}
		}
		if dead {
			al.valOf[r] = -100
			delete(al.regOf, v)
		}
	}
}

func (al *allocator) grab(pinned ...ref) int {
	for r, v := range al.valOf {
		if v == -100 {
			return r
		}
	}
	victim, far := -1, -1
	for r, v := range al.valOf {
		skip := false
		for _, p := range pinned {
			if p == v {
				skip = true
			}
		}
		if skip {
			continue
		}
		if n := al.nextUse(v); n > far {
			victim, far = r, n
		}
	}
	v := al.valOf[victim]
	if v >= 6 {
		if _, ok := al.spilled[v]; !ok {
			slot := *al.slots
			*al.slots++
			al.spilled[v] = slot
			al.emit("VMOVDQU %s, %d(R8)", al.is.reg(victim), al.is.width*slot)
		}
	}
	delete(al.regOf, v)
	al.valOf[victim] = -100
	return victim
}

// load brings v into a register.
func (al *allocator) load(v ref, pinned ...ref) int {
	if r, ok := al.regOf[v]; ok {
		return r
	}
	r := al.grab(pinned...)
	if v < 6 {
		j := int(v)
		al.emit("VPBROADCASTQ %d(DX), %s", 8*(6*al.sbox+j), al.is.reg(r))
		al.emit("VPXOR %d(SI), %s, %s", al.is.width*eIndex(al.sbox, j), al.is.reg(r), al.is.reg(r))
	} else {
		al.emit("VMOVDQU %d(R8), %s", al.is.width*al.spilled[v], al.is.reg(r))
	}
	al.regOf[v] = r
	al.valOf[r] = v
	return r
}

// operand is v as the instruction's memory-capable operand: a spill slot
// if it is not in a register.
func (al *allocator) operand(v ref, pinned ...ref) string {
	if r, ok := al.regOf[v]; ok {
		return al.is.reg(r)
	}
	if s, ok := al.spilled[v]; ok {
		return fmt.Sprintf("%d(R8)", al.is.width*s)
	}
	return al.is.reg(al.load(v, pinned...))
}

var avxOp = map[int]string{opAnd: "VPAND", opOr: "VPOR", opXor: "VPXOR", opAndn: "VPANDN"}

// genSbox writes S-box i's circuit: inputs from the R words at SI and the
// key masks at DX, outputs XORed into the L words at DI.
func genSbox(w *bytes.Buffer, is isa, t tables, i int, c circuit, slots *int) {
	// ops: gates at 0..len-1, then the output stores at len..len+3
	ng := len(c.gates)
	uses := map[ref][]int{}
	for n, g := range c.gates {
		uses[g.a] = append(uses[g.a], n)
		if g.op != opNot {
			uses[g.b] = append(uses[g.b], n)
		}
	}
	// Store each output right after its last use so its register frees.
	type op struct {
		gate  int // -1 for a store
		k     int
		order int
	}
	var ops []op
	storeAfter := [4]int{}
	for k, o := range c.out {
		last := int(o) - 6
		for _, u := range uses[o] {
			last = max(last, u)
		}
		storeAfter[k] = last
	}
	for n := range ng {
		ops = append(ops, op{gate: n})
		for k := range 4 {
			if storeAfter[k] == n {
				ops = append(ops, op{gate: -1, k: k})
			}
		}
	}
	// uses by op position
	uses = map[ref][]int{}
	for p, o := range ops {
		if o.gate < 0 {
			uses[c.out[o.k]] = append(uses[c.out[o.k]], p)
			continue
		}
		g := c.gates[o.gate]
		uses[g.a] = append(uses[g.a], p)
		if g.op != opNot {
			uses[g.b] = append(uses[g.b], p)
		}
	}
	al := &allocator{w: w, is: is, sbox: i, regOf: map[ref]int{}, spilled: map[ref]int{}, slots: slots, uses: uses}
	for range is.nregs {
		al.valOf = append(al.valOf, -100)
	}
	fmt.Fprintf(w, "\t// S%d\n", i+1)
	for p, o := range ops {
		al.pos = p
		if o.gate < 0 {
			v := c.out[o.k]
			r := al.load(v)
			m := pIndex(t, i, o.k)
			al.emit("VPXOR %d(DI), %s, %s", is.width*m, is.reg(r), is.reg(r))
			al.emit("VMOVDQU %s, %d(DI)", is.reg(r), is.width*m)
			delete(al.regOf, v)
			al.valOf[r] = -100
			continue
		}
		g := c.gates[o.gate]
		d := ref(6 + o.gate)
		var ins string
		switch g.op {
		case opNot:
			ra := al.load(g.a)
			al.dropDead(p)
			rd := al.grab()
			ins = fmt.Sprintf("VPXOR desbsOnes<>(SB), %s, %s", is.reg(ra), is.reg(rd))
			al.emit("%s", ins)
			al.regOf[d], al.valOf[rd] = rd, d
			continue
		case opAndn:
			ra := al.load(g.a, g.b)
			mb := al.operand(g.b, g.a)
			al.dropDead(p)
			rd := al.grab()
			al.emit("VPANDN %s, %s, %s", mb, is.reg(ra), is.reg(rd))
			al.regOf[d], al.valOf[rd] = rd, d
			continue
		}
		a, b := g.a, g.b
		// the operand in a register (or an input) first; the other may
		// stay in its spill slot
		if _, ok := al.regOf[a]; !ok && a >= 6 {
			a, b = b, a
		}
		ra := al.load(a, b)
		mb := al.operand(b, a)
		al.dropDead(p)
		rd := al.grab()
		al.emit("%s %s, %s, %s", avxOp[g.op], mb, is.reg(ra), is.reg(rd))
		al.regOf[d], al.valOf[rd] = rd, d
	}
}

// Plane layout shared with desbs.go through desbs_gen.go.
const (
	chunk       = 4096         // positions per set of planes
	planeStride = chunk/8 + 64 // bytes per plane, room for the last pass's loads
)

// genAVX2 returns the assembly and the spill slots it uses.
func genAVX2(t tables, cs [8]circuit) ([]byte, int) {
	var body bytes.Buffer
	slots := 0
	for i, c := range cs {
		genSbox(&body, avx2, t, i, c, &slots)
	}
	var w bytes.Buffer
	w.WriteString(header + "//go:build amd64 && !purego\n\n#include \"textflag.h\"\n\n")
	w.WriteString("DATA desbsOnes<>+0(SB)/8, $-1\nDATA desbsOnes<>+8(SB)/8, $-1\n" +
		"DATA desbsOnes<>+16(SB)/8, $-1\nDATA desbsOnes<>+24(SB)/8, $-1\n" +
		"GLOBL desbsOnes<>(SB), RODATA|NOPTR, $32\n\n")
	fmt.Fprintf(&w, "// func desbsEncryptAVX2(st *uint64, planes *byte, keys *uint64, stages int)\n//\n"+
		"// Loads the state, 64 words of 32 bytes in IP's order (L, R), from the\n"+
		"// bit-planes (%d bytes apart; word i is plane 7-bit%%8 from bit bit/8 on,\n"+
		"// bit being the block bit IP puts there), then runs 16*stages rounds, one\n"+
		"// per pass: L ^= F(R), the halves' roles swapping after every round but\n"+
		"// each stage's last. %d bytes of spill slots follow the state.\n", planeStride, 32*slots)
	w.WriteString("TEXT ·desbsEncryptAVX2(SB), NOSPLIT, $0-32\n" +
		"\tMOVQ st+0(FP), DI\n\tMOVQ planes+8(FP), AX\n")
	for i, b := range t.ip {
		bit := int(b) - 1
		k, sh := 7-bit%8, bit/8
		off := k * planeStride
		if sh == 0 {
			fmt.Fprintf(&w, "\tVMOVDQU %d(AX), Y0\n", off)
		} else {
			fmt.Fprintf(&w, "\tVMOVDQU %d(AX), Y0\n\tVMOVDQU %d(AX), Y1\n\tVPSRLQ $%d, Y0, Y0\n\tVPSLLQ $%d, Y1, Y1\n\tVPOR Y1, Y0, Y0\n",
				off, off+8, sh, 64-sh)
		}
		fmt.Fprintf(&w, "\tVMOVDQU Y0, %d(DI)\n", 32*i)
	}
	w.WriteString("\tLEAQ 1024(DI), SI\n\tLEAQ 2048(DI), R8\n" +
		"\tMOVQ keys+16(FP), DX\n\tMOVQ stages+24(FP), BX\n\tSHLQ $4, BX\n\tXORL CX, CX\n" +
		"round:\n")
	w.Write(body.Bytes())
	w.WriteString("\tADDQ $384, DX\n\tDECQ BX\n\tJZ done\n\tCMPQ CX, $15\n\tJEQ stage\n" +
		"\tINCQ CX\n\tXCHGQ DI, SI\n\tJMP round\n" +
		"stage:\n\tXORL CX, CX\n\tJMP round\n" +
		"done:\n\tVZEROUPPER\n\tRET\n\n")
	// Planes: VPMOVMSKB takes the top bit of 32 bytes; shifting the 16-bit
	// lanes left by one brings the next bit to the top of every byte.
	fmt.Fprintf(&w, "// func desbsPlanesAVX2(src *byte, n int, planes *byte)\n//\n"+
		"// For n a multiple of 32: bit t of plane k (%d bytes apart) is bit k of\n"+
		"// src[t], t < n.\n", planeStride)
	w.WriteString("TEXT ·desbsPlanesAVX2(SB), NOSPLIT, $0-24\n" +
		"\tMOVQ src+0(FP), SI\n\tMOVQ n+8(FP), CX\n\tMOVQ planes+16(FP), DI\n" +
		"\tSHRQ $5, CX\n\tJZ planesdone\n" +
		"planes:\n\tVMOVDQU (SI), Y0\n")
	for k := 7; k >= 0; k-- {
		fmt.Fprintf(&w, "\tVPMOVMSKB Y0, AX\n\tMOVL AX, %d(DI)\n", k*planeStride)
		if k > 0 {
			w.WriteString("\tVPSLLW $1, Y0, Y0\n")
		}
	}
	w.WriteString("\tADDQ $32, SI\n\tADDQ $4, DI\n\tDECQ CX\n\tJNZ planes\n" +
		"planesdone:\n\tVZEROUPPER\n\tRET\n")
	return w.Bytes(), slots
}
