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
	"strings"
	"time"

	"nsca_fast/conf/option"
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

// Gearman submits each result as a background job (SUBMIT_JOB_BG) to the
// first job server of its list that accepts a connection, keeping the
// connection for the next Write. A result counts as delivered once the job
// server answered JOB_CREATED, so the job is in the server's queue; what
// was sent but not confirmed when a connection breaks is sent again (to
// the next server, or to the fallback), so a result may arrive twice but
// is not lost.
type Gearman struct {
	// Stamps spaces the start_times of one service's results; New gives
	// the sink one of its own, which a caller replaces before the first
	// Write to share the process's.
	Stamps *Stamps

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

// New returns the sink for o, which are valid (Validate), reading its key
// file; nothing is dialed before the first Write, so a job server that is
// down does not stop the daemon.
func New(o Options) (*Gearman, error) {
	g := &Gearman{Stamps: &Stamps{}, queue: o.Queue, timeout: o.Timeout, retry: sink.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}}
	g.servers = serverList(o.Servers)
	if g.queue == "" {
		g.queue = DefaultQueue
	}
	if g.timeout == 0 {
		g.timeout = DefaultTimeout
	}
	if o.Encryption {
		key := []byte(o.Key)
		if o.KeyFile != "" {
			var err error
			if key, err = readKeyFile(o.KeyFile); err != nil {
				return nil, &option.Error{Option: "gearman_keyfile", Kind: err}
			}
		}
		g.block = gearmanCipher(key)
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("%w: unique job IDs: %v", errConfig, err)
	}
	g.uniq = fmt.Appendf(nil, "nsca_fast-%d-%s-", os.Getpid(), hex.EncodeToString(r[:]))
	g.uniqLen = len(g.uniq)
	return g, nil
}

// serverList is the job servers of a gearman_server list, as
// checkServers accepts it, in order. An entry without a port, which only a
// caller of New can give, gets Gearman's registered one, as in
// mod_gearman's server list.
func serverList(s string) []string {
	var out []string
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		host, port, err := net.SplitHostPort(entry)
		if err != nil {
			// No port: host, or a bare IPv6 address.
			host, port = strings.Trim(entry, "[]"), defaultPort
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out
}
