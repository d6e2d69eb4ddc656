package main

// The S-box circuits are found here rather than copied from anywhere: each
// output of an S-box is split on two of its six inputs into four functions
// of the other four, each such function is built from the smallest formula
// over its four inputs, and equal functions anywhere in the S-box are
// computed once.

// Gate operations. andn is ^a & b (VPANDN's operand order).
const (
	opAnd = iota
	opOr
	opXor
	opAndn
	opNot
)

// ref names a value in a circuit: 0..5 are the inputs a1..a6, larger
// numbers gates, and the two negatives the constants.
type ref int

const (
	refZero ref = -1
	refOne  ref = -2
)

type gate struct {
	op   int
	a, b ref // b unused for opNot
}

// circuit is one S-box: gates numbered from 6, and the refs of its four
// outputs o1..o4.
type circuit struct {
	gates []gate
	out   [4]ref
}

// A truth table over the six inputs: bit x is the value for input x, a1
// being bit 5 of x.
func inputTT(j int) uint64 {
	var t uint64
	for x := range 64 {
		if x>>(5-j)&1 != 0 {
			t |= 1 << x
		}
	}
	return t
}

// builder makes gates, folding constants and reusing any gate that already
// computes the same function.
type builder struct {
	c    circuit
	tts  []uint64 // by ref
	byTT map[uint64]ref
}

func newBuilder() *builder {
	b := &builder{byTT: map[uint64]ref{}}
	for j := range 6 {
		t := inputTT(j)
		b.tts = append(b.tts, t)
		b.byTT[t] = ref(j)
	}
	return b
}

func (b *builder) clone() *builder {
	n := &builder{c: circuit{gates: append([]gate(nil), b.c.gates...), out: b.c.out},
		tts: append([]uint64(nil), b.tts...), byTT: make(map[uint64]ref, len(b.byTT))}
	for k, v := range b.byTT {
		n.byTT[k] = v
	}
	return n
}

func (b *builder) tt(r ref) uint64 {
	switch r {
	case refZero:
		return 0
	case refOne:
		return ^uint64(0)
	}
	return b.tts[r]
}

func apply(op int, x, y uint64) uint64 {
	switch op {
	case opAnd:
		return x & y
	case opOr:
		return x | y
	case opXor:
		return x ^ y
	case opAndn:
		return ^x & y
	}
	return ^x
}

func (b *builder) mk(op int, x, y ref) ref {
	t := apply(op, b.tt(x), b.tt(y))
	switch t {
	case 0:
		return refZero
	case ^uint64(0):
		return refOne
	}
	if r, ok := b.byTT[t]; ok {
		return r
	}
	// Constants left in an operand: reduce to a cheaper gate.
	cx, cy := x < 0, y < 0
	if op != opNot && (cx || cy) {
		// the result is not constant, so it is an operand or its negation
		for _, v := range []ref{x, y} {
			if v >= 0 && b.tt(v) == t {
				return v
			}
		}
		v := x
		if cx {
			v = y
		}
		return b.mk(opNot, v, 0)
	}
	if op == opNot && x < 0 {
		panic("not of a constant is constant")
	}
	r := ref(6 + len(b.c.gates))
	b.c.gates = append(b.c.gates, gate{op, x, y})
	b.tts = append(b.tts, t)
	b.byTT[t] = r
	return r
}

// Formulas over four variables v0..v3 (16-bit truth tables), smallest
// first: formula[f] is how f is made from two smaller ones.
type recipe struct {
	cost uint8
	op   uint8
	a, b uint16
	leaf int8 // variable index, or -1
}

var formula [1 << 16]recipe

func initFormulas() {
	for i := range formula {
		formula[i].cost = 255
	}
	vars := []uint16{0xaaaa, 0xcccc, 0xf0f0, 0xff00}
	levels := [][]uint16{nil}
	for i, v := range vars {
		formula[v] = recipe{cost: 0, leaf: int8(i)}
		levels[0] = append(levels[0], v)
	}
	found := len(vars)
	for k := 1; found < 1<<16-2 && k < 64; k++ {
		var lv []uint16
		add := func(f uint16, op uint8, a, b uint16) {
			if formula[f].cost == 255 {
				formula[f] = recipe{cost: uint8(k), op: op, a: a, b: b, leaf: -1}
				lv = append(lv, f)
				found++
			}
		}
		for _, g := range levels[k-1] {
			add(^g, opNot, g, 0)
		}
		for i := 0; i <= (k-1)/2; i++ {
			for _, g := range levels[i] {
				for _, h := range levels[k-1-i] {
					add(g&h, opAnd, g, h)
					add(g|h, opOr, g, h)
					add(g^h, opXor, g, h)
					add(^g&h, opAndn, g, h)
					add(^h&g, opAndn, h, g)
				}
			}
		}
		levels = append(levels, lv)
	}
}

// leaf builds the function f of the inputs vs (v0..v3 = inputs vs[0..3]).
func (b *builder) leaf(f uint16, vs [4]int) ref {
	switch f {
	case 0:
		return refZero
	case 0xffff:
		return refOne
	}
	if r, ok := b.byTT[expand(f, vs)]; ok {
		return r
	}
	rc := formula[f]
	if rc.leaf >= 0 {
		return ref(vs[rc.leaf])
	}
	x := b.leaf(rc.a, vs)
	if rc.op == opNot {
		return b.mk(opNot, x, 0)
	}
	return b.mk(int(rc.op), x, b.leaf(rc.b, vs))
}

// expand turns a function of inputs vs into a six-input truth table.
func expand(f uint16, vs [4]int) uint64 {
	var t uint64
	for x := range 64 {
		y := 0
		for i, v := range vs {
			y |= (x >> (5 - v) & 1) << i
		}
		t |= uint64(f>>y&1) << x
	}
	return t
}

// cofactor is t with input j fixed to v.
func cofactor(t uint64, j, v int) uint64 {
	var o uint64
	bit := 1 << (5 - j)
	for x := range 64 {
		src := x &^ bit
		if v != 0 {
			src |= bit
		}
		o |= (t >> src & 1) << x
	}
	return o
}

// project is a six-input table that ignores inputs other than vs, as a
// function of vs.
func project(t uint64, vs [4]int) uint16 {
	var f uint16
	for y := range 16 {
		x := 0
		for i, v := range vs {
			x |= (y >> i & 1) << (5 - v)
		}
		f |= uint16(t>>x&1) << y
	}
	return f
}

// split builds F, a function of at most the inputs in rest plus j, by one of
// three forms on input j: F0 ^ (j & (F0^F1)), F1 ^ (^j & (F0^F1)) or
// (^j & F0) | (j & F1). sub builds the parts.
func (b *builder) split(t uint64, j, form int, sub func(uint64) ref) ref {
	f0, f1 := cofactor(t, j, 0), cofactor(t, j, 1)
	switch form {
	case 0:
		return b.mk(opXor, sub(f0), b.mk(opAnd, ref(j), sub(f0^f1)))
	case 1:
		return b.mk(opXor, sub(f1), b.mk(opAndn, ref(j), sub(f0^f1)))
	}
	return b.mk(opOr, b.mk(opAndn, ref(j), sub(f0)), b.mk(opAnd, ref(j), sub(f1)))
}

// synth finds a circuit for the S-box table s (s[x] for input x, a1 the top
// bit; row a1a6, column a2..a5, as in FIPS 46-3's layout of desS).
func synth(s [64]byte) circuit {
	var outs [4]uint64
	for x := range 64 {
		row := x>>4&2 | x&1
		col := x >> 1 & 15
		v := s[row*16+col]
		for k := range 4 {
			if v>>(3-k)&1 != 0 {
				outs[k] |= 1 << x
			}
		}
	}
	var best *circuit
	for u := range 6 {
		for w := range 6 {
			if u == w {
				continue
			}
			var vs [4]int
			n := 0
			for i := range 6 {
				if i != u && i != w {
					vs[n] = i
					n++
				}
			}
			b := newBuilder()
			for k := range 4 {
				var pick *builder
				for f := range 9 * 3 {
					c := b.clone()
					c.c.out[k] = c.split(outs[k], u, f%3, func(t uint64) ref {
						return c.split(t, w, f/3, func(t uint64) ref { return c.leaf(project(t, vs), vs) })
					})
					if pick == nil || len(c.c.gates) < len(pick.c.gates) {
						pick = c
					}
				}
				b = pick
			}
			if c := simplify(b.c); best == nil || len(c.gates) < len(best.gates) {
				best = &c
			}
		}
	}
	for _, perOutput := range []bool{false, true} {
		if c := synthFree(outs, perOutput); len(c.gates) < len(best.gates) {
			best = &c
		}
	}
	if best.eval() != outs {
		panic("desgen: circuit does not compute the S-box")
	}
	return *best
}

// synthFree is the other search: the top split's input is one per S-box
// (or chosen per output), and each of its two parts is split on whichever
// input and form builds it with the fewest new gates.
func synthFree(outs [4]uint64, perOutput bool) circuit {
	var best *circuit
	for u0 := range 6 {
		b := newBuilder()
		for k := range 4 {
			var pick *builder
			for u := range 6 {
				if !perOutput && u != u0 {
					continue
				}
				for f := range 3 {
					c := b.clone()
					c.c.out[k] = c.split(outs[k], u, f, func(t uint64) ref { return c.best5(t, u) })
					if pick == nil || len(c.c.gates) < len(pick.c.gates) {
						pick = c
					}
				}
			}
			b = pick
		}
		if c := simplify(b.c); best == nil || len(c.gates) < len(best.gates) {
			best = &c
		}
		if perOutput {
			break // u0 plays no part
		}
	}
	return *best
}

// best5 builds t, a function of the inputs other than u, split once more on
// the input and form that add the fewest gates.
func (b *builder) best5(t uint64, u int) ref {
	if r, ok := b.byTT[t]; ok {
		return r
	}
	var pick *builder
	var pr ref
	for w := range 6 {
		if w == u {
			continue
		}
		var vs [4]int
		n := 0
		for i := range 6 {
			if i != u && i != w {
				vs[n] = i
				n++
			}
		}
		for f := range 3 {
			c := b.clone()
			r := c.split(t, w, f, func(t uint64) ref { return c.leaf(project(t, vs), vs) })
			if pick == nil || len(c.c.gates) < len(pick.c.gates) {
				pick, pr = c, r
			}
		}
	}
	*b = *pick
	return pr
}

// simplify folds NOT gates into the AND and ANDN gates that read them
// (^x & y is one ANDN; ^(^x) & y an AND) and drops gates nothing reads.
func simplify(c circuit) circuit {
	g := append([]gate(nil), c.gates...)
	notOf := func(r ref) (ref, bool) {
		if r >= 6 && g[r-6].op == opNot {
			return g[r-6].a, true
		}
		return 0, false
	}
	for n := range g {
		switch g[n].op {
		case opAnd:
			if x, ok := notOf(g[n].a); ok {
				g[n] = gate{opAndn, x, g[n].b}
			} else if x, ok := notOf(g[n].b); ok {
				g[n] = gate{opAndn, x, g[n].a}
			}
		case opAndn:
			if x, ok := notOf(g[n].a); ok {
				g[n] = gate{opAnd, x, g[n].b}
			}
		}
	}
	// keep what the outputs need, in order
	live := make([]bool, len(g))
	var mark func(r ref)
	mark = func(r ref) {
		if r < 6 || live[r-6] {
			return
		}
		live[r-6] = true
		mark(g[r-6].a)
		if g[r-6].op != opNot {
			mark(g[r-6].b)
		}
	}
	for _, o := range c.out {
		mark(o)
	}
	renum := make([]ref, len(g))
	var out circuit
	re := func(r ref) ref {
		if r < 6 {
			return r
		}
		return renum[r-6]
	}
	for n, x := range g {
		if !live[n] {
			continue
		}
		renum[n] = ref(6 + len(out.gates))
		nx := gate{x.op, re(x.a), 0}
		if x.op != opNot {
			nx.b = re(x.b)
		}
		out.gates = append(out.gates, nx)
	}
	for k, o := range c.out {
		out.out[k] = re(o)
	}
	return out
}

// eval computes the circuit's outputs as truth tables, to check it.
func (c circuit) eval() (o [4]uint64) {
	v := make([]uint64, 6+len(c.gates))
	for j := range 6 {
		v[j] = inputTT(j)
	}
	for n, g := range c.gates {
		b := uint64(0)
		if g.op != opNot {
			b = v[g.b]
		}
		v[6+n] = apply(g.op, v[g.a], b)
	}
	for k, r := range c.out {
		if r >= 0 {
			o[k] = v[r]
		}
	}
	return o
}

// only is c computing just the outputs in want (the others refZero, their
// gates dropped).
func (c circuit) only(want [4]bool) circuit {
	for k := range c.out {
		if !want[k] {
			c.out[k] = refZero
		}
	}
	return simplify(c)
}
