package sink

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/emit/dialect"
)

// errSpool wraps every failure to deliver a spool file.
var errSpool = errors.New("sink: spool")

// Spool writes one check_result_path file per result, as stock does: a
// cXXXXXX file in the core's format followed by an empty cXXXXXX.ok. The
// core only reads files whose .ok exists, and we write each file under a
// temporary name and rename it into place, so the core can never read a
// half-written result.
type Spool struct {
	Dir  string
	Mode uint32 // permissions of the files, stock: 0600
	buf  []byte

	// maxFiles caps the unprocessed result files (check_result_path_max_files),
	// so a stopped core cannot make us fill the disk. At the cap, results
	// wait in queue, at most queueLimit of them.
	maxFiles   int
	queueLimit int
	queue      []Item
	files      *dirCount

	// dialect escapes the outputs; lossy counts the files delivered with
	// an output in a lossy form.
	dialect dialect.Dialect
	lossy   *atomic.Uint64
}

// UseDialect makes the spool escape outputs in d (command_file_dialect) and
// count in lossy the results delivered in a lossy form.
func (s *Spool) UseDialect(d dialect.Dialect, lossy *atomic.Uint64) { s.dialect, s.lossy = d, lossy }

// errSpoolFull is returned for results refused because the spool is at
// check_result_path_max_files and its waiting queue is full.
var errSpoolFull = errors.New("sink: spool at check_result_path_max_files and its queue is full")

// NewSpool returns a spool sink writing into dir.
func NewSpool(dir string, mode uint32) *Spool {
	if mode == 0 {
		mode = 0o600
	}
	return &Spool{Dir: dir, Mode: mode}
}

// Capped makes the spool keep at most maxFiles unprocessed result files
// and let up to queueLimit results wait for the core to take some.
func (s *Spool) Capped(maxFiles, queueLimit int) *Spool {
	if maxFiles > 0 {
		s.maxFiles, s.queueLimit = maxFiles, queueLimit
		s.files = watchDir(s.Dir)
	}
	return s
}

// room returns how many files may be written now.
func (s *Spool) room() int {
	if s.files == nil {
		return int(^uint(0) >> 1)
	}
	n, ok := s.files.Files()
	if !ok {
		return 0
	}
	return s.maxFiles - n
}

// Abandon empties the waiting queue and returns what was in it, for a
// shutdown that cannot wait for the core any longer.
func (s *Spool) Abandon() []Item {
	q := s.queue
	s.queue = nil
	return q
}

// Queued is the number of results waiting for room in the spool.
func (s *Spool) Queued() int { return len(s.queue) }

// Flush writes waiting results while there is room and returns how many it
// wrote.
func (s *Spool) Flush() (int, error) {
	written := 0
	for len(s.queue) > 0 && s.room() > 0 {
		if err := s.writeOne(s.queue[0]); err != nil {
			return written, err
		}
		s.queue = s.queue[1:]
		written++
	}
	if len(s.queue) == 0 {
		s.queue = nil
	}
	return written, nil
}

// Name identifies the sink in counters and logs.
func (s *Spool) Name() string { return "spool" }

// Location is the spool directory, for log lines.
func (s *Spool) Location() string { return s.Dir }

// Writable checks that a file can be created in the directory, which stock
// verifies at start so that a typo in check_result_path is found at once.
func (s *Spool) Writable() error {
	f, err := os.CreateTemp(s.Dir, "nsca.test.")
	if err != nil {
		return fmt.Errorf("%w: check_result_path %s is not writable: %w", errSpool, s.Dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

const nameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomName returns prefix followed by six characters, the shape mkstemp's
// cXXXXXX has, which is what the core looks for.
func randomName(prefix string) string {
	b := []byte(prefix + "XXXXXX")
	for i := len(prefix); i < len(b); i++ {
		b[i] = nameChars[rand.IntN(len(nameChars))]
	}
	return string(b)
}

// Write creates one file per item, or queues it while the spool is at its
// cap. It returns how many items it took, written or queued, in order.
func (s *Spool) Write(items []Item) (int, error) {
	if s.files == nil {
		for i, it := range items {
			if err := s.writeOne(it); err != nil {
				return i, err
			}
		}
		return len(items), nil
	}
	if _, err := s.Flush(); err != nil {
		return 0, err
	}
	for i, it := range items {
		if len(s.queue) == 0 && s.room() > 0 {
			if err := s.writeOne(it); err != nil {
				return i, err
			}
			continue
		}
		if len(s.queue) >= s.queueLimit {
			return i, fmt.Errorf("%w (%d files, %d waiting)", errSpoolFull, s.maxFiles, len(s.queue))
		}
		s.queue = append(s.queue, it)
	}
	return len(items), nil
}

func (s *Spool) writeOne(it Item) error {
	var lossy bool
	s.buf, lossy = AppendSpoolIn(s.buf[:0], it, s.dialect)
	tmp, err := s.create("t")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(s.buf)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%w: write %s: %w", errSpool, tmp.Name(), errors.Join(werr, cerr))
	}
	final, err := s.publish(tmp.Name())
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}

	ok, err := os.OpenFile(final+".ok", os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(s.Mode))
	if err == nil {
		if err = ok.Close(); err != nil {
			os.Remove(final + ".ok")
		}
	}
	if err != nil {
		// Without its .ok the core never reads the result, and the next sink
		// gets it instead: the file must go, or it is a second copy that a
		// later run (or an operator's touch) would deliver again.
		os.Remove(final)
		s.files.unwrote(filepath.Base(final))
		return fmt.Errorf("%w: create %s.ok: %w", errSpool, final, err)
	}
	if lossy {
		countLossy(s.lossy, 1)
	}
	return nil
}

// create makes a new file with a random name beginning with prefix. The
// temporary prefix "t" is not "c", so the core ignores it.
func (s *Spool) create(prefix string) (*os.File, error) {
	for range 100 {
		f, err := os.OpenFile(filepath.Join(s.Dir, randomName(prefix)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(s.Mode))
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errSpool, err)
		}
		if err := f.Chmod(os.FileMode(s.Mode)); err != nil { // the umask may have taken bits away
			f.Close()
			return nil, fmt.Errorf("%w: %w", errSpool, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: no free file name in %s", errSpool, s.Dir)
}

// publish renames tmp to a fresh cXXXXXX name without replacing an existing
// file, and returns that name.
func (s *Spool) publish(tmp string) (string, error) {
	for range 100 {
		name := randomName("c")
		final := filepath.Join(s.Dir, name)
		// Counted before the rename: the watcher may see the event first.
		s.files.wrote(name)
		err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
		if err != nil {
			s.files.unwrote(name)
		}
		switch err {
		case nil:
			return final, nil
		case unix.EEXIST:
			continue
		case unix.EINVAL, unix.ENOSYS:
			// A file system without RENAME_NOREPLACE: link fails on an existing
			// name just the same.
			s.files.wrote(name)
			if lerr := os.Link(tmp, final); lerr != nil {
				s.files.unwrote(name)
				if errors.Is(lerr, os.ErrExist) {
					continue
				}
				return "", fmt.Errorf("%w: link %s: %w", errSpool, final, lerr)
			}
			os.Remove(tmp)
			return final, nil
		default:
			return "", fmt.Errorf("%w: rename %s: %w", errSpool, tmp, err)
		}
	}
	return "", fmt.Errorf("%w: no free file name in %s", errSpool, s.Dir)
}

// Close has nothing to release: every file is closed once written.
func (s *Spool) Close() error { return nil }

// Dump appends command lines to alternate_dump_file, creating it if needed,
// where stock puts results while the command file is missing. It keeps the
// file open, and opens the path again once it names another file (log
// rotation) or its Reopens asks.
type Dump struct {
	Path string
	// Reopens, when set, asks it to open its path anew (SIGUSR1).
	Reopens *Reopener
	fd      int
	held    heldFile
	// opened is set from opening the file until the first write has
	// looked at its end (endTorn).
	opened bool
	lines  lineBuf
	lossy  *atomic.Uint64
}

// UseDialect makes the dump file escape outputs in d (command_file_dialect),
// so that its lines can be replayed into the same core's command file, and
// count in lossy the results delivered in a lossy form.
func (d *Dump) UseDialect(dl dialect.Dialect, lossy *atomic.Uint64) {
	d.lines.dialect, d.lossy = dl, lossy
}

// NewDump returns a sink appending to path.
func NewDump(path string) *Dump { return &Dump{Path: path, fd: -1} }

// Name identifies the sink in counters and logs.
func (d *Dump) Name() string { return "dump_file" }

// Location is the dump file's path, for log lines.
func (d *Dump) Location() string { return d.Path }

// Write appends the lines for items in one write. On a full disk it
// reports the lines that are in the file whole and cuts off a partial one,
// so counters match the file and no line is glued to the next.
func (d *Dump) Write(items []Item) (int, error) {
	fd, err := d.lock()
	if err != nil {
		return 0, err
	}
	if fd >= 0 {
		defer unix.Flock(fd, unix.LOCK_UN)
	}
	d.lines.reset()
	for _, it := range items {
		d.lines.add(it)
	}
	n, err := writeLines(d.fd, &d.lines)
	countLossy(d.lossy, d.lines.lossyIn(n))
	if err != nil {
		return n, fmt.Errorf("sink: alternate dump file %s: %w", d.Path, err)
	}
	return n, nil
}

// lock opens the file the path names now and locks it, returning the
// descriptor to unlock (-1 when flock failed: the lines are written all the
// same). Several writers append to one dump file (the fallback and the
// overflow of one process, and every worker process): the lock keeps anyone
// from appending between a short write and the cut of its partial line.
// The path is checked under the lock, so that once a rotation has renamed
// the file and then taken its lock (the shipped logrotate snippet does,
// before compressing it), nothing is written to it any more.
func (d *Dump) lock() (int, error) {
	for tries := 0; ; tries++ {
		if d.fd < 0 {
			d.held.opening(d.Reopens)
			fd, err := unix.Open(d.Path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
			if err != nil {
				return -1, fmt.Errorf("sink: alternate dump file %s: %w", d.Path, err)
			}
			d.fd, d.opened = fd, true
			d.held.opened(fd)
		}
		locked := unix.Flock(d.fd, unix.LOCK_EX) == nil
		// A file just opened that is stale already is being rotated again:
		// the lines go to it rather than round this loop for ever.
		if tries > 0 || !d.held.stale(d.Path, d.Reopens) {
			if d.opened && locked {
				d.opened = false
				d.endTorn()
			}
			if !locked {
				return -1, nil
			}
			return d.fd, nil
		}
		if locked {
			unix.Flock(d.fd, unix.LOCK_UN)
		}
		d.Close()
	}
}

// tornLook is how far from its end endTorn looks for a file's last newline.
const tornLook = 64 << 10

// endTorn cuts off the partial last line that a write cut short by a crash
// (kill -9 or the OOM killer during a long write, a power loss) can leave
// at the end of the file: the next line would be glued to it, two results
// read as one (the second lost) by the core or by --replay. It is logged
// with what it held, as keepWholeLines cuts the partial line of a short
// write. A tail longer than tornLook without a newline is ended with one
// instead, so that nothing is cut blindly. Called under the lock, once per
// open.
func (d *Dump) endTorn() {
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size == 0 {
		return
	}
	rfd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(rfd)
	from := max(st.Size-tornLook, 0)
	tail := make([]byte, st.Size-from)
	n, err := unix.Pread(rfd, tail, from)
	if err != nil || int64(n) != st.Size-from || tail[n-1] == '\n' {
		return
	}
	nl := bytes.LastIndexByte(tail, '\n')
	if nl < 0 && from > 0 {
		glog.Warningf("sink: alternate dump file %s ends without a newline, and no newline in its last %d bytes: ended with one, so that the next line stays whole", d.Path, tornLook)
		writeFull(d.fd, []byte{'\n'})
		return
	}
	keep := from + int64(nl+1)
	if err := unix.Ftruncate(d.fd, keep); err != nil {
		glog.Errorf("sink: alternate dump file %s: cutting off the partial last line at offset %d: %v", d.Path, keep, err)
		return
	}
	cut := tail[nl+1:]
	if len(cut) > 200 {
		cut = append(cut[:200:200], "..."...)
	}
	glog.Warningf("sink: alternate dump file %s: cut off a partial last line (%d bytes at offset %d, no result: a write that a crash cut short): %q", d.Path, st.Size-keep, keep, cut)
}

// Close closes the dump file.
func (d *Dump) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}
