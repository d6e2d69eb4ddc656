// Command desgen writes the bitsliced DES S-box circuits, as Go
// (desbs_gen.go) and as AVX2 assembly (desbs_amd64.s), from the S-box and P
// tables of des.go. Run by go generate in stages/cipher.
package main

import (
	"fmt"
	"os"
)

func main() {
	initFormulas()
	tabs, err := readTables("des.go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "desgen:", err)
		os.Exit(1)
	}
	total := 0
	var cs [8]circuit
	for i := range 8 {
		cs[i] = synth(tabs.s[i])
		total += len(cs[i].gates)
		fmt.Fprintf(os.Stderr, "S%d: %d gates\n", i+1, len(cs[i].gates))
	}
	fmt.Fprintf(os.Stderr, "total %d\n", total)
	write("desbs_amd64.s", genAVX2(tabs, cs))
	write("desbs_gen.go", genGo(tabs, cs))
}

func write(name string, b []byte) {
	if err := os.WriteFile(name, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "desgen:", err)
		os.Exit(1)
	}
}
