package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Pending tells, without opening the queue in dir, whether dir holds a
// queue at all (an ack or a segment file) and how many bytes of its
// segments are not acknowledged yet. It reads the ack file and the segment
// sizes only: no lock is taken, so a queue another process has open may be
// asked, and no record is read, so the answer is quick whatever the size.
// Damaged bytes count as pending: zero means nothing is left, more means
// something may be.
func Pending(dir string) (bytes int64, found bool, err error) {
	ab, err := os.ReadFile(filepath.Join(dir, ackName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, false, fmt.Errorf("queue: %w", err)
	}
	found = err == nil
	ack, haveAck := bestAck(ab)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, false, fmt.Errorf("queue: %w", err)
	}
	for _, e := range entries {
		id, isSeg := parseSegName(e.Name())
		if !isSeg || !e.Type().IsRegular() {
			continue
		}
		found = true
		info, err := e.Info()
		if err != nil {
			return 0, found, fmt.Errorf("queue: %w", err)
		}
		from := int64(segHeaderSize)
		switch {
		case haveAck && id < ack.seg:
			continue
		case haveAck && id == ack.seg:
			from = max(from, ack.off)
		}
		bytes += max(0, info.Size()-from)
	}
	return bytes, found, nil
}
