package sink

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/emit/dialect"
)

// errPartialLine is returned when a write to a regular file stopped inside
// a line and the partial line could not be cut off again: the next line
// would be glued onto it.
var errPartialLine = errors.New("sink: a partial line is left in the file")

// lineBuf is a batch of command lines in one buffer with the offset where
// each line ends, so that a write cut short (a full disk) can be accounted
// line by line.
type lineBuf struct {
	b    []byte
	ends []int
	// dialect escapes the outputs; lossy holds, in order, the indices of
	// the lines written in a lossy form, so that only those delivered are
	// counted (usually none: it stays empty and costs nothing).
	dialect dialect.Dialect
	lossy   []int
}

func (l *lineBuf) reset() { l.b, l.ends, l.lossy = l.b[:0], l.ends[:0], l.lossy[:0] }

// add appends the command line of it.
func (l *lineBuf) add(it Item) {
	var lossy bool
	l.b, lossy = AppendCommandIn(l.b, it, l.dialect)
	if lossy {
		l.lossy = append(l.lossy, len(l.ends))
	}
	l.ends = append(l.ends, len(l.b))
}

// dropLast takes back the last line added.
func (l *lineBuf) dropLast() {
	l.ends = l.ends[:len(l.ends)-1]
	if n := len(l.lossy); n > 0 && l.lossy[n-1] == len(l.ends) {
		l.lossy = l.lossy[:n-1]
	}
	l.b = l.b[:l.end(len(l.ends))]
}

// lossyIn is how many of the first n lines were written in a lossy form.
func (l *lineBuf) lossyIn(n int) int { return sort.SearchInts(l.lossy, n) }

// end is where the first n lines end.
func (l *lineBuf) end(n int) int {
	if n == 0 {
		return 0
	}
	return l.ends[n-1]
}

// whole is how many lines lie entirely within the first n bytes.
func (l *lineBuf) whole(n int) int { return sort.SearchInts(l.ends, n+1) }

// writeFull writes b to fd, continuing after short writes, and returns how
// many bytes reached the file. A regular file never returns EAGAIN, so this
// is for files, not for the FIFO.
func writeFull(fd int, b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(fd, b[done:])
		if n > 0 {
			done += n
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		return done, err
	}
	return done, nil
}

// keepWholeLines is called after a write of l to the regular file fd got
// only n bytes into the file. It returns how many lines are in the file
// whole, and cuts off the part of a line that follows them, so that the
// file holds exactly those lines and the next write starts a fresh line
// instead of gluing itself onto half a result. The caller must hold off
// other writers (flock) between the write and this call.
func keepWholeLines(fd int, l *lineBuf, n int) (int, error) {
	lines := l.whole(n)
	partial := n - l.end(lines)
	if partial == 0 {
		return lines, nil
	}
	pos, err := unix.Seek(fd, 0, io.SeekCurrent)
	if err != nil {
		return lines, fmt.Errorf("%w: %w", errPartialLine, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return lines, fmt.Errorf("%w: %w", errPartialLine, err)
	}
	// Only the end of the file may be cut: a write that overwrote lines in
	// the middle (a command file opened without append_to_file) has more
	// lines after it that are not ours.
	if pos != st.Size {
		return lines, fmt.Errorf("%w: %d bytes at offset %d, not at the end of the file", errPartialLine, partial, pos-int64(partial))
	}
	keep := pos - int64(partial)
	for {
		err = unix.Ftruncate(fd, keep)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return lines, fmt.Errorf("%w: truncate to %d: %w", errPartialLine, keep, err)
	}
	if _, err := unix.Seek(fd, keep, io.SeekStart); err != nil {
		return lines, fmt.Errorf("%w: %w", errPartialLine, err)
	}
	return lines, nil
}

// writeLines writes l to the regular file fd and returns how many whole
// lines are now in the file; after an error no partial line is left (or
// errPartialLine says why one is).
func writeLines(fd int, l *lineBuf) (int, error) {
	n, err := writeFull(fd, l.b)
	if err == nil {
		return len(l.ends), nil
	}
	lines, terr := keepWholeLines(fd, l, n)
	return lines, errors.Join(err, terr)
}
