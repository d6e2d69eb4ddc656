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
// it is a load and an XOR with the key mask (a 32-bit mask, broadcast).

type isa struct {
	nregs int
	reg   func(int) string
	width int    // bytes per word
	mov   string // register/memory move
	xor   string
	bcst  bool // XOR takes a broadcast key mask (EVEX)
}

var (
	avx2   = isa{nregs: 16, reg: yreg, width: 32, mov: "VMOVDQU", xor: "VPXOR"}
	avx512 = isa{nregs: 32, reg: yreg, width: 32, mov: "VMOVDQU64", xor: "VPXORQ", bcst: true}
)

func yreg(i int) string { return fmt.Sprintf("Y%d", i) }

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
			al.emit("%s %s, %d(R8)", al.is.mov, al.is.reg(victim), al.is.width*slot)
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
		if al.is.bcst {
			al.emit("%s %d(SI), %s", al.is.mov, al.is.width*eIndex(al.sbox, j), al.is.reg(r))
			al.emit("VPXORD.BCST %d(DX), %s, %s", 4*(6*al.sbox+j), al.is.reg(r), al.is.reg(r))
		} else {
			al.emit("VPBROADCASTD %d(DX), %s", 4*(6*al.sbox+j), al.is.reg(r))
			al.emit("%s %d(SI), %s, %s", al.is.xor, al.is.width*eIndex(al.sbox, j), al.is.reg(r), al.is.reg(r))
		}
	} else {
		al.emit("%s %d(R8), %s", al.is.mov, al.is.width*al.spilled[v], al.is.reg(r))
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

// schedule orders a circuit's nodes (0..n-1) with the output stores, each
// right after its output's last reader so its register frees, and returns
// the op list (node index, or -1-k for output k's store) and each value's
// uses by op position. reads(n) are node n's operands.
func schedule(n int, at func(int) ref, reads func(int) []ref, out [4]ref) (ops []int, uses map[ref][]int) {
	var storeAfter [4]int
	for k, o := range out {
		last := -1
		for m := range n {
			if at(m) == o {
				last = max(last, m)
			}
			for _, r := range reads(m) {
				if r == o {
					last = max(last, m)
				}
			}
		}
		storeAfter[k] = last
	}
	uses = map[ref][]int{}
	for m := range n {
		ops = append(ops, m)
		for _, r := range reads(m) {
			uses[r] = append(uses[r], len(ops)-1)
		}
		for k := range 4 {
			if storeAfter[k] == m {
				ops = append(ops, -1-k)
				uses[out[k]] = append(uses[out[k]], len(ops)-1)
			}
		}
	}
	return ops, uses
}

func newAllocator(w *bytes.Buffer, is isa, i int, slots *int, uses map[ref][]int) *allocator {
	al := &allocator{w: w, is: is, sbox: i, regOf: map[ref]int{}, spilled: map[ref]int{}, slots: slots, uses: uses}
	for range is.nregs {
		al.valOf = append(al.valOf, -100)
	}
	return al
}

// store XORs output v of S-box i into its L word and frees its register.
func (al *allocator) store(t tables, k int, v ref) {
	r := al.load(v)
	m := pIndex(t, al.sbox, k)
	al.emit("%s %d(DI), %s, %s", al.is.xor, al.is.width*m, al.is.reg(r), al.is.reg(r))
	al.emit("%s %s, %d(DI)", al.is.mov, al.is.reg(r), al.is.width*m)
	delete(al.regOf, v)
	al.valOf[r] = -100
}

func (al *allocator) define(d ref, r int) { al.regOf[d], al.valOf[r] = r, d }

// genSbox writes S-box i's circuit in AVX2: inputs from the R words at SI
// and the key masks at DX, outputs XORed into the L words at DI.
func genSbox(w *bytes.Buffer, is isa, t tables, i int, c circuit, slots *int) {
	ops, uses := schedule(len(c.gates), func(n int) ref { return ref(6 + n) }, func(n int) []ref {
		if c.gates[n].op == opNot {
			return []ref{c.gates[n].a}
		}
		return []ref{c.gates[n].a, c.gates[n].b}
	}, c.out)
	al := newAllocator(w, is, i, slots, uses)
	fmt.Fprintf(w, "\t// S%d\n", i+1)
	for p, o := range ops {
		al.pos = p
		if o < 0 {
			al.store(t, -1-o, c.out[-1-o])
			continue
		}
		g := c.gates[o]
		d := ref(6 + o)
		switch g.op {
		case opNot:
			ra := al.load(g.a)
			al.dropDead(p)
			rd := al.grab()
			al.emit("%s desbsOnes<>(SB), %s, %s", is.xor, is.reg(ra), is.reg(rd))
			al.define(d, rd)
			continue
		case opAndn:
			ra := al.load(g.a, g.b)
			mb := al.operand(g.b, g.a)
			al.dropDead(p)
			rd := al.grab()
			al.emit("VPANDN %s, %s, %s", mb, is.reg(ra), is.reg(rd))
			al.define(d, rd)
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
		al.define(d, rd)
	}
}

// genSboxLUT writes S-box i's lut circuit in AVX-512VL: VPTERNLOGQ
// overwrites its first operand, so that is a leaf read for the last time
// there if there is one, else a copy.
func genSboxLUT(w *bytes.Buffer, is isa, t tables, i int, lc lutCircuit, slots *int) {
	ops, uses := schedule(len(lc.luts), func(n int) ref { return lc.at[n] }, func(n int) []ref { return lc.luts[n].leaves }, lc.out)
	al := newAllocator(w, is, i, slots, uses)
	fmt.Fprintf(w, "\t// S%d\n", i+1)
	var fused [4]bool
	for p, o := range ops {
		al.pos = p
		if o < 0 {
			k := -1 - o
			if !fused[k] {
				al.store(t, k, lc.out[k])
				continue
			}
			r := al.regOf[lc.out[k]]
			al.emit("%s %s, %d(DI)", is.mov, is.reg(r), is.width*pIndex(t, i, k))
			delete(al.regOf, lc.out[k])
			al.valOf[r] = -100
			continue
		}
		l := lc.luts[o]
		if k := outputOnly(lc, o, uses); k >= 0 && len(l.leaves) <= 2 {
			// L ^= the output in the same instruction: its word is the
			// third operand.
			fused[k] = true
			genFusedOut(al, t, i, k, l, lc.at[o])
			continue
		}
		for _, x := range l.leaves {
			al.load(x, l.leaves...)
		}
		// a leaf with no use after this one can be overwritten
		first := -1
		for j, x := range l.leaves {
			if al.nextUseAfter(x, p) == 1<<30 {
				first = j
			}
		}
		order := append([]ref(nil), l.leaves...)
		if first >= 0 {
			order[0], order[first] = order[first], order[0]
		}
		for len(order) < 3 {
			order = append(order, order[len(order)-1])
		}
		regs := [3]string{is.reg(al.regOf[order[0]]), is.reg(al.regOf[order[1]]), is.reg(al.regOf[order[2]])}
		var rd int
		if first >= 0 {
			rd = al.regOf[order[0]]
			delete(al.regOf, order[0])
			al.valOf[rd] = -100
		} else {
			rd = al.grab(l.leaves...)
			al.emit("VMOVDQA64 %s, %s", regs[0], is.reg(rd))
		}
		al.emit("VPTERNLOGQ $0x%02x, %s, %s, %s", reorder(l, order), regs[2], regs[1], is.reg(rd))
		al.dropDead(p)
		al.define(lc.at[o], rd)
	}
}

// outputOnly is the output k that node o computes, when nothing but k's
// store reads it; else -1.
func outputOnly(lc lutCircuit, o int, uses map[ref][]int) int {
	for k, r := range lc.out {
		if r == lc.at[o] && len(uses[r]) == 1 {
			return k
		}
	}
	return -1
}

// genFusedOut computes node l (one or two leaves), the output k of S-box i,
// already XORed with its L word.
func genFusedOut(al *allocator, t tables, i, k int, l lut, d ref) {
	for _, x := range l.leaves {
		al.load(x, l.leaves...)
	}
	order := append([]ref(nil), l.leaves...)
	if len(order) == 2 && al.nextUseAfter(order[0], al.pos) != 1<<30 && al.nextUseAfter(order[1], al.pos) == 1<<30 {
		order[0], order[1] = order[1], order[0]
	}
	if len(order) == 1 {
		order = append(order, order[0])
	}
	fn2 := reorder(l, []ref{order[0], order[1], order[1]})
	var fn uint8
	for x := range 8 {
		a, b, z := x>>2&1, x>>1&1, x&1
		if int(fn2>>(a<<2|b<<1|b)&1)^z != 0 {
			fn |= 1 << x
		}
	}
	ra, rb := al.regOf[order[0]], al.regOf[order[1]]
	rd := ra
	if al.nextUseAfter(order[0], al.pos) == 1<<30 {
		delete(al.regOf, order[0])
		al.valOf[ra] = -100
	} else {
		rd = al.grab(l.leaves...)
		al.emit("VMOVDQA64 %s, %s", al.is.reg(ra), al.is.reg(rd))
	}
	al.emit("VPTERNLOGQ $0x%02x, %d(DI), %s, %s", fn, al.is.width*pIndex(t, i, k), al.is.reg(rb), al.is.reg(rd))
	al.dropDead(al.pos)
	al.define(d, rd)
}

// nextUseAfter is v's first use after op p.
func (al *allocator) nextUseAfter(v ref, p int) int {
	for _, u := range al.uses[v] {
		if u > p {
			return u
		}
	}
	return 1 << 30
}

// reorder is l's function with its leaves in the order given (which may
// repeat a leaf): bit x<<2|y<<1|z for order[0..2] = x, y, z.
func reorder(l lut, order []ref) uint8 {
	var fn uint8
	for i := range 8 {
		val := map[ref]int{}
		ok := true
		for j, x := range order {
			b := i >> (2 - j) & 1
			if v, seen := val[x]; seen && v != b {
				ok = false // a repeated leaf cannot differ from itself
			}
			val[x] = b
		}
		if !ok {
			continue
		}
		idx := 0
		for j, x := range l.leaves {
			idx |= val[x] << (2 - j)
		}
		fn |= (l.fn >> idx & 1) << i
	}
	return fn
}

// Plane layout shared with desbs.go through desbs_gen.go.
const (
	chunk       = 4096         // positions per set of planes
	planeStride = chunk/8 + 64 // bytes per plane, room for the last pass's loads
)

// genAsm returns the assembly and the spill slots it uses: the rounds in
// AVX2 from the circuits and in AVX-512VL from their lut mappings, and the
// bit-planes.
func genAsm(t tables, cs, last [8]circuit, lcs, lastLcs [8]lutCircuit) ([]byte, int) {
	var w bytes.Buffer
	w.WriteString(header + "//go:build amd64 && !purego\n\n#include \"textflag.h\"\n\n")
	w.WriteString("DATA desbsOnes<>+0(SB)/8, $-1\nDATA desbsOnes<>+8(SB)/8, $-1\n" +
		"DATA desbsOnes<>+16(SB)/8, $-1\nDATA desbsOnes<>+24(SB)/8, $-1\n" +
		"GLOBL desbsOnes<>(SB), RODATA|NOPTR, $32\n\n")
	slots := 0
	for _, v := range []struct {
		name string
		is   isa
	}{{"AVX2", avx2}, {"AVX512", avx512}} {
		var body, lastBody bytes.Buffer
		s := 0
		for i := range 8 {
			if v.is.bcst {
				genSboxLUT(&body, v.is, t, i, lcs[i], &s)
				if last[i].wants() {
					genSboxLUT(&lastBody, v.is, t, i, lastLcs[i], &s)
				}
			} else {
				genSbox(&body, v.is, t, i, cs[i], &s)
				if last[i].wants() {
					genSbox(&lastBody, v.is, t, i, last[i], &s)
				}
			}
		}
		slots = max(slots, s)
		fmt.Fprintf(&w, "// func desbsEncrypt%s(st *uint64, planes *byte, keys *int32, stages int)\n//\n"+
			"// Loads the state, 64 words of 32 bytes in IP's order (L, R), from the\n"+
			"// bit-planes (%d bytes apart; word i is plane 7-bit%%8 from bit bit/8 on,\n"+
			"// bit being the block bit IP puts there), then runs 16*stages rounds, one\n"+
			"// per pass: L ^= F(R), the halves' roles swapping after every round but\n"+
			"// each stage's last; the last round computes only the bits FP's first\n"+
			"// byte takes. %d bytes of spill slots follow the state.\n", v.name, planeStride, 32*s)
		fmt.Fprintf(&w, "TEXT ·desbsEncrypt%s(SB), NOSPLIT, $0-32\n", v.name)
		w.WriteString("\tMOVQ st+0(FP), DI\n\tMOVQ planes+8(FP), AX\n")
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
			"round:\n\tCMPQ BX, $1\n\tJEQ last\n")
		w.Write(body.Bytes())
		w.WriteString("\tADDQ $192, DX\n\tDECQ BX\n\tCMPQ CX, $15\n\tJEQ stage\n" +
			"\tINCQ CX\n\tXCHGQ DI, SI\n\tJMP round\n" +
			"stage:\n\tXORL CX, CX\n\tJMP round\n" +
			"last: // only the L bits the first output byte takes\n")
		w.Write(lastBody.Bytes())
		w.WriteString("\tVZEROUPPER\n\tRET\n\n")
	}
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
