// Command desgen writes the bitsliced DES S-box circuits, as Go
// (desbs_gen.go) and as AVX2 and AVX-512 assembly (desbs_amd64.s), from the S-box, P
// and IP tables of des.go. go generate runs it in stages/cipher.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	files, err := generate(".")
	if err == nil {
		for name, b := range files {
			if err = os.WriteFile(name, b, 0o644); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "desgen:", err)
		os.Exit(1)
	}
}

// generate returns the generated files' contents by name, from the tables
// of dir/des.go.
func generate(dir string) (map[string][]byte, error) {
	initFormulas()
	tabs, err := readTables(filepath.Join(dir, "des.go"))
	if err != nil {
		return nil, err
	}
	// full rounds, and the last round's S-boxes for the outputs it needs
	var cs, last [8]circuit
	var lcs, lastLcs [8]lutCircuit
	want := lastWanted(tabs)
	for i := range 8 {
		cs[i] = synth(tabs.s[i])
		last[i] = cs[i].only(want[i])
		lcs[i], lastLcs[i] = mapLUT3(cs[i]).reordered(), mapLUT3(last[i]).reordered()
		if lcs[i].eval() != cs[i].eval() || lastLcs[i].eval() != last[i].eval() {
			return nil, fmt.Errorf("the lut mapping of S-box %d differs from the circuit", i+1)
		}
		full, l := cs[i].eval(), last[i].eval()
		for k := range 4 {
			if want[i][k] && full[k] != l[k] {
				return nil, fmt.Errorf("the last round's circuit of S-box %d differs", i+1)
			}
		}
	}
	asm, slots := genAsm(tabs, cs, last, lcs, lastLcs)
	return map[string][]byte{
		"desbs_amd64.s": asm,
		"desbs_gen.go":  genGo(tabs, cs, last, slots),
	}, nil
}
