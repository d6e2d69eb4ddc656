package gearman

import (
	"fmt"
	"strings"
	"time"

	"nsca_fast/stages/emit/sink"
)

// Defaults, mod_gearman's own: the NEB module reads results from
// "check_results" unless told otherwise, and a server given without a port
// is on Gearman's registered port. New takes Queue and Timeout as these
// when empty; package conf's table declares them as the defaults of
// gearman_result_queue and gearman_timeout.
const (
	DefaultQueue   = "check_results"
	DefaultTimeout = 10 * time.Second
	defaultPort    = "4730"
)

// Options are the Gearman sink's settings, the gearman_* options of
// nsca.cfg: package conf's table parses each into these fields (checking
// its range or form), and Validate checks them as a whole.
type Options struct {
	// Servers is the job servers, host:port separated by commas, tried in
	// order (gearman_server); "" means no Gearman sink.
	Servers string
	// Queue is the Gearman function results are submitted to; "" means
	// DefaultQueue.
	Queue string
	// Encryption is mod_gearman's encryption=yes: AES-256-ECB, then base64.
	Encryption bool
	// Key is the shared key, or KeyFile the file holding it (which takes
	// precedence); the sink applies mod_gearman's truncation and padding.
	Key, KeyFile string
	// Timeout bounds each dial, read and write; 0 means DefaultTimeout.
	Timeout time.Duration
	// QueueSize bounds the results queued for the destination, and
	// Fallback is where those it cannot deliver go (see conf.Fallback):
	// settings of the destination rather than of the sink.
	QueueSize int
	Fallback  string
}

// Validate checks the options of a Gearman sink (Servers set) as a whole;
// a *sink.OptionError names the option to fix.
func (o *Options) Validate() error {
	bad := func(reason string) error {
		return &sink.OptionError{Option: "gearman_server", Reason: reason, Kind: errConfig}
	}
	if o.Encryption && o.Key == "" && o.KeyFile == "" {
		return &sink.OptionError{Option: "gearman_encryption", Conflict: true,
			Reason: "gearman_encryption=1 needs gearman_key or gearman_keyfile", Kind: errConfig}
	}
	if _, err := serverList(o.Servers); err != nil {
		return bad(err.Error())
	}
	// The function name is NUL-terminated on the wire, and gearmand refuses
	// names of GEARMAN_FUNCTION_MAX_SIZE (512) bytes or more.
	if strings.IndexByte(o.Queue, 0) >= 0 || len(o.Queue) >= 512 {
		return bad(fmt.Sprintf("result queue %q: must be shorter than 512 bytes, without NUL", o.Queue))
	}
	if o.Timeout < 0 {
		return bad(fmt.Sprintf("negative timeout %v", o.Timeout))
	}
	// A key file is read by New, which refuses one without a key.
	if o.Encryption && o.KeyFile == "" && len(gearmanKey([]byte(o.Key))) == 0 {
		return bad("encryption is on but the key is empty")
	}
	return nil
}
