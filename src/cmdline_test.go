package main

import (
	"slices"
	"testing"
)

// TestParseFlagsCombined: short flags combine as getopt reads them; glog's
// flags, a flag's value and everything after "--" are left alone.
func TestParseFlagsCombined(t *testing.T) {
	cases := []struct {
		args []string
		want options
	}{
		{[]string{"-fd"}, options{foreground: true, verbose: true, workers: -1, threads: -1}},
		{[]string{"-fdc", "x.cfg"}, options{foreground: true, verbose: true, configFile: "x.cfg", workers: -1, threads: -1}},
		{[]string{"-fcx.cfg", "-n2", "-t", "3"}, options{foreground: true, configFile: "x.cfg", workers: 2, threads: 3}},
		{[]string{"-c", "-fd"}, options{configFile: "-fd", workers: -1, threads: -1}},
		{[]string{"--check-config", "-sf", "-stderrthreshold=INFO"}, options{checkOnly: true, single: true, foreground: true, workers: -1, threads: -1}},
		{[]string{"--daemon", "--replay", "-fd"}, options{single: true, replay: "-fd", workers: -1, threads: -1}},
	}
	for _, c := range cases {
		o, err := parseFlags(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if *o != c.want {
			t.Errorf("%q: %+v, want %+v", c.args, *o, c.want)
		}
	}
	for _, bad := range [][]string{{"-fx"}, {"-n", "101"}, {"-fdn"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := splitShort(newFlagSet(&options{}), []string{"-fd", "--", "-fd"}); !slices.Equal(got, []string{"-f", "-d", "--", "-fd"}) {
		t.Errorf("splitShort past --: %q", got)
	}
}
