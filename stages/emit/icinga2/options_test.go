package icinga2

import (
	"errors"
	"testing"

	"nsca_fast/conf/option"
)

// TestURLCheckedOnce: the icinga2_api_url row and Validate refuse the
// same URLs for the same reason, since both are checkURL, and the row
// takes "" as off.
func TestURLCheckedOnce(t *testing.T) {
	var row func(string) error
	for _, r := range Rows() {
		if r.Name == "icinga2_api_url" {
			row = func(s string) error { var o Options; return r.Kind.Set(&o, s) }
		}
	}
	if row == nil {
		t.Fatal("no icinga2_api_url row")
	}
	if err := row(""); err != nil {
		t.Errorf("empty icinga2_api_url: %v", err)
	}
	for _, s := range []string{"ftp://icinga", "icinga:5665", "https://", "https://%zz"} {
		rowErr := row(s)
		o := Options{URL: s, User: "u", Password: "p"}
		err := o.Validate()
		var oe *option.Error
		switch {
		case rowErr == nil:
			t.Errorf("row takes %q", s)
		case !errors.As(err, &oe) || oe.Option != "icinga2_api_url" || oe.Reason != "url \""+s+"\" "+rowErr.Error():
			t.Errorf("Validate of %q: %v, want the row's %q", s, err, rowErr)
		}
	}
	o := Options{URL: "http://proxy/icinga", User: "u", Password: "p"}
	if err := row(o.URL); err != nil {
		t.Errorf("row refuses %q: %v", o.URL, err)
	} else if err := o.Validate(); err != nil {
		t.Errorf("Validate refuses %q: %v", o.URL, err)
	}
}
