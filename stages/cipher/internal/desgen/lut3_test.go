package main

import "testing"

func TestLUT3Mapping(t *testing.T) {
	initFormulas()
	tabs, err := readTables("../../des.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i := range 8 {
		c := synth(tabs.s[i])
		lc := mapLUT3(c)
		if lc.eval() != c.eval() {
			t.Fatalf("S%d: the LUT3 mapping differs from the circuit", i+1)
		}
		total += len(lc.luts)
		t.Logf("S%d: %d gates, %d luts", i+1, len(c.gates), len(lc.luts))
	}
	t.Logf("total %d luts", total)
}
