package nsca

import (
	"fmt"

	"nsca_fast/conf"
)

// cipherOf is the decrypt stage's settings for cfg, with the engine that
// cfg.Cipher chose (and keeps, so that this costs one self-test per loaded
// configuration however often it is called).
func cipherOf(cfg *conf.Config) (cipherConfig, error) {
	choice, err := cfg.Cipher()
	if err != nil {
		return cipherConfig{}, fmt.Errorf("%w: decryption_engine=%s: %w", errCipher, choice.Asked, err)
	}
	cc := cipherConfig{
		Method:         cfg.DecryptionMethod,
		Engine:         choice.Engine,
		Password:       []byte(cfg.Password),
		PerConnection:  cfg.DecryptionMode == 0,
		PayloadLengths: cfg.PayloadLengths,
	}
	secrets, err := cfg.Secrets()
	if err != nil {
		return cipherConfig{}, fmt.Errorf("%w: %w", errCipher, err)
	}
	if len(secrets) > 1 || len(cfg.MoreMethods) > 0 || cfg.PasswordFile != "" || cfg.IdentitiesFile != "" {
		// Named even when one is left, so that its matches are counted.
		for _, s := range secrets {
			cc.Candidates = append(cc.Candidates, candidate{Name: s.Name, Method: s.Method.Number, Engine: s.Choice.Engine,
				Password: s.Password, Networks: s.Networks, Rights: s.Rights})
		}
	}
	return cc, nil
}
