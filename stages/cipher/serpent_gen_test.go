package cipher

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"math/bits"
	"os"
	"slices"
	"testing"
)

var updateSerpent = flag.Bool("update-serpent", false, "rewrite serpent_circuits.go")

// TestSerpentCircuitsGenerated: serpent_circuits.go is what genSerpent
// writes (go test -run TestSerpentCircuitsGenerated -update-serpent
// ./stages/cipher rewrites it).
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
				if want := int(serpentSbox[s][(n+j)&15]); out != want {
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

// serpentLTWords is the linear transform as the specification writes it.
func serpentLTWords(x [4]uint32) [4]uint32 {
	x0 := bits.RotateLeft32(x[0], 13)
	x2 := bits.RotateLeft32(x[2], 3)
	x1 := x[1] ^ x0 ^ x2
	x3 := x[3] ^ x2 ^ x0<<3
	x1 = bits.RotateLeft32(x1, 1)
	x3 = bits.RotateLeft32(x3, 7)
	x0 ^= x1 ^ x3
	x2 ^= x3 ^ x1<<7
	return [4]uint32{bits.RotateLeft32(x0, 5), x1, bits.RotateLeft32(x2, 22), x3}
}

// A circuit is a straight-line program over truth tables of four inputs
// (bit n of a table is the function's value at input n).
type circuit struct {
	lines []string          // Go statements
	names map[uint16]string // computed tables
	n     int
}

var circuitInputs = [4]uint16{0xaaaa, 0xcccc, 0xf0f0, 0xff00}

func newCircuit() *circuit {
	c := &circuit{names: map[uint16]string{}}
	for i, v := range circuitInputs {
		c.names[v] = fmt.Sprintf("x%d", i)
	}
	return c
}

func (c *circuit) gate(v uint16, op, a, b string) string {
	if name, ok := c.names[v]; ok {
		return name
	}
	name := fmt.Sprintf("t%d", c.n)
	c.n++
	c.lines = append(c.lines, fmt.Sprintf("%s := %s %s %s", name, a, op, b))
	c.names[v] = name
	return name
}

// monomial returns the product of the inputs in mask m (m has 2+ bits).
func (c *circuit) monomial(m int, tables map[int]uint16) string {
	if v, ok := tables[m]; ok {
		return c.names[v]
	}
	lo := bits.TrailingZeros(uint(m))
	rest := m &^ (1 << lo)
	var a string
	var av uint16
	if bits.OnesCount(uint(rest)) == 1 {
		a, av = fmt.Sprintf("x%d", bits.TrailingZeros(uint(rest))), circuitInputs[bits.TrailingZeros(uint(rest))]
	} else {
		a, av = c.monomial(rest, tables), tables[rest]
	}
	v := av & circuitInputs[lo]
	tables[m] = v
	return c.gate(v, "&", a, fmt.Sprintf("x%d", lo))
}

// anf returns the algebraic normal form of output bit b of sbox: the masks
// of the monomials whose XOR it is (0 = the constant 1).
func anf(sbox *[16]byte, b int) []int {
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

// sboxCircuit builds outputs outs of sbox from the ANF, sharing monomials
// and, greedily, pairs of terms that several outputs XOR (Paar's method).
// It returns the circuit and each output's expression.
func sboxCircuit(sbox *[16]byte, outs []int) (*circuit, []string) {
	c := newCircuit()
	tables := map[int]uint16{}
	type term struct {
		name string
		v    uint16
	}
	terms := make([][]term, len(outs))
	inverted := make([]bool, len(outs))
	for i, b := range outs {
		for _, m := range anf(sbox, b) {
			switch bits.OnesCount(uint(m)) {
			case 0:
				inverted[i] = true
			case 1:
				w := bits.TrailingZeros(uint(m))
				terms[i] = append(terms[i], term{fmt.Sprintf("x%d", w), circuitInputs[w]})
			default:
				name := c.monomial(m, tables)
				terms[i] = append(terms[i], term{name, tables[m]})
			}
		}
	}
	for {
		// The pair of terms shared by the most outputs, first found on ties.
		count := map[[2]uint16]int{}
		var best [2]uint16
		bestN := 1
		for _, ts := range terms {
			for a := range ts {
				for b := a + 1; b < len(ts); b++ {
					p := [2]uint16{min(ts[a].v, ts[b].v), max(ts[a].v, ts[b].v)}
					count[p]++
					if count[p] > bestN {
						best, bestN = p, count[p]
					}
				}
			}
		}
		if bestN < 2 {
			break
		}
		v := best[0] ^ best[1]
		name := c.gate(v, "^", c.names[best[0]], c.names[best[1]])
		for i, ts := range terms {
			ia := slices.IndexFunc(ts, func(t term) bool { return t.v == best[0] })
			ib := slices.IndexFunc(ts, func(t term) bool { return t.v == best[1] })
			if ia < 0 || ib < 0 {
				continue
			}
			ts = slices.DeleteFunc(ts, func(t term) bool { return t.v == best[0] || t.v == best[1] })
			terms[i] = append(ts, term{name, v})
		}
	}
	exprs := make([]string, len(outs))
	for i, ts := range terms {
		e := ts[0].name
		for _, t := range ts[1:] {
			e += " ^ " + t.name
		}
		if inverted[i] {
			e = "^(" + e + ")"
		}
		exprs[i] = e
	}
	return c, exprs
}

// genSerpent writes serpent_circuits.go: each S-box as a pass over the 32
// bit positions of a bitsliced state that first adds the round key, the
// linear transform unrolled, and the last round for output byte 0 only.
func genSerpent(t *testing.T) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("// Code generated by genSerpent in serpent_gen_test.go; DO NOT EDIT.")
	p("")
	p("package cipher")
	p("")
	p("// serpentSboxes applies S-box s to x, into y, as circuits from the")
	p("// S-box's algebraic normal form. (A switch, not a table of funcs: a call")
	p("// through a func value would move x to the heap.)")
	p("func serpentSboxes(s int, x, y *serpentState) {")
	p("switch s {")
	for s := range 8 {
		p("case %d:", s)
		p("serpentS%d(x, y)", s)
	}
	p("}")
	p("}")
	for s := range 8 {
		c, exprs := sboxCircuit(&serpentSbox[s], []int{0, 1, 2, 3})
		p("")
		p("func serpentS%d(x, y *serpentState) {", s)
		p("_, _ = x[0][0], y[0][0] // nil checks, once")
		p("for j := range 32 {")
		for w := range 4 {
			p("x%d := x[%d][j]", w, w)
		}
		for _, l := range c.lines {
			p("%s", l)
		}
		for w := range 4 {
			p("y[%d][j] = %s", w, exprs[w])
		}
		p("}")
		p("}")
	}
	// The last round: output word 0, bits 0..7 (byte 0), of S7 after K31,
	// plus K32.
	c, exprs := sboxCircuit(&serpentSbox[7], []int{0})
	p("")
	p("// serpentLast is the last round's S7 and K32 for bits 0..7 of word 0.")
	p("func serpentLast(x *serpentState, k32 *serpentRoundKey, out *[8]uint64) {")
	p("for j := range 8 {")
	for w := range 4 {
		p("x%d := x[%d][j]", w, w)
	}
	for _, l := range c.lines {
		p("%s", l)
	}
	p("out[j] = %s ^ uint64(int64(k32[j][0]))", exprs[0])
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
