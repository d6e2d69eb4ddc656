package gearman

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"nsca_fast/conf/option"
)

// Defaults, mod_gearman's own: the NEB module reads results from
// "check_results" unless told otherwise, and a server given without a port
// is on Gearman's registered port. New takes Queue and Timeout as these
// when empty; Rows declares them as the defaults of gearman_result_queue
// and gearman_timeout.
const (
	DefaultQueue   = "check_results"
	DefaultTimeout = 10 * time.Second
	defaultPort    = "4730"
)

// Options are the Gearman sink's settings, the gearman_* options of
// nsca.cfg: Rows parses each into these fields (checking its range or
// form), and Validate checks them as a whole.
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
	// settings of the destination rather than of the sink, so package
	// conf, which resolves and checks the fallbacks of every engine, adds
	// the gearman_fallback row.
	QueueSize int
	Fallback  string
}

// Rows are the gearman_* options of nsca.cfg, in the order of the
// documentation and Dump, each filling its field of Options; package conf
// nests them into its table.
func Rows() []option.Row[Options] {
	return []option.Row[Options]{
		{Name: "gearman_server", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.Servers }, option.Optional(checkServers)),
			Doc: "Comma-separated host:port list of Gearman job servers (mod_gearman's server=), tried in order: " +
				"every result is also submitted as a background job for mod_gearman. Empty: off."},
		{Name: "gearman_result_queue", Default: DefaultQueue, Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.Queue }, nil),
			Doc:  "Gearman function (queue) the results are submitted to, as mod_gearman's result_queue=."},
		{Name: "gearman_encryption", Default: "1", Origin: option.OriginNew,
			Kind: option.YesNo(func(o *Options) *bool { return &o.Encryption }),
			Doc:  "1 (yes): encrypt jobs with AES-256 under gearman_key, as mod_gearman's encryption=yes. 0 (no): base64 only."},
		{Name: "gearman_key", Origin: option.OriginNew, Secret: true,
			Kind: option.Text(func(o *Options) *string { return &o.Key }, nil),
			Doc:  "mod_gearman's shared key (key=); at most 32 bytes are used."},
		{Name: "gearman_keyfile", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.KeyFile }, nil),
			Doc:  "File holding the key (mod_gearman's keyfile=); when set, it takes precedence over gearman_key."},
		{Name: "gearman_timeout", Default: option.SecondsText(DefaultTimeout), Origin: option.OriginNew,
			Kind: option.Seconds(func(o *Options) *time.Duration { return &o.Timeout }, 1, 300),
			Doc:  "Seconds a connect, submit or reply may take, 1..300."},
		{Name: "gearman_queue_size", Default: "10000", Origin: option.OriginNew,
			Kind: option.Integer(func(o *Options) *int { return &o.QueueSize }, 1, 1000000, ""),
			Doc: "Results waiting for the job servers, 1..1000000; when the queue is full, further results go to " +
				"gearman_fallback at once."},
	}
}

// checkServers checks the form of gearman_server, for its row and
// Validate: host:port entries separated by commas, blanks around each
// ignored. Its messages read after "gearman_server=value ".
func checkServers(s string) error {
	for _, entry := range strings.Split(s, ",") {
		entry = strings.Trim(entry, " \t\r")
		host, port, err := net.SplitHostPort(entry)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if err == nil {
			if n, perr := strconv.ParseUint(port, 10, 16); perr != nil || n == 0 {
				err = errors.New("bad port")
			}
		}
		if err != nil {
			return fmt.Errorf("has a bad entry %s: %v (want host:port)", option.Show(entry), err)
		}
	}
	return nil
}

// On says whether the sink is configured: Servers is set.
func (o *Options) On() bool { return o.Servers != "" }

// Files names the options whose files New reads (when set), so that a
// configuration check can try them as the daemon's user: the key file,
// read only for encryption.
func (o *Options) Files() []string {
	if !o.Encryption {
		return nil
	}
	return []string{"gearman_keyfile"}
}

// Validate checks the options of a Gearman sink (Servers set) as a whole;
// a *option.Error names the option to fix.
func (o *Options) Validate() error {
	bad := func(reason string) error {
		return &option.Error{Option: "gearman_server", Reason: reason, Kind: errConfig}
	}
	if o.Encryption && o.Key == "" && o.KeyFile == "" {
		return &option.Error{Option: "gearman_encryption", Conflict: true,
			Reason: "gearman_encryption=1 needs gearman_key or gearman_keyfile", Kind: errConfig}
	}
	if strings.TrimSpace(o.Servers) == "" {
		return bad("no job server given")
	}
	if err := checkServers(o.Servers); err != nil {
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
