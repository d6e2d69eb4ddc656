package gearman

import (
	"errors"
	"strings"
	"testing"

	"nsca_fast/conf/option"
)

// serverRow is the gearman_server row of Rows.
func serverRow(t *testing.T) func(string) error {
	t.Helper()
	for _, r := range Rows() {
		if r.Name == "gearman_server" {
			return func(s string) error { var o Options; return r.Kind.Set(&o, s) }
		}
	}
	t.Fatal("no gearman_server row")
	return nil
}

// TestServersCheckedOnce: the gearman_server row and Validate refuse the
// same lists for the same reason, since both are checkServers, and the
// row takes "" as off.
func TestServersCheckedOnce(t *testing.T) {
	set := serverRow(t)
	if err := set(""); err != nil {
		t.Errorf("empty gearman_server: %v", err)
	}
	for _, s := range []string{"h", "h:0", "h:+5", "h:70000", ":4730", "h:1,", "h:1, g"} {
		rowErr := set(s)
		o := Options{Servers: s, Encryption: false}
		err := o.Validate()
		var oe *option.Error
		switch {
		case rowErr == nil || !strings.Contains(rowErr.Error(), "has a bad entry"):
			t.Errorf("row takes %q: %v", s, rowErr)
		case !errors.As(err, &oe) || oe.Option != "gearman_server" || oe.Reason != rowErr.Error():
			t.Errorf("Validate of %q: %v, want the row's %q", s, err, rowErr)
		}
	}
	for _, s := range []string{"h:1", " h:1 ,[::1]:4730", "10.0.0.1:65535"} {
		o := Options{Servers: s}
		if err := set(s); err != nil {
			t.Errorf("row refuses %q: %v", s, err)
		} else if err := o.Validate(); err != nil {
			t.Errorf("Validate refuses %q: %v", s, err)
		}
	}
}
