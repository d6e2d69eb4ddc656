package conf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecrets: every method with every password, named by source and
// method; identities before them, each with its method or the server's,
// and the server's secrets with the "*" block's rights.
func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("# comment\n\nnew-password\r\n"), 0o600)
	ids := filepath.Join(dir, "ids")
	os.WriteFile(ids, []byte("listen = \"*:5668\"\nauthorize \"web\" { password = \"w\"; hosts = \"web\"; decryption_method = aes }\nauthorize \"*\" { services = \"ping\" }\n"), 0o600)
	c, err := Parse("f.cfg", []byte("password=old\npassword_file="+pw+"\ndecryption_method=1,14\nidentities_file="+ids+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := c.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secrets {
		names = append(names, s.Name)
	}
	if got, want := strings.Join(names, ","), "web,password/1,password_file:3/1,password/14,password_file:3/14"; got != want {
		t.Errorf("secrets %s, want %s", got, want)
	}
	if string(secrets[2].Password) != "new-password" || secrets[0].Method.Number != 14 || secrets[0].Rights.Name != "web" || secrets[1].Rights.Name != "*" {
		t.Errorf("secrets: %+v", secrets)
	}
	if f, err := c.Identities(); err != nil || f.Lookup("web").Password != "w" || f.Lookup("anyone").Name != "*" {
		t.Errorf("Identities: %v, %v", f, err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], ids+":1: listen is not an identities setting") {
		t.Errorf("warnings %q", c.Warnings)
	}
	// Without password and password_file only identities count.
	c, _ = Parse("f.cfg", []byte("identities_file="+ids+"\n"))
	if secrets, err := c.Secrets(); err != nil || len(secrets) != 1 || secrets[0].Name != "web" {
		t.Errorf("identities alone: %v, %v", secrets, err)
	}
	// A bad method in a block names the block.
	os.WriteFile(ids, []byte("authorize \"web\" { password = \"w\"; decryption_method = 13 }\n"), 0o600)
	c, _ = Parse("f.cfg", []byte("identities_file="+ids+"\n"))
	if _, err := c.Secrets(); !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), ids+`:1: authorize "web": decryption_method=13 is not a decryption method`) {
		t.Errorf("bad method: %v", err)
	}
	// An empty password_file without a password line.
	os.WriteFile(pw, []byte("# nothing\n"), 0o600)
	c, _ = Parse("f.cfg", []byte("password_file="+pw+"\n"))
	if _, err := c.Secrets(); !errors.Is(err, ErrSecrets) || !strings.Contains(err.Error(), "holds no password") {
		t.Errorf("empty password_file: %v", err)
	}
}
