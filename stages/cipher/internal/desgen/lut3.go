package main

// For AVX-512 the two-input circuits are mapped onto three-input nodes,
// each one VPTERNLOGQ: a gate read only by one other gate is merged into it
// while the two together read at most three values.

// lut is a three-input node: its value is bit (x<<2 | y<<1 | z) of fn for
// leaves[0..2] = x, y, z (a node with fewer leaves ignores the rest).
type lut struct {
	leaves []ref // refs of the circuit: inputs or other luts' gates
	fn     uint8
}

// lutCircuit is a circuit of luts: luts[i] computes the circuit's ref
// at[i]; out are the S-box outputs' refs (each one some luts' at).
type lutCircuit struct {
	luts []lut
	at   []ref
	out  [4]ref
}

func mapLUT3(c circuit) lutCircuit {
	fanout := make([]int, 6+len(c.gates))
	for _, g := range c.gates {
		fanout[g.a]++
		if g.op != opNot {
			fanout[g.b]++
		}
	}
	for _, o := range c.out {
		if o >= 0 { // refZero: an output not wanted
			fanout[o] += 100 // an output is kept
		}
	}
	// cone[n]: the leaves of gate n's node once merged
	cone := make([][]ref, len(c.gates))
	for n, g := range c.gates {
		ops := []ref{g.a}
		if g.op != opNot && g.b != g.a {
			ops = append(ops, g.b)
		}
		leaves := union(nil, ops...)
		for _, o := range ops {
			if o < 6 || fanout[o] != 1 {
				continue
			}
			if m := union(remove(leaves, o), cone[o-6]...); len(m) <= 3 {
				leaves = m
			}
		}
		cone[n] = leaves
	}
	// emit the nodes that something outside a node reads
	var lc lutCircuit
	needed := map[ref]bool{}
	var need func(r ref)
	need = func(r ref) {
		if r < 6 || needed[r] {
			return
		}
		needed[r] = true
		for _, l := range cone[r-6] {
			need(l)
		}
	}
	for _, o := range c.out {
		need(o)
	}
	for n := range c.gates {
		r := ref(6 + n)
		if !needed[r] {
			continue
		}
		lc.luts = append(lc.luts, lut{leaves: cone[n], fn: coneFn(c, r, cone[n])})
		lc.at = append(lc.at, r)
	}
	lc.out = c.out
	return lc
}

func union(s []ref, xs ...ref) []ref {
	out := append([]ref(nil), s...)
	for _, x := range xs {
		found := false
		for _, y := range out {
			if y == x {
				found = true
			}
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

func remove(s []ref, x ref) []ref {
	var out []ref
	for _, y := range s {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

// coneFn evaluates gate r over its leaves: bit i of the result is r's value
// when leaf j is bit 2-j of i.
func coneFn(c circuit, r ref, leaves []ref) uint8 {
	var fn uint8
	for i := range 8 {
		val := map[ref]bool{}
		for j, l := range leaves {
			val[l] = i>>(2-j)&1 != 0
		}
		var ev func(r ref) bool
		ev = func(r ref) bool {
			if v, ok := val[r]; ok {
				return v
			}
			g := c.gates[r-6]
			a := ev(g.a)
			if g.op == opNot {
				return !a
			}
			b := ev(g.b)
			switch g.op {
			case opAnd:
				return a && b
			case opOr:
				return a || b
			case opXor:
				return a != b
			}
			return !a && b
		}
		if ev(r) {
			fn |= 1 << i
		}
	}
	return fn
}

// evalLUT checks a lut circuit: its outputs as truth tables.
func (lc lutCircuit) eval() (o [4]uint64) {
	v := map[ref]uint64{}
	for j := range 6 {
		v[ref(j)] = inputTT(j)
	}
	for i, l := range lc.luts {
		var t uint64
		for x := range 64 {
			idx := 0
			for j, leaf := range l.leaves {
				idx |= int(v[leaf]>>x&1) << (2 - j)
			}
			t |= uint64(l.fn>>idx&1) << x
		}
		v[lc.at[i]] = t
	}
	for k, r := range lc.out {
		o[k] = v[r]
	}
	return o
}

// reorderLUTs reorders the nodes (keeping every node after its leaves) so
// that, where it can, each node reads some value for the last time: that
// value's register can then take the result, saving a copy.
func (lc lutCircuit) reordered() lutCircuit {
	isOut := map[ref]bool{}
	for _, o := range lc.out {
		isOut[o] = true
	}
	readers := map[ref]int{}
	for _, l := range lc.luts {
		for _, x := range l.leaves {
			readers[x]++
		}
	}
	done := map[ref]bool{}
	for j := range 6 {
		done[ref(j)] = true
	}
	placed := make([]bool, len(lc.luts))
	var out lutCircuit
	out.out = lc.out
	for len(out.luts) < len(lc.luts) {
		pick := -1
		for n, l := range lc.luts {
			if placed[n] {
				continue
			}
			ready, kills := true, false
			for _, x := range l.leaves {
				if !done[x] {
					ready = false
				}
				if readers[x] == 1 && !isOut[x] {
					kills = true
				}
			}
			if !ready {
				continue
			}
			if pick < 0 {
				pick = n
			}
			if kills {
				pick = n
				break
			}
		}
		placed[pick] = true
		for _, x := range lc.luts[pick].leaves {
			readers[x]--
		}
		done[lc.at[pick]] = true
		out.luts = append(out.luts, lc.luts[pick])
		out.at = append(out.at, lc.at[pick])
	}
	return out
}
