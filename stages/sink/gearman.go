package sink

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
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Errors of the Gearman sink.
var (
	ErrGearmanConfig      = errors.New("sink: gearman: bad configuration")
	ErrGearmanKeyFile     = errors.New("sink: gearman: key file holds no key")
	ErrGearmanUnreachable = errors.New("sink: gearman: no job server reachable")
	ErrGearmanBackoff     = errors.New("sink: gearman: job servers unreachable, retrying later")
	ErrGearmanIO          = errors.New("sink: gearman: connection to job server failed")
	ErrGearmanRefused     = errors.New("sink: gearman: job server refused a job")
	ErrGearmanProtocol    = errors.New("sink: gearman: unexpected reply from job server")
	ErrGearmanSealed      = errors.New("sink: gearman: job body is not mod_gearman's encoding")
)

// Defaults of GearmanConfig, mod_gearman's own: the NEB module reads
// results from "check_results" unless told otherwise, and a server given
// without a port is on Gearman's registered port.
const (
	gearmanDefaultQueue   = "check_results"
	gearmanDefaultPort    = "4730"
	gearmanDefaultTimeout = 10 * time.Second
)

// gearmanSource is the result's `source`: mod_gearman's own senders put
// their program's name there (send_gearman, send_multi).
const gearmanSource = "nsca_fast"

// gearmanKeyLen is AES-256's key size: mod_gearman copies the configured
// key up to its first NUL and at most this many bytes, padding with NULs.
const gearmanKeyLen = 32

// GearmanConfig says where and how the Gearman sink submits results.
type GearmanConfig struct {
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

	retry   backoff
	lastErr error

	buf   []byte
	plain []byte
	reply []byte
}

// NewGearman checks cfg and returns the sink; nothing is dialed before the
// first Write, so a job server that is down does not stop the daemon.
func NewGearman(cfg GearmanConfig) (*Gearman, error) {
	g := &Gearman{queue: cfg.Queue, timeout: cfg.Timeout, retry: backoff{first: 100 * time.Millisecond, max: 5 * time.Second}}
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: no job server given", ErrGearmanConfig)
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
		return nil, fmt.Errorf("%w: result queue %q: must be shorter than 512 bytes, without NUL", ErrGearmanConfig, g.queue)
	}
	switch {
	case g.timeout == 0:
		g.timeout = gearmanDefaultTimeout
	case g.timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout %v", ErrGearmanConfig, g.timeout)
	}
	if cfg.Encrypt {
		if len(gearmanKey(cfg.Key)) == 0 {
			return nil, fmt.Errorf("%w: encryption is on but the key is empty", ErrGearmanConfig)
		}
		g.block = gearmanCipher(cfg.Key)
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("%w: unique job IDs: %v", ErrGearmanConfig, err)
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
		return "", fmt.Errorf("%w: empty job server address", ErrGearmanConfig)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: host, or a bare IPv6 address.
		host, port = strings.Trim(s, "[]"), gearmanDefaultPort
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return "", fmt.Errorf("%w: job server %q: bad port", ErrGearmanConfig, s)
	}
	return net.JoinHostPort(host, port), nil
}

// ReadGearmanKeyFile reads a key the way mod_gearman's keyfile option does
// (read_keyfile in common/utils.c): the first line, but no more than 32
// bytes of it (fgets into 33 bytes), without trailing white space. A file
// without a key is an error rather than an empty key, which would
// encrypt with 32 NULs.
func ReadGearmanKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sink: gearman: key file: %w", err)
	}
	defer f.Close()
	b := make([]byte, gearmanKeyLen)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("sink: gearman: key file %s: %w", path, err)
	}
	b = b[:n]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	}
	// The key is a C string from here on: it ends at a NUL.
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimRight(b, " \t\n\v\f\r") // C's isspace
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrGearmanKeyFile, path)
	}
	return b, nil
}

// gearmanKey is the part of key mod_gearman uses: up to the first NUL, at
// most 32 bytes (mod_gm_aes_init in common/gm_crypt.c).
func gearmanKey(key []byte) []byte {
	if i := bytes.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	return key[:min(len(key), gearmanKeyLen)]
}

// gearmanCipher is AES-256 under key as mod_gearman pads it: NULs up to
// 32 bytes.
func gearmanCipher(key []byte) cipher.Block {
	var k [gearmanKeyLen]byte
	copy(k[:], gearmanKey(key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	return block
}

// gearmanPaddedLen is how many bytes mod_gearman encrypts for an n-byte
// text (mod_gm_encrypt and mod_gm_aes_encrypt): the C string with its NUL,
// NUL-padded to whole blocks under the test `16 % len != 0`, which also
// adds a whole block of NULs when the string and its NUL already fill
// whole blocks, except for exactly one block. Lengths 1, 2, 4 and 8 make
// mod_gearman fail; here they are padded to one block.
func gearmanPaddedLen(n int) int {
	l := n + 1
	switch {
	case l%aes.BlockSize != 0:
		return l + aes.BlockSize - l%aes.BlockSize
	case l > aes.BlockSize:
		return l + aes.BlockSize
	}
	return l
}

// GearmanSeal returns the job body mod_gearman's NEB module reads for the
// result text plain: with a key, base64 of plain encrypted with AES-256-ECB
// under the key as mod_gearman pads it, the text NUL-padded as mod_gearman
// does (transport mode "aes-256+base64"); with a nil or empty key, plain
// in base64 only ("base64 only"), which is what mod_gearman sends with
// encryption off. The base64 is one line with padding, as OpenSSL's
// EVP_EncodeBlock writes it.
func GearmanSeal(key, plain []byte) []byte {
	var block cipher.Block
	if len(key) > 0 {
		block = gearmanCipher(key)
	}
	out, _ := appendSealed(nil, block, bytes.Clone(plain))
	return out
}

// appendSealed appends the job body for text to dst. text is encrypted in
// place, grown by the padding, and returned for reuse.
func appendSealed(dst []byte, block cipher.Block, text []byte) (out, scratch []byte) {
	if block == nil {
		return base64.StdEncoding.AppendEncode(dst, text), text
	}
	n := gearmanPaddedLen(len(text))
	text = append(text, make([]byte, n-len(text))...)
	for i := 0; i < n; i += aes.BlockSize {
		block.Encrypt(text[i:i+aes.BlockSize], text[i:i+aes.BlockSize])
	}
	return base64.StdEncoding.AppendEncode(dst, text), text
}

// GearmanOpen is GearmanSeal's inverse, as the NEB module decodes a job
// (mod_gm_decrypt in common/utils.c): base64 (line breaks allowed), then
// with a key AES-256-ECB over the whole blocks, the text ending at the
// first NUL.
func GearmanOpen(key, sealed []byte) ([]byte, error) {
	raw, err := base64.StdEncoding.AppendDecode(nil, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGearmanSealed, err)
	}
	if len(key) == 0 {
		return raw, nil
	}
	raw = raw[:len(raw)-len(raw)%aes.BlockSize]
	block := gearmanCipher(key)
	for i := 0; i < len(raw); i += aes.BlockSize {
		block.Decrypt(raw[i:i+aes.BlockSize], raw[i:i+aes.BlockSize])
	}
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	return raw, nil
}

// AppendGearmanResult appends the result text mod_gearman's NEB module
// reads (get_results in neb_module_naemon/result_thread.c): key=value
// lines, each ending in a newline. The module stops reading at the first
// line with an empty value, so a host check has no service_description
// line and an empty host name no host_name line (the module then discards
// the job, as the core would reject the result); output comes last
// because the module takes it before that test, so an empty output is
// still the empty output the command file would give the core. The output
// is escaped as mod_gearman's senders escape it (gm_escape_newlines: `\`
// as `\\`, newline as `\n`). A newline in a host or service name, which
// would start a key of its own, is written as `\n` too. Times are the
// server's time of receipt, as for the command file, in mod_gearman's
// seconds.fraction form.
func AppendGearmanResult(b []byte, it Item) []byte {
	r := it.Result
	b = append(b, "type=passive\n"...)
	if r.Host != "" {
		b = append(b, "host_name="...)
		b = appendName(b, r.Host)
		b = append(b, '\n')
	}
	if r.Service != "" {
		b = append(b, "service_description="...)
		b = appendName(b, r.Service)
		b = append(b, '\n')
	}
	b = append(b, "start_time="...)
	b = strconv.AppendInt(b, it.Time, 10)
	b = append(b, ".0\nfinish_time="...)
	b = strconv.AppendInt(b, it.Time, 10)
	b = append(b, ".0\nreturn_code="...)
	b = strconv.AppendInt(b, int64(r.ReturnCode), 10)
	b = append(b, "\nsource="+gearmanSource+"\noutput="...)
	b = appendEscaped(b, r.Output)
	return append(b, '\n')
}

// appendName appends a host or service name with its newlines as `\n`;
// backslashes stay, since the module and the core take names verbatim.
func appendName(b []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		b = append(b, '\\', 'n')
		s = s[i+1:]
	}
}

// Gearman binary protocol: a 12-byte header (magic, type, size, both
// big-endian) and the arguments separated by NULs.
const (
	gearmanHeaderLen   = 12
	gearmanSubmitJobBG = 18
	gearmanJobCreated  = 8
	gearmanError       = 19
	// gearmanMaxReply bounds a reply's size: JOB_CREATED and ERROR carry a
	// job handle or a message, never much.
	gearmanMaxReply = 64 << 10
)

var (
	gearmanReq = []byte("\x00REQ")
	gearmanRes = []byte("\x00RES")
)

// appendSubmitJobBG appends a SUBMIT_JOB_BG request.
func appendSubmitJobBG(b []byte, queue string, unique, body []byte) []byte {
	b = append(b, gearmanReq...)
	b = binary.BigEndian.AppendUint32(b, gearmanSubmitJobBG)
	b = binary.BigEndian.AppendUint32(b, uint32(len(queue)+1+len(unique)+1+len(body)))
	b = append(b, queue...)
	b = append(b, 0)
	b = append(b, unique...)
	b = append(b, 0)
	return append(b, body...)
}

// Pipelining: requests are written in chunks and the chunk's replies read
// before the next one, so neither side's socket buffer has to hold more
// than a chunk and a slow job server cannot deadlock the exchange.
const (
	gearmanChunkJobs  = 256
	gearmanChunkBytes = 256 << 10
)

// Name is "gearman".
func (g *Gearman) Name() string { return "gearman" }

// Write submits items in order. On a broken connection it connects again
// once, to the first server of the list that answers, and resends what
// was not confirmed; then it gives up with the items not confirmed left
// to the next sink.
func (g *Gearman) Write(items []Item) (int, error) {
	done := 0
	retried := false
	for done < len(items) {
		if err := g.connect(); err != nil {
			return done, err
		}
		n, err := g.submit(items[done:])
		done += n
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrGearmanIO) {
			return done, err
		}
		g.closeConn()
		if retried {
			// A server that accepts but never answers (hung, or its host
			// gone behind a proxy) would otherwise cost two timeouts per
			// batch: back off as when none can be dialled.
			g.retry.failed()
			g.lastErr = err
			return done, err
		}
		retried = true
	}
	return done, nil
}

// connect dials the servers in order until one answers. When none does,
// the next attempts wait for a back-off that doubles up to 5 s, so a job
// server that is down costs one round of dials per interval, not one per
// batch.
func (g *Gearman) connect() error {
	if g.conn != nil {
		return nil
	}
	if g.retry.left() > 0 {
		return fmt.Errorf("%w: %v", ErrGearmanBackoff, g.lastErr)
	}
	var why []string
	for _, addr := range g.servers {
		c, err := net.DialTimeout("tcp", addr, g.timeout)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		g.conn, g.addr = c, addr
		g.retry.succeeded()
		if g.rd == nil {
			g.rd = bufio.NewReaderSize(c, 4096)
		} else {
			g.rd.Reset(c)
		}
		return nil
	}
	g.retry.failed()
	g.lastErr = fmt.Errorf("%w: %s", ErrGearmanUnreachable, strings.Join(why, "; "))
	return g.lastErr
}

func (g *Gearman) closeConn() {
	if g.conn != nil {
		g.conn.Close()
		g.conn = nil
	}
}

// submit writes items in pipelined chunks and returns how many the server
// confirmed. Errors of the connection wrap ErrGearmanIO.
func (g *Gearman) submit(items []Item) (int, error) {
	done := 0
	for done < len(items) {
		g.buf = g.buf[:0]
		n := 0
		for done+n < len(items) && n < gearmanChunkJobs && len(g.buf) < gearmanChunkBytes {
			g.plain = AppendGearmanResult(g.plain[:0], items[done+n])
			g.seq++
			g.uniq = strconv.AppendUint(g.uniq[:g.uniqLen], g.seq, 10)
			// The body is sealed straight into the request, whose size is
			// then set to what it came to.
			start := len(g.buf)
			g.buf = appendSubmitJobBG(g.buf, g.queue, g.uniq, nil)
			g.buf, g.plain = appendSealed(g.buf, g.block, g.plain)
			binary.BigEndian.PutUint32(g.buf[start+8:], uint32(len(g.buf)-start-gearmanHeaderLen))
			n++
		}
		g.conn.SetWriteDeadline(time.Now().Add(g.timeout))
		if _, err := g.conn.Write(g.buf); err != nil {
			return done, fmt.Errorf("%w: %s: writing: %w", ErrGearmanIO, g.addr, err)
		}
		g.conn.SetReadDeadline(time.Now().Add(g.timeout))
		var refused error
		for i := 0; i < n; i++ {
			typ, arg, err := g.readReply()
			if err != nil {
				return done, err
			}
			switch {
			case typ == gearmanJobCreated && refused == nil:
				done++
			case typ == gearmanJobCreated:
			case typ == gearmanError:
				// The jobs after this one in the chunk may be queued, but
				// the caller passes all of them to the fallback: a
				// result twice rather than none. The replies are read to
				// keep the connection usable.
				if refused == nil {
					code, text, _ := bytes.Cut(arg, []byte{0})
					refused = fmt.Errorf("%w: %s: %s: %s", ErrGearmanRefused, g.addr, code, text)
				}
			default:
				g.closeConn()
				return done, fmt.Errorf("%w: %s: reply type %d to SUBMIT_JOB_BG", ErrGearmanProtocol, g.addr, typ)
			}
		}
		if refused != nil {
			return done, refused
		}
	}
	return done, nil
}

// readReply reads one response packet, its data valid until the next
// call. A reply that is not a Gearman
// response closes the connection: the stream cannot be trusted after it.
func (g *Gearman) readReply() (uint32, []byte, error) {
	var h [gearmanHeaderLen]byte
	if _, err := io.ReadFull(g.rd, h[:]); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: reading reply: %w", ErrGearmanIO, g.addr, err)
	}
	typ := binary.BigEndian.Uint32(h[4:])
	size := binary.BigEndian.Uint32(h[8:])
	if !bytes.Equal(h[:4], gearmanRes) || size > gearmanMaxReply {
		g.closeConn()
		return 0, nil, fmt.Errorf("%w: %s: not a Gearman response (header %q)", ErrGearmanProtocol, g.addr, h[:])
	}
	if cap(g.reply) < int(size) {
		g.reply = make([]byte, size)
	}
	arg := g.reply[:size]
	if _, err := io.ReadFull(g.rd, arg); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: reading reply: %w", ErrGearmanIO, g.addr, err)
	}
	return typ, arg, nil
}

// Close closes the connection to the job server, if any.
func (g *Gearman) Close() error {
	g.closeConn()
	return nil
}
