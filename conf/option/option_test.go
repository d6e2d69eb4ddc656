package option

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type inner struct {
	N    int
	D    time.Duration
	B, Y bool
	S    string
}

type outer struct {
	In inner
}

func innerRows() []Row[inner] {
	return []Row[inner]{
		{Name: "n", Default: "5", Kind: Integer(func(i *inner) *int { return &i.N }, 1, 10, " seconds")},
		{Name: "d", Default: "3", Kind: Seconds(func(i *inner) *time.Duration { return &i.D }, 0, 300)},
		{Name: "b", Default: "0", Kind: Boolean(func(i *inner) *bool { return &i.B })},
		{Name: "y", Default: "no", Kind: YesNo(func(i *inner) *bool { return &i.Y })},
		{Name: "s", Secret: true, Kind: Text(func(i *inner) *string { return &i.S }, Optional(func(s string) error {
			if !strings.HasPrefix(s, "x") {
				return errors.New("must start with x")
			}
			return nil
		}))},
	}
}

// TestNest: a nested row sets, checks and writes back the field of the
// inner struct, with the inner row's messages.
func TestNest(t *testing.T) {
	rows := Nest(func(o *outer) *inner { return &o.In }, innerRows())
	var o outer
	for _, r := range rows {
		if err := r.Kind.Set(&o, r.Default); err != nil {
			t.Fatalf("default of %s: %v", r.Name, err)
		}
	}
	if want := (inner{N: 5, D: 3 * time.Second}); o.In != want {
		t.Errorf("defaults: %+v, want %+v", o.In, want)
	}
	for _, c := range []struct {
		row, value, text, err string
	}{
		{"n", " 7\r", "7", ""},
		{"n", "0", "", "must be at least 1"},
		{"n", "11", "", "cannot be greater than 10 seconds"},
		{"n", "1x", "", "is not a decimal integer"},
		{"d", "-1", "", "cannot be negative"},
		{"d", "301", "", "cannot be greater than 300 seconds"},
		{"d", "60", "60", ""},
		{"b", "2", "1", ""},
		{"b", "yes", "", "write 1 for yes, 0 for no"},
		{"y", "On", "1", ""},
		{"y", "off", "0", ""},
		{"y", "maybe", "", "write 1 (yes) or 0 (no)"},
		{"s", "", "", ""},
		{"s", "xy", "xy", ""},
		{"s", "y", "", "must start with x"},
		{"s", "x\x00", "", "contains a NUL byte"},
	} {
		var r *Row[outer]
		for i := range rows {
			if rows[i].Name == c.row {
				r = &rows[i]
			}
		}
		err := r.Kind.Set(&o, c.value)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s=%q: %v", c.row, c.value, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s=%q: got %v, want %q", c.row, c.value, err, c.err)
		case c.err == "" && r.Kind.Text(&o) != c.text:
			t.Errorf("%s=%q reads back as %q, want %q", c.row, c.value, r.Kind.Text(&o), c.text)
		}
	}
	o.In.N = 99
	if err := rows[0].Kind.Check(&o); err == nil || !rows[0].Kind.Numeric() || rows[4].Kind.Numeric() {
		t.Errorf("check of a stored 99: %v; numeric n %v, s %v", err, rows[0].Kind.Numeric(), rows[4].Kind.Numeric())
	}
	if got := rows[4].Describe("secret", errors.New("is bad")); got != "s is bad" {
		t.Errorf("secret described as %q", got)
	}
	if got := rows[0].Describe(" 9", errors.New("is bad")); got != `n=" 9" is bad` {
		t.Errorf("value described as %q", got)
	}
}
