package cipher

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"testing"
)

var updateSerpent = flag.Bool("update-serpent", false, "rewrite serpent_circuits.go")

// TestSerpentCircuitsGenerated: serpent_circuits.go is what genSerpent
// writes (go test ./stages/cipher -run TestSerpentCircuitsGenerated
// -update-serpent rewrites it).
func TestSerpentCircuitsGenerated(t *testing.T) {
	want := genSerpent(t)
	if *updateSerpent {
		if err := os.WriteFile("serpent_circuits.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("serpent_circuits.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("serpent_circuits.go is not what genSerpent writes; rerun with -update-serpent")
	}
}

// TestSerpentCircuits runs every S-box circuit on all 16 inputs in every
// lane and bit position, and the linear transform on single bits, against
// the tables and the word-wise definition.
func TestSerpentCircuits(t *testing.T) {
	for s := range 8 {
		var x serpentState
		// Lane n of position j holds input (n+j)&15.
		for j := range 32 {
			for n := range 64 {
				in := (n + j) & 15
				for w := range 4 {
					x[w][j] |= uint64(in>>w&1) << n
				}
			}
		}
		var y serpentState
		serpentSboxes(s, &x, &y)
		for j := range 32 {
			for n := range 64 {
				out := 0
				for w := range 4 {
					out |= int(y[w][j]>>n&1) << w
				}
				if want := int(serpentSbox[s][(n+j)&15^int(serpentSboxIn[s])] ^ serpentSboxNot[s]); out != want {
					t.Fatalf("S%d(%d) = %d, want %d", s, (n+j)&15, out, want)
				}
			}
		}
	}
	r := newRand("serpent lt")
	for trial := range 200 {
		var words [4]uint32
		for w := range words {
			words[w] = r.Uint32()
		}
		var x, y serpentState
		for w := range 4 {
			for j := range 32 {
				y[w][j] = uint64(words[w]>>j&1) << (trial & 63)
			}
		}
		var k serpentRoundKey
		serpentLT(&y, &x, &k)
		want := serpentLTWords(words)
		for w := range 4 {
			for j := range 32 {
				if x[w][j] != uint64(want[w]>>j&1)<<(trial&63) {
					t.Fatalf("LT word %d bit %d differs", w, j)
				}
			}
		}
	}
}

// A serpentCircuit is a straight-line program over truth tables of four inputs
// (bit n of a table is the function's value at input n).
type serpentCircuit struct {
	gates []serpentGate
	names map[uint16]string // computed tables
	rng   *rand.Rand
}

type serpentGate struct {
	name, op, a, b string
}

// serpentTerm is one of the values an output is the XOR of.
type serpentTerm struct {
	name string
	v    uint16
}

var serpentInputs = [4]uint16{0xaaaa, 0xcccc, 0xf0f0, 0xff00}

func newSerpentCircuit(rng *rand.Rand) *serpentCircuit {
	c := &serpentCircuit{names: map[uint16]string{}, rng: rng}
	for i, v := range serpentInputs {
		c.names[v] = fmt.Sprintf("x%d", i)
	}
	return c
}

// add returns the value with table v, adding the gate a op b if no value
// computed so far has that table.
func (c *serpentCircuit) add(v uint16, op string, a, b serpentTerm) serpentTerm {
	if name, ok := c.names[v]; ok {
		return serpentTerm{name, v}
	}
	name := fmt.Sprintf("t%d", len(c.gates))
	c.gates = append(c.gates, serpentGate{name, op, a.name, b.name})
	c.names[v] = name
	return serpentTerm{name, v}
}

// monomial returns the product of the inputs in mask m, splitting off an
// input whose remaining product is already built if there is one, else a
// random one.
func (c *serpentCircuit) monomial(m int) serpentTerm {
	v := uint16(0xffff)
	for i := range 4 {
		if m>>i&1 != 0 {
			v &= serpentInputs[i]
		}
	}
	if name, ok := c.names[v]; ok {
		return serpentTerm{name, v}
	}
	var split []int
	for i := range 4 {
		if m>>i&1 != 0 {
			split = append(split, i)
		}
	}
	lo := split[c.rng.IntN(len(split))]
	for _, i := range split {
		rest := uint16(0xffff)
		for _, j := range split {
			if j != i {
				rest &= serpentInputs[j]
			}
		}
		if _, ok := c.names[rest]; ok {
			lo = i
			break
		}
	}
	rest := c.monomial(m &^ (1 << lo))
	return c.add(v, "&", rest, serpentTerm{fmt.Sprintf("x%d", lo), serpentInputs[lo]})
}

// serpentANF returns the algebraic normal form of output bit b of sbox: the masks
// of the monomials whose XOR it is (0 = the constant 1).
func serpentANF(sbox *[16]byte, b int) []int {
	var a [16]byte
	for n := range 16 {
		a[n] = sbox[n] >> b & 1
	}
	for i := range 4 {
		for n := range 16 {
			if n>>i&1 != 0 {
				a[n] ^= a[n^1<<i]
			}
		}
	}
	var ms []int
	for m := range 16 {
		if a[m] != 0 {
			ms = append(ms, m)
		}
	}
	return ms
}

// serpentSboxCircuit builds outputs outs of sbox from the ANF. The round keys add
// constants before and after an S-box for free, so it may compute
// S(x^in)^not instead: it returns the circuit, each output's expression,
// in, and not (bit i for outs[i]: the outputs whose ANF has the constant 1).
// It keeps the cheapest of many randomised tries for every in (from fixed
// seeds, so the output is stable).
func serpentSboxCircuit(sbox *[16]byte, outs []int) (gates []serpentGate, exprs []string, in, not uint8) {
	bestCost := 1 << 30
	for c := range 16 {
		var sb [16]byte
		for n := range 16 {
			sb[n] = sbox[n^c]
		}
		rng := rand.New(rand.NewPCG(uint64(c), uint64(sbox[0])<<8|uint64(sbox[1])))
		for range 40 {
			g, e, cost := serpentSboxTry(&sb, outs, rng)
			if cost < bestCost {
				gates, exprs, bestCost, in = g, e, cost, uint8(c)
			}
		}
	}
	for i, b := range outs {
		var sb [16]byte
		for n := range 16 {
			sb[n] = sbox[n^int(in)]
		}
		if serpentANF(&sb, b)[0] == 0 {
			not |= 1 << i
		}
	}
	return gates, exprs, in, not
}

// serpentSboxTry is one try: the monomials (shared), then, repeatedly, an
// OR where an output XORs a, b and a&b, or else the pair of terms the most
// outputs XOR (Paar's method), ties broken at random; unused gates dropped.
func serpentSboxTry(sbox *[16]byte, outs []int, rng *rand.Rand) ([]serpentGate, []string, int) {
	c := newSerpentCircuit(rng)
	terms := make([][]serpentTerm, len(outs))
	for i, b := range outs {
		ms := serpentANF(sbox, b)
		rng.Shuffle(len(ms), func(x, y int) { ms[x], ms[y] = ms[y], ms[x] })
		for _, m := range ms {
			if m != 0 {
				terms[i] = append(terms[i], c.monomial(m))
			}
		}
	}
	has := func(ts []serpentTerm, v uint16) bool {
		return slices.ContainsFunc(ts, func(t serpentTerm) bool { return t.v == v })
	}
	for {
		type cand struct{ a, b serpentTerm }
		var ors, pairs []cand
		count := map[[2]uint16]int{}
		bestN := 1
		for _, ts := range terms {
			for x := range ts {
				for y := x + 1; y < len(ts); y++ {
					a, b := ts[x], ts[y]
					if a.v > b.v {
						a, b = b, a
					}
					if has(ts, a.v&b.v) && a.v&b.v != a.v && a.v&b.v != b.v {
						ors = append(ors, cand{a, b})
					}
					p := [2]uint16{a.v, b.v}
					count[p]++
					switch {
					case count[p] > bestN:
						bestN, pairs = count[p], []cand{{a, b}}
					case count[p] == bestN:
						pairs = append(pairs, cand{a, b})
					}
				}
			}
		}
		switch {
		case len(ors) > 0:
			o := ors[rng.IntN(len(ors))]
			and := o.a.v & o.b.v
			g := c.add(o.a.v|o.b.v, "|", o.a, o.b)
			for i, ts := range terms {
				if has(ts, o.a.v) && has(ts, o.b.v) && has(ts, and) {
					ts = slices.DeleteFunc(ts, func(t serpentTerm) bool { return t.v == o.a.v || t.v == o.b.v || t.v == and })
					terms[i] = append(ts, g)
				}
			}
		case len(pairs) > 0 && bestN >= 2:
			p := pairs[rng.IntN(len(pairs))]
			g := c.add(p.a.v^p.b.v, "^", p.a, p.b)
			for i, ts := range terms {
				if has(ts, p.a.v) && has(ts, p.b.v) {
					ts = slices.DeleteFunc(ts, func(t serpentTerm) bool { return t.v == p.a.v || t.v == p.b.v })
					terms[i] = append(ts, g)
				}
			}
		default:
			live := map[string]bool{}
			exprs := make([]string, len(outs))
			cost := 0
			for i, ts := range terms {
				e := ""
				for k, t := range ts {
					live[t.name] = true
					if k > 0 {
						e += " ^ "
						cost++
					}
					e += t.name
				}
				exprs[i] = e
			}
			var gates []serpentGate
			for k := len(c.gates) - 1; k >= 0; k-- {
				if g := c.gates[k]; live[g.name] {
					live[g.a], live[g.b] = true, true
					gates = append(gates, g)
				}
			}
			slices.Reverse(gates)
			return gates, exprs, cost + len(gates)
		}
	}
}

var serpentName = regexp.MustCompile(`\b[xt][0-9]+\b`)

// serpentSchedule orders a circuit's statements so that few values are
// live at once (the compiler keeps source order, and spills what does not
// fit in registers): the stores one after another, in the order of the 24
// that needs the fewest, each preceded by the loads (load is their format,
// taking the input's number twice) and gates it needs, depth first.
func serpentSchedule(gates []serpentGate, stores []string, load string) []string {
	byName := map[string]serpentGate{}
	for _, g := range gates {
		byName[g.name] = g
	}
	var best []string
	bestLive := 1 << 30
	perm := make([]int, len(stores))
	for i := range perm {
		perm[i] = i
	}
	var permute func(k int)
	try := func() {
		var lines []string
		var defs, uses [][]string // per line
		done := map[string]bool{}
		var emit func(name string)
		emit = func(name string) {
			if done[name] {
				return
			}
			done[name] = true
			if g, ok := byName[name]; ok {
				emit(g.a)
				emit(g.b)
				lines = append(lines, fmt.Sprintf("%s := %s %s %s", g.name, g.a, g.op, g.b))
				defs, uses = append(defs, []string{name}), append(uses, []string{g.a, g.b})
				return
			}
			var w int
			fmt.Sscanf(name, "x%d", &w)
			lines = append(lines, fmt.Sprintf(load, w, w))
			defs, uses = append(defs, []string{name}), append(uses, nil)
		}
		for _, i := range perm {
			names := serpentName.FindAllString(stores[i], -1)
			for _, n := range names {
				emit(n)
			}
			lines = append(lines, stores[i])
			defs, uses = append(defs, nil), append(uses, names)
		}
		last := map[string]int{}
		for i, us := range uses {
			for _, u := range us {
				last[u] = i
			}
		}
		live, most := 0, 0
		for i := range lines {
			live += len(defs[i])
			most = max(most, live)
			for _, u := range slices.Compact(slices.Sorted(slices.Values(uses[i]))) {
				if last[u] == i {
					live--
				}
			}
		}
		if most < bestLive {
			best, bestLive = lines, most
		}
	}
	permute = func(k int) {
		if k == len(perm) {
			try()
			return
		}
		for i := k; i < len(perm); i++ {
			perm[k], perm[i] = perm[i], perm[k]
			permute(k + 1)
			perm[k], perm[i] = perm[i], perm[k]
		}
	}
	permute(0)
	return best
}

// genSerpent writes serpent_circuits.go: each S-box as a pass over the 32
// bit positions of a bitsliced state, the linear transform (adding the next
// round key) unrolled, and the last round for output byte 0 only.
func genSerpent(t *testing.T) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("// Code generated by genSerpent in serpent_gen_test.go; DO NOT EDIT.")
	p("")
	p("package cipher")
	p("")
	p("// serpentSboxes applies S-box s to x, into y, as circuits from the")
	p("// S-box's algebraic normal form, without its constant term, and taking")
	p("// x plus a constant: it computes S(x^serpentSboxIn[s])^serpentSboxNot[s],")
	p("// word w of those constants all ones where bit w is set. (A switch, not a")
	p("// table of funcs: a call through a func value would move x to the heap.)")
	p("func serpentSboxes(s int, x, y *serpentState) {")
	p("switch s {")
	for s := range 8 {
		p("case %d:", s)
		p("serpentS%d(x, y)", s)
	}
	p("}")
	p("}")
	nots, ins := make([]uint8, 8), make([]uint8, 8)
	for s := range 8 {
		gates, exprs, in, not := serpentSboxCircuit(&serpentSbox[s], []int{0, 1, 2, 3})
		nots[s], ins[s] = not, in
		p("")
		p("func serpentS%d(x, y *serpentState) {", s)
		p("_, _ = x[0][0], y[0][0] // nil checks, once")
		p("for j := range 32 {")
		stores := make([]string, 4)
		for w := range 4 {
			stores[w] = fmt.Sprintf("y[%d][j] = %s", w, exprs[w])
		}
		for _, l := range serpentSchedule(gates, stores, "x%d := x[%d][j]") {
			p("%s", l)
		}
		p("}")
		p("}")
	}
	// The last round: output word 0, bits 0..7 (byte 0), of S7 after K31,
	// plus K32.
	p("")
	p("// serpentSboxIn and serpentSboxNot are the constants of serpentSboxes.")
	p("var (")
	p("serpentSboxIn = [8]uint8{%d, %d, %d, %d, %d, %d, %d, %d}", ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], ins[7])
	p("serpentSboxNot = [8]uint8{%d, %d, %d, %d, %d, %d, %d, %d}", nots[0], nots[1], nots[2], nots[3], nots[4], nots[5], nots[6], nots[7])
	p(")")
	gates, exprs, in, not := serpentSboxCircuit(&serpentSbox[7], []int{0})
	p("")
	p("// serpentLast computes bit 0 of S7(x^serpentLastIn), inverted if")
	p("// serpentLastNot.")
	p("const (")
	p("serpentLastIn = %d", in)
	p("serpentLastNot = %v", not != 0)
	p(")")
	p("")
	p("// serpentLast is the last round's S7 and K32 for bits 0..7 of word 0.")
	p("func serpentLast(x *serpentState, k32 *serpentRoundKey, out *[8]uint64) {")
	p("for j := range 8 {")
	for _, l := range serpentSchedule(gates, []string{fmt.Sprintf("out[j] = %s ^ uint64(int64(k32[j][0]))", exprs[0])}, "x%d := x[%d][j]") {
		p("%s", l)
	}
	p("}")
	p("}")
	// The linear transform, rotations as renumbering:
	//   a0 = y0 <<< 13, a2 = y2 <<< 3, a1 = y1^a0^a2, a3 = y3^a2^(a0<<3),
	//   b1 = a1 <<< 1, b3 = a3 <<< 7, b0 = a0^b1^b3, b2 = a2^b3^(b1<<7),
	//   x = b0 <<< 5, b1, b2 <<< 22, b3.
	// Each bit of b1 and b3 comes straight from y, then each of x0 and x2
	// from y and those: no intermediate is stored. The next round's key k
	// is added on the way, its words 0 and 2 adjusted (serpentAdjust) for
	// x1 and x3 being read back with their key in.
	p("")
	p("// serpentLT is the linear transform of y plus the adjusted round key k, into x.")
	p("func serpentLT(y, x *serpentState, k *serpentRoundKey) {")
	rot := func(j, n int) int { return ((j-n)%32 + 32) % 32 } // source bit of (v <<< n) at j
	for j := range 32 {
		i := rot(j, 1) // b1[j] = a1[i]
		p("x[1][%d] = y[1][%d] ^ y[0][%d] ^ y[2][%d] ^ uint64(int64(k[%d][1]))", j, i, rot(i, 13), rot(i, 3), j)
		i = rot(j, 7) // b3[j] = a3[i]
		e := fmt.Sprintf("x[3][%d] = uint64(int64(k[%d][3])) ^ y[3][%d] ^ y[2][%d]", j, j, i, rot(i, 3))
		if i >= 3 {
			e += fmt.Sprintf(" ^ y[0][%d]", rot(i-3, 13))
		}
		p("%s", e)
	}
	for j := range 32 {
		i := rot(j, 5) // x0[j] = b0[i]
		p("x[0][%d] = y[0][%d] ^ x[1][%d] ^ x[3][%d] ^ uint64(int64(k[%d][0]))", j, rot(i, 13), i, i, j)
		i = rot(j, 22) // x2[j] = b2[i]
		e := fmt.Sprintf("x[2][%d] = uint64(int64(k[%d][2])) ^ y[2][%d] ^ x[3][%d]", j, j, rot(i, 3), i)
		if i >= 7 {
			e += fmt.Sprintf(" ^ x[1][%d]", i-7)
		}
		p("%s", e)
	}
	p("}")
	src, err := format.Source(b.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.Bytes())
	}
	return src
}
