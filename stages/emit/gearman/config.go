package gearman

// The Gearman sink hands results to mod_gearman's NEB module through a
// Gearman job server, as mod_gearman's own send_gearman does: one
// background job per result on the result queue, whose body is the
// module's key=value result text, base64-encoded and, with encryption,
// AES-256-ECB encrypted first. The formats follow mod_gearman (github.com/
// sni/mod_gearman): common/gm_crypt.c and common/utils.c for the encoding
// and the key, tools/send_gearman.c and tools/send_multi.c for the body,
// neb_module_naemon/result_thread.c for what the module accepts.

import (
	"bufio"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"nsca_fast/stages/emit/sink"
)

// Errors of the Gearman sink.
var (
	errConfig      = errors.New("sink: gearman: bad configuration")
	errKeyFile     = errors.New("sink: gearman: key file holds no key")
	errUnreachable = errors.New("sink: gearman: no job server reachable")
	errBackoff     = errors.New("sink: gearman: job servers unreachable, retrying later")
	errIO          = errors.New("sink: gearman: connection to job server failed")
	errRefused     = errors.New("sink: gearman: job server refused a job")
	errProtocol    = errors.New("sink: gearman: unexpected reply from job server")
	errSealed      = errors.New("sink: gearman: job body is not mod_gearman's encoding")
)

// Defaults of Config, mod_gearman's own: the NEB module reads
// results from "check_results" unless told otherwise, and a server given
// without a port is on Gearman's registered port.
const (
	gearmanDefaultQueue   = "check_results"
	gearmanDefaultPort    = "4730"
	gearmanDefaultTimeout = 10 * time.Second
)

// Config says where and how the Gearman sink submits results.
type Config struct {
	Servers []string      // host:port, tried in order
	Queue   string        // "" means "check_results"
	Encrypt bool          // mod_gearman's encryption=yes: AES-256-ECB, then base64
	Key     []byte        // as given by gearman_key or read from the key file; the sink applies mod_gearman's truncation/padding
	Timeout time.Duration // per dial/read/write; 0 means 10s
}

// Gearman submits each result as a background job (SUBMIT_JOB_BG) to the
// first job server of its list that accepts a connection, keeping the
// connection for the next Write. A result counts as delivered once the job
// server answered JOB_CREATED, so the job is in the server's queue; what
// was sent but not confirmed when a connection breaks is sent again (to
// the next server, or to the fallback), so a result may arrive twice but
// is not lost.
type Gearman struct {
	servers []string
	queue   string
	block   cipher.Block // nil without encryption
	timeout time.Duration

	conn net.Conn
	rd   *bufio.Reader
	addr string // the server conn is connected to

	// uniq prefixes each job's unique ID: gearmand merges background jobs
	// with the same unique ID while they are queued, so every result needs
	// its own, as libgearman's generated UUIDs give mod_gearman.
	uniq    []byte
	uniqLen int
	seq     uint64

	retry   sink.Backoff
	lastErr error

	buf   []byte
	plain []byte
	reply []byte
}

// New checks cfg and returns the sink; nothing is dialed before the
// first Write, so a job server that is down does not stop the daemon.
func New(cfg Config) (*Gearman, error) {
	g := &Gearman{queue: cfg.Queue, timeout: cfg.Timeout, retry: sink.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}}
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: no job server given", errConfig)
	}
	for _, s := range cfg.Servers {
		addr, err := gearmanAddr(s)
		if err != nil {
			return nil, err
		}
		g.servers = append(g.servers, addr)
	}
	if g.queue == "" {
		g.queue = gearmanDefaultQueue
	}
	// The function name is NUL-terminated on the wire, and gearmand refuses
	// names of GEARMAN_FUNCTION_MAX_SIZE (512) bytes or more.
	if strings.IndexByte(g.queue, 0) >= 0 || len(g.queue) >= 512 {
		return nil, fmt.Errorf("%w: result queue %q: must be shorter than 512 bytes, without NUL", errConfig, g.queue)
	}
	switch {
	case g.timeout == 0:
		g.timeout = gearmanDefaultTimeout
	case g.timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout %v", errConfig, g.timeout)
	}
	if cfg.Encrypt {
		if len(gearmanKey(cfg.Key)) == 0 {
			return nil, fmt.Errorf("%w: encryption is on but the key is empty", errConfig)
		}
		g.block = gearmanCipher(cfg.Key)
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("%w: unique job IDs: %v", errConfig, err)
	}
	g.uniq = fmt.Appendf(nil, "nsca_fast-%d-%s-", os.Getpid(), hex.EncodeToString(r[:]))
	g.uniqLen = len(g.uniq)
	return g, nil
}

// gearmanAddr gives s the default port when it has none, as mod_gearman's
// server list does, and checks it is host:port.
func gearmanAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: empty job server address", errConfig)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: host, or a bare IPv6 address.
		host, port = strings.Trim(s, "[]"), gearmanDefaultPort
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return "", fmt.Errorf("%w: job server %q: bad port", errConfig, s)
	}
	return net.JoinHostPort(host, port), nil
}
