package counters

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"
)

// Arena is memory a Stats keeps its counters in, laid out so that another
// process mapping the same memory reads them while this one counts: a
// worker's counters, which its supervisor reads with no report in
// between, and still has, to the last increment, after the worker was
// killed. Reports after each batch cost a worker at a trickle a tenth of
// its CPU and still left a killed worker's last millisecond uncounted.
//
// Its layout, in 64-bit words: the header (the layout's fingerprint and
// how many entries are whole), the Cells, then the families by key, an
// entry each, appended as keys appear: a word with the family's index in
// statsKeyed and the key's length, the key padded to whole words, and the
// counter. The writer raises the count after an entry's words, so a
// reader never sees half a key. The fingerprint (Layout) is written once
// the arena is taken: a reader built from other source finds another one
// and reads nothing.
//
// One Stats writes an arena (NewStatsIn); any number read it (ReadArena).
// Every access to its words is atomic.
type Arena struct {
	words []uint64
	taken atomic.Bool
	next  int  // the first free word; under the writing Stats' mu
	full  bool // a key found no room, and is counted on the heap
}

// Header words.
const (
	arenaLayout  = 0
	arenaEntries = 1
	arenaHeader  = 2
	wordBytes    = 8
	// maxArenaKey bounds a key kept in an arena; a longer one is counted
	// on the heap, as are keys past a full arena.
	maxArenaKey = 1024
)

// cellsWords is the size of Cells in words.
const cellsWords = (int(unsafe.Sizeof(Cells{})) + wordBytes - 1) / wordBytes

// Layout fingerprints Cells and the families by key, as this binary lays
// them out in an arena; never 0. Set at init, after the table.
var Layout uint64

// layout computes Layout.
func layout() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "arena/1 %d;", len(LatencyBounds))
	for i := range cellsType.NumField() {
		f := cellsType.Field(i)
		fmt.Fprintf(h, "%s %d %s %d;", f.Name, f.Offset, f.Type, f.Type.Size())
	}
	for _, r := range statsKeyed {
		fmt.Fprintf(h, "%s;", r.field)
	}
	return h.Sum64() | 1
}

// ArenaWords is the least size of an arena's memory, in words, for its
// Cells; keys take more.
const ArenaWords = arenaHeader + cellsWords

// NewArena returns an arena in words, which must be zeroed memory (a new
// mapping) and 8-byte aligned.
func NewArena(words []uint64) *Arena {
	return &Arena{words: words, next: arenaHeader + cellsWords}
}

// take returns the arena's Cells for the one Stats that writes it, and nil
// when a is nil, too small or already taken.
func (a *Arena) take() *Cells {
	if a == nil || len(a.words) < ArenaWords || !a.taken.CompareAndSwap(false, true) {
		return nil
	}
	atomic.StoreUint64(&a.words[arenaLayout], Layout)
	return cellsAt(a.words)
}

// Taken reports whether a Stats keeps its counters in a.
func (a *Arena) Taken() bool { return a != nil && a.taken.Load() }

// cellsAt is the Cells in an arena's words.
func cellsAt(words []uint64) *Cells { return (*Cells)(unsafe.Pointer(&words[arenaHeader])) }

// counter makes key's counter in the family of the row with field: in
// the arena while it has room, else (and without an arena) on the heap.
func (a *Arena) counter(field, key string) *atomic.Uint64 {
	if a == nil || a.full || len(key) > maxArenaKey {
		return new(atomic.Uint64)
	}
	family := slices.IndexFunc(statsKeyed, func(r *row) bool { return r.field == field })
	keyWords := (len(key) + wordBytes - 1) / wordBytes
	at, end := a.next, a.next+1+keyWords+1
	if family < 0 || end > len(a.words) {
		a.full = true
		return new(atomic.Uint64)
	}
	atomic.StoreUint64(&a.words[at], uint64(family)<<32|uint64(len(key)))
	for i := range keyWords {
		var w [wordBytes]byte
		copy(w[:], key[i*wordBytes:])
		atomic.StoreUint64(&a.words[at+1+i], *(*uint64)(unsafe.Pointer(&w)))
	}
	a.next = end
	atomic.AddUint64(&a.words[arenaEntries], 1)
	return (*atomic.Uint64)(unsafe.Pointer(&a.words[end-1]))
}

// ReadArena copies the counters another process keeps in words (an
// Arena's memory) into snap and reports whether it found them: their
// writer laid them out as this binary does. It sets snap's scalars and
// latency, and, of its families by key, the keys the arena holds, so
// that snap can start as the writer's last report, whose gauges the arena
// does not hold and whose keys counted on the heap it adds.
func ReadArena(words []uint64, snap *Snapshot) bool {
	if len(words) < ArenaWords || atomic.LoadUint64(&words[arenaLayout]) != Layout {
		return false
	}
	cellsAt(words).snapshotInto(snap)
	to := reflect.ValueOf(snap).Elem()
	entries := atomic.LoadUint64(&words[arenaEntries])
	at := ArenaWords
	for range entries {
		head := atomic.LoadUint64(&words[at])
		family, n := int(head>>32), int(uint32(head))
		keyWords := (n + wordBytes - 1) / wordBytes
		if family >= len(statsKeyed) || at+1+keyWords >= len(words) {
			return true // not this layout's entries: keep what was read
		}
		key := make([]byte, keyWords*wordBytes)
		for i := range keyWords {
			*(*uint64)(unsafe.Pointer(&key[i*wordBytes])) = atomic.LoadUint64(&words[at+1+i])
		}
		field := to.Field(statsKeyed[family].snap)
		if field.IsNil() {
			field.Set(reflect.MakeMap(field.Type()))
		}
		v := atomic.LoadUint64(&words[at+1+keyWords])
		field.SetMapIndex(reflect.ValueOf(string(key[:n])), reflect.ValueOf(v))
		at += 1 + keyWords + 1
	}
	return true
}
