package sink

import (
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"
)

// isResultName reports whether name is a result file the core will pick
// up: "c" and six more characters, the shape of mkstemp's cXXXXXX.
func isResultName(name string) bool {
	return len(name) == 7 && name[0] == 'c'
}

// dirCount keeps the number of unprocessed result files in the spool
// directory with inotify, so that check_result_path_max_files costs a few
// events per file instead of a directory listing per result. A directory
// that disappears, is replaced or is unmounted is noticed and watched again.
type dirCount struct {
	dir string

	mu    sync.Mutex
	count int
	ok    bool // false while the directory cannot be watched
	// ours holds the files this process wrote and counted at once, whose
	// inotify event is still to come; the event must not count them again.
	ours map[string]bool
}

// watchDir starts counting the result files in dir.
func watchDir(dir string) *dirCount {
	d := &dirCount{dir: dir}
	go d.run()
	return d
}

// Files returns the number of unprocessed result files, and false while the
// directory is not being watched (the caller treats that as full).
func (d *dirCount) Files() (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, d.ok
}

func (d *dirCount) set(n int, ok bool) {
	d.mu.Lock()
	d.count, d.ok = n, ok
	d.ours = nil
	d.mu.Unlock()
}

// wrote counts a result file this process is publishing, without waiting
// for its event, so that a burst cannot overshoot the cap. A nil dirCount
// (no cap) counts nothing.
func (d *dirCount) wrote(name string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.ours == nil {
		d.ours = map[string]bool{}
	}
	d.ours[name] = true
	d.count++
	d.mu.Unlock()
}

// unwrote takes back wrote for a file that could not be published.
func (d *dirCount) unwrote(name string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.ours[name] {
		delete(d.ours, name)
		d.count = max(d.count-1, 0)
	}
	d.mu.Unlock()
}

// appeared and vanished apply an inotify event for a result file.
func (d *dirCount) appeared(name string) {
	d.mu.Lock()
	if d.ours[name] {
		delete(d.ours, name)
	} else {
		d.count++
	}
	d.mu.Unlock()
}

func (d *dirCount) vanished(name string) {
	d.mu.Lock()
	delete(d.ours, name)
	d.count = max(d.count-1, 0)
	d.mu.Unlock()
}

// rescan counts by listing the directory: at start, after a re-watch, and
// when the kernel's event queue overflowed.
func (d *dirCount) rescan() bool {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		d.set(0, false)
		return false
	}
	n := 0
	for _, e := range entries {
		if isResultName(e.Name()) {
			n++
		}
	}
	d.set(n, true)
	return true
}

const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_UNMOUNT | unix.IN_ONLYDIR

func (d *dirCount) run() {
	for {
		d.watchOnce()
		time.Sleep(time.Second)
	}
}

// watchOnce watches the directory until it goes away.
func (d *dirCount) watchOnce() {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		glog.Errorf("sink: inotify: %v", err)
		d.set(0, false)
		return
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, d.dir, watchMask); err != nil {
		d.set(0, false)
		return
	}
	var watched unix.Stat_t
	if unix.Stat(d.dir, &watched) != nil || !d.rescan() {
		return
	}
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if n, _ := unix.Poll(fds, 2000); n == 0 {
			// No event for a while: make sure the path still names the
			// directory we watch; a file system mounted over it, or a
			// directory renamed into its place, sends us no event.
			var now unix.Stat_t
			if unix.Stat(d.dir, &now) != nil || now.Dev != watched.Dev || now.Ino != watched.Ino {
				glog.Warningf("sink: check_result_path %s was replaced or remounted; watching it again", d.dir)
				d.set(0, false)
				return
			}
			continue
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil || n <= 0 {
			d.set(0, false)
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				d.rescan()
			case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT|unix.IN_IGNORED) != 0:
				glog.Warningf("sink: check_result_path %s went away; watching for it to come back", d.dir)
				d.set(0, false)
				return
			default:
				name := unix.ByteSliceToString(nameBytes)
				if !isResultName(name) {
					continue
				}
				if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
					d.appeared(name)
				} else {
					d.vanished(name)
				}
			}
		}
	}
}
