package conf

import (
	"sync"

	"nsca_fast/stages/cipher"
)

// chosen is a Config's cipher.Choice, made at the first call of Cipher,
// and its secrets, read at the first call of Secrets.
type chosen struct {
	once    sync.Once
	choice  cipher.Choice
	err     error
	secrets prepared
}

// Cipher is what serves decryption_method with password as
// decryption_engine asks (cipher.Choose), chosen and self-tested at the
// first call and kept with this Config: the check, the server, the
// GOMAXPROCS sizing and the start-up line of one start agree on one
// self-test, and a reload, which loads a new Config, chooses again. The
// options it reads must not change after that first call.
func (c *Config) Cipher() (cipher.Choice, error) {
	c.cipher.once.Do(func() {
		m := c.Method()
		c.cipher.choice, c.cipher.err = cipher.Choose(m.Number, m.Name, []byte(c.Password), c.DecryptionEngine)
	})
	return c.cipher.choice, c.cipher.err
}
