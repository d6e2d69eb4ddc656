package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrRunning says another daemon holds the pid file.
var ErrRunning = errors.New("proc: already running")

// PidFile is a pid file held with an exclusive lock for the daemon's life:
// a second daemon cannot take it, and a stale file left by a crash (no
// lock) is simply taken over.
type PidFile struct {
	path string
	f    *os.File
}

// AcquirePidFile locks path and writes the current pid into it.
func AcquirePidFile(path string) (*PidFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proc: pid_file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		return nil, fmt.Errorf("%w: pid_file %s is held by pid %s; stop that daemon first", ErrRunning, path, strings.TrimSpace(string(b[:n])))
	}
	p := &PidFile{path: path, f: f}
	if err := p.Rewrite(); err != nil {
		p.Remove()
		return nil, err
	}
	return p, nil
}

// Rewrite writes the current pid, after the process has detached.
func (p *PidFile) Rewrite() error {
	if err := p.f.Truncate(0); err != nil {
		return fmt.Errorf("proc: pid_file: %w", err)
	}
	if _, err := p.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return fmt.Errorf("proc: pid_file: %w", err)
	}
	return nil
}

// Remove deletes the pid file and releases the lock.
func (p *PidFile) Remove() {
	if p == nil {
		return
	}
	os.Remove(p.path)
	p.f.Close()
}
