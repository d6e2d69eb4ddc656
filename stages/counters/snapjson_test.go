package counters

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// filledSnapshot sets every field of a Snapshot, found by reflection so
// that a field added later is covered too: counters to distinct values,
// maps to keys that need JSON's escaping beside plain ones.
func filledSnapshot(t *testing.T) Snapshot {
	var s Snapshot
	v := reflect.ValueOf(&s).Elem()
	n := uint64(7)
	next := func() uint64 { n = n*31 + 5; return n }
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Uint64:
			f.SetUint(next())
		case reflect.Int64:
			f.SetInt(-int64(next() % 1000))
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			for _, k := range []string{"sink_failed", "command file", "id\x01\"<&>\\é\xff", ""} {
				val := reflect.New(f.Type().Elem()).Elem()
				switch val.Kind() {
				case reflect.Uint64:
					val.SetUint(next())
				case reflect.Int64:
					val.SetInt(int64(next() % 1000))
				case reflect.Struct:
					val.Set(reflect.ValueOf(DurableQueue{Results: 3, Bytes: 4096, OldestSeconds: 1.5, Replayed: next()}))
				}
				m.SetMapIndex(reflect.ValueOf(k), val)
			}
			f.Set(m)
		case reflect.Struct:
			if f.Type() != reflect.TypeOf(LatencySnapshot{}) {
				t.Fatalf("Snapshot.%s: a struct AppendJSON does not know", v.Type().Field(i).Name)
			}
			f.Set(reflect.ValueOf(LatencySnapshot{Buckets: []uint64{1, 0, next()}, SumNanos: next()}))
		default:
			t.Fatalf("Snapshot.%s: a %s AppendJSON does not know", v.Type().Field(i).Name, f.Kind())
		}
	}
	return s
}

// TestSnapshotAppendJSON: AppendJSON writes the bytes encoding/json writes,
// for a snapshot with every field set, one with none, and one with empty
// maps (null, omitted and {} each where encoding/json puts them).
func TestSnapshotAppendJSON(t *testing.T) {
	full := filledSnapshot(t)
	empty := Snapshot{}
	emptyMaps := Snapshot{Emitted: map[string]uint64{}, SinkDown: map[string]uint64{}, Queues: map[string]int64{}, Latency: LatencySnapshot{Buckets: []uint64{}}}
	for name, s := range map[string]Snapshot{"full": full, "zero": empty, "empty maps": emptyMaps} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := s.AppendJSON([]byte("prefix "))
		if !bytes.Equal(got, append([]byte("prefix "), want...)) {
			t.Errorf("%s: AppendJSON wrote\n%s\nencoding/json\n%s", name, got, want)
			continue
		}
		var back Snapshot
		if err := json.Unmarshal(got[len("prefix "):], &back); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// BenchmarkSnapshotJSON: what a worker's report costs to encode, by
// encoding/json and by AppendJSON.
func BenchmarkSnapshotJSON(b *testing.B) {
	stats := NewStats()
	for _, r := range DropReasons {
		stats.Dropped(r).Add(1)
	}
	stats.Emitted("command_file").Add(10)
	stats.FrontReceived("nsca").Add(10)
	s := stats.Snapshot()
	s.Queues = map[string]int64{"accept_to_read": 0, "read_to_decrypt": 0, "to_validate": 0, "validate_to_emit": 0, "destination_main": 0}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(s)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			buf = s.AppendJSON(buf[:0])
		}
	})
}

// TestSnapshotIntoReplaces: a snapshot taken into one that held other
// counters (keys the stats no longer have, more latency buckets) equals a
// fresh one.
func TestSnapshotIntoReplaces(t *testing.T) {
	s := knownStats()
	dirty := filledSnapshot(t)
	dirty.Latency.Buckets = make([]uint64, 100)
	s.SnapshotInto(&dirty)
	dirty.Queues = nil // not the Stats' to fill
	if fresh := s.Snapshot(); !reflect.DeepEqual(dirty, fresh) {
		t.Errorf("SnapshotInto over another snapshot gave\n%+v\nwant\n%+v", dirty, fresh)
	}
}
