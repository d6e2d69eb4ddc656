package replay

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
)

// Errors of Replay.
var (
	// errInput wraps a file that cannot be read as a dump file or a
	// spool directory.
	errInput = errors.New("sink: replay: unreadable input")
	// errNoDestination: the configuration has no destination to
	// replay into other than the input itself.
	errNoDestination = errors.New("sink: replay: no destination configured besides the input " +
		"(command_file, check_result_path, icinga2_api_url, gearman_server)")
	// errUndelivered: some results were not taken by every remote
	// destination within the time allowed.
	errUndelivered = errors.New("sink: replay: results left undelivered")
)

// Report is what Replay did, per input and per destination.
type Report struct {
	// Read is the results found; Skipped the lines or files that hold none
	// (comments, other commands, damage), with a reason each.
	Read    int
	Skipped []string
	// Delivered counts, per destination, the results it took (Icinga 2's
	// refusals for good, such as an unknown object, included: see
	// Refused); Left counts what it had not taken when Replay gave up.
	Delivered, Left, Refused map[string]int
	// Removed is the spool files removed because every destination took
	// their result.
	Removed int
	// FromQueue says the input was a durable queue directory; Acked is
	// how many of its records were acknowledged there (every destination
	// took their result), and QueueRemoved that this emptied it and the
	// directory was removed.
	FromQueue    bool
	Acked        int
	QueueRemoved bool
}

// String is the report's one line.
func (r Report) String() string {
	var parts []string
	for _, name := range replayKeys(r.Delivered, r.Left) {
		parts = append(parts, fmt.Sprintf("%s: delivered=%d refused=%d left=%d", name, r.Delivered[name], r.Refused[name], r.Left[name]))
	}
	read := fmt.Sprintf("read=%d skipped=%d removed_spool_files=%d", r.Read, len(r.Skipped), r.Removed)
	if r.FromQueue {
		read += fmt.Sprintf(" acked_queue_records=%d queue_removed=%t", r.Acked, r.QueueRemoved)
	}
	return read + "; " + strings.Join(parts, "; ")
}

func replayKeys(ms ...map[string]int) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// Patience is how long --replay keeps trying a destination that does
// not take a batch before it gives up and reports what was left.
const Patience = time.Minute

// Options says how Replay goes about it.
type Options struct {
	// Patience is how long a destination that does not take a batch is
	// tried again before Replay gives up on it (Patience).
	Patience time.Duration
	// Progress, when set, is told how far Replay has come on a long
	// replay: after every progressEvery results delivered to a
	// destination, and at least every progressInterval.
	Progress func(Progress)
}

// replayBatch is how many results one write to a destination carries.
const replayBatch = 256

// How often Options.Progress is told, whichever comes first.
const (
	progressEvery    = 10000
	progressInterval = 5 * time.Second
)

// Progress is how far a replay has come: of Total results read so
// far (a durable queue is read a chunk at a time, so its Total grows), how
// many each destination has taken.
type Progress struct {
	Total     int
	Delivered map[string]int
}

// String is the progress line.
func (p Progress) String() string {
	var parts []string
	for _, name := range replayKeys(p.Delivered) {
		parts = append(parts, fmt.Sprintf("%s %d", name, p.Delivered[name]))
	}
	return fmt.Sprintf("%d results read; delivered: %s", p.Total, strings.Join(parts, ", "))
}

// tracker tells Options.Progress how a replay goes, no more often
// than it asks.
type tracker struct {
	opts     Options
	rep      *Report
	total    int
	last     time.Time
	lastSum  int
	sumSoFar int
}

// delivered accounts for n more results taken by a destination.
func (p *tracker) delivered(n int) {
	p.sumSoFar += n
	if p.opts.Progress == nil || p.sumSoFar-p.lastSum < progressEvery && time.Since(p.last) < progressInterval {
		return
	}
	p.last, p.lastSum = time.Now(), p.sumSoFar
	p.opts.Progress(Progress{Total: p.total, Delivered: maps.Clone(p.rep.Delivered)})
}

// Run feeds the results of path, an alternate_dump_file (command lines),
// a check_result_path spool directory written by a fallback, or a durable
// queue directory (of a remote destination the configuration no longer
// has, or of a stopped daemon), to the destinations open returns, once
// path was read (the emit package opens those of a configuration: its
// remote engines without their durable queues, and the local core's
// command_file or check_result_path); Run closes them. Every destination gets every result once, in the input's order. A
// destination that does not take a batch is tried again with a doubling
// wait for up to the patience of opts; then Run stops and reports what
// was left. Spool files whose result every destination took are removed,
// and queue records acknowledged (an emptied queue directory is removed),
// so that a second replay does not send them again; a dump file is left as
// it is, for the operator to remove once the report shows nothing left.
func Run(path string, open func() ([]sink.Sink, error), opts Options) (Report, error) {
	rep := Report{Delivered: map[string]int{}, Left: map[string]int{}, Refused: map[string]int{}}
	items, files, rq, err := readReplayInput(path, &rep)
	if err != nil {
		return rep, err
	}
	defer rq.close()
	sinks, err := open()
	if err != nil {
		return rep, err
	}
	defer func() {
		for _, s := range sinks {
			s.Close()
		}
	}()
	if len(sinks) == 0 {
		return rep, errNoDestination
	}
	prog := &tracker{opts: opts, rep: &rep, last: time.Now()}
	var errs []error
	if rq != nil {
		errs = rq.deliver(sinks, prog, &rep)
	}
	// taken[i] counts the destinations that took items[i].
	taken := make([]int, len(items))
	prog.total += len(items)
	for _, s := range sinks {
		if err := replayInto(s, items, taken, prog, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	for i, f := range files {
		if f != "" && taken[i] == len(sinks) {
			if os.Remove(f) == nil {
				os.Remove(f + ".ok")
				rep.Removed++
			}
		}
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("%w: %w", errUndelivered, errors.Join(errs...))
	}
	return rep, nil
}

// replayInto writes items through s in order, batch by batch.
func replayInto(s sink.Sink, items []sink.Item, taken []int, prog *tracker, rep *Report) error {
	f, refuses := s.(sink.Refuser)
	var refusedBefore uint64
	if refuses {
		refusedBefore = f.Refused()
	}
	defer func() {
		if refuses {
			rep.Refused[s.Name()] += int(f.Refused() - refusedBefore)
		}
	}()
	for start := 0; start < len(items); {
		end := min(start+replayBatch, len(items))
		batch := append([]sink.Item(nil), items[start:end]...)
		idx := make([]int, len(batch))
		for i := range idx {
			idx[i] = start + i
		}
		deadline := time.Now().Add(prog.opts.Patience)
		wait := 250 * time.Millisecond
		for len(batch) > 0 {
			consumed := make([]bool, len(batch))
			var err error
			if m, ok := s.(sink.Marker); ok {
				err = m.WriteMarked(batch, consumed)
			} else {
				var n int
				n, err = s.Write(batch)
				for i := range n {
					consumed[i] = true
				}
			}
			var restB []sink.Item
			var restI []int
			took := 0
			for i, ok := range consumed {
				if ok {
					taken[idx[i]]++
					rep.Delivered[s.Name()]++
					took++
				} else {
					restB, restI = append(restB, batch[i]), append(restI, idx[i])
				}
			}
			batch, idx = restB, restI
			prog.delivered(took)
			if len(batch) == 0 {
				break
			}
			if time.Now().Add(wait).After(deadline) {
				rep.Left[s.Name()] += len(batch) + len(items) - end
				return fmt.Errorf("%s: %w", s.Name(), err)
			}
			time.Sleep(wait)
			wait = min(2*wait, 5*time.Second)
		}
		start = end
	}
	return nil
}

// readReplayInput reads a dump file or a spool directory, or opens a
// durable queue directory (rq, nil for the others; Replay reads it a chunk
// at a time); files[i] is the spool file items[i] came from ("" for a dump
// file).
func readReplayInput(path string, rep *Report) (items []sink.Item, files []string, rq *replayQueue, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", errInput, err)
	}
	if !info.IsDir() {
		items, err = readDump(path, rep)
		return items, make([]string, len(items)), nil, err
	}
	if isQueueDir(path) {
		rq, err = openReplayQueue(path)
		return nil, nil, rq, err
	}
	items, files, err = readSpool(path, rep)
	return items, files, nil, err
}

// readSpool reads the result files of a spool directory; files[i] is the
// one items[i] came from.
func readSpool(path string, rep *Report) (items []sink.Item, files []string, err error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errInput, err)
	}
	type spooled struct {
		it   sink.Item
		file string
	}
	var all []spooled
	for _, e := range entries {
		name := e.Name()
		// The core reads c?????? files that have a .ok beside them; the
		// spool sink writes those, and "t" files only while writing.
		if !strings.HasPrefix(name, "c") || strings.HasSuffix(name, ".ok") || !e.Type().IsRegular() {
			continue
		}
		file := filepath.Join(path, name)
		if _, err := os.Stat(file + ".ok"); err != nil {
			rep.Skipped = append(rep.Skipped, name+": no .ok file")
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			rep.Skipped = append(rep.Skipped, name+": "+err.Error())
			continue
		}
		it, err := parseSpool(string(data))
		if err != nil {
			rep.Skipped = append(rep.Skipped, name+": "+err.Error())
			continue
		}
		all = append(all, spooled{it, file})
	}
	// File names are random: the receipt time orders them, which keeps the
	// results of one service in order to the second.
	sort.SliceStable(all, func(i, j int) bool { return all[i].it.Time < all[j].it.Time })
	for _, s := range all {
		items, files = append(items, s.it), append(files, s.file)
	}
	rep.Read = len(items)
	return items, files, nil
}

// errTornLine is the reason a dump file's last line is skipped when its
// newline is missing.
var errTornLine = errors.New("no newline at its end: a line cut off as it was written (a crash, a full disk, or a copy taken during a write), not delivered")

// readDump reads the command lines of a dump file. Each line it skips (one
// that does not parse, or a torn last line) is reported with the file and
// line number.
func readDump(path string, rep *Report) ([]sink.Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInput, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	// The daemon writes whole lines, so a last line without its newline was
	// cut off: it may still parse, with its output cut short, and must not
	// be delivered as if it were the result sent.
	torn := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if atEOF && adv == len(data) && adv > 0 && data[adv-1] != '\n' {
			torn = true
		}
		return adv, tok, err
	})
	var items []sink.Item
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if torn {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s:%d: %v", path, n, errTornLine))
			continue
		}
		it, err := parseCommand(line)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s:%d: %v", path, n, err))
			continue
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return items, fmt.Errorf("%w: %s: %w", errInput, path, err)
	}
	rep.Read = len(items)
	return items, nil
}

// parseCommand is AppendCommand's inverse:
// "[time] PROCESS_SERVICE_CHECK_RESULT;host;service;code;output" or
// "[time] PROCESS_HOST_CHECK_RESULT;host;code;output".
func parseCommand(line string) (sink.Item, error) {
	rest, ok := strings.CutPrefix(line, "[")
	ts, rest, ok2 := strings.Cut(rest, "] ")
	if !ok || !ok2 {
		return sink.Item{}, errors.New("not an external command line")
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sink.Item{}, fmt.Errorf("bad time %q", ts)
	}
	cmd, args, _ := strings.Cut(rest, ";")
	var r codec.Result
	var code string
	switch cmd {
	case "PROCESS_SERVICE_CHECK_RESULT":
		f := strings.SplitN(args, ";", 4)
		if len(f) != 4 {
			return sink.Item{}, errors.New("too few fields")
		}
		r.Host, r.Service, code, r.Output = f[0], f[1], f[2], f[3]
	case "PROCESS_HOST_CHECK_RESULT":
		f := strings.SplitN(args, ";", 3)
		if len(f) != 3 {
			return sink.Item{}, errors.New("too few fields")
		}
		r.Host, code, r.Output = f[0], f[1], f[2]
	default:
		return sink.Item{}, fmt.Errorf("not a check result: %q", cmd)
	}
	rc, err := strconv.ParseInt(code, 10, 16)
	if err != nil {
		return sink.Item{}, fmt.Errorf("bad return code %q", code)
	}
	r.ReturnCode, r.Output = int16(rc), dialect.Unescape(r.Output)
	r.Timestamp = uint32(t)
	return sink.Item{Result: r, Time: t}, nil
}

// parseSpool is AppendSpool's inverse.
func parseSpool(text string) (sink.Item, error) {
	var it sink.Item
	var haveCode, haveHost bool
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch k {
		case "host_name":
			it.Result.Host, haveHost = v, true
		case "service_description":
			it.Result.Service = v
		case "start_time":
			sec, _, _ := strings.Cut(v, ".")
			t, err := strconv.ParseInt(sec, 10, 64)
			if err != nil {
				return it, fmt.Errorf("bad start_time %q", v)
			}
			it.Time, it.Result.Timestamp = t, uint32(t)
		case "return_code":
			rc, err := strconv.ParseInt(v, 10, 16)
			if err != nil {
				return it, fmt.Errorf("bad return_code %q", v)
			}
			it.Result.ReturnCode, haveCode = int16(rc), true
		case "output":
			it.Result.Output = dialect.Unescape(v)
		}
	}
	if !haveHost || !haveCode {
		return it, errors.New("not a check result file")
	}
	return it, nil
}
