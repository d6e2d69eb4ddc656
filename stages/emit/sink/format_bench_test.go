package sink_test

import (
	"testing"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/sink"
)

// BenchmarkFormatCommandLine: per op one check formatted as the command-file
// line ("[time] PROCESS_SERVICE_CHECK_RESULT;...\n") into a reused buffer,
// as the command file sink batches them.
func BenchmarkFormatCommandLine(b *testing.B) {
	it := sink.Item{Time: time.Now().Unix(), Result: codec.Result{ReturnCode: 1, Host: "bench-host-01.example.com",
		Service: "check_disk /var", Output: "DISK WARNING - free space: /var 1234 MB (12% inode=90%)|/var=9000MB;8000;9000;0;10240"}}
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = sink.AppendCommand(buf[:0], it)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkFormatCommandLineBatch: 64 checks formatted into one buffer per
// op (one write of the command file); ns/op divided by 64 is per check.
func BenchmarkFormatCommandLineBatch(b *testing.B) {
	items := make([]sink.Item, 64)
	for i := range items {
		items[i] = sink.Item{Time: time.Now().Unix(), Result: codec.Result{ReturnCode: int16(i % 4), Host: "bench-host-01.example.com",
			Service: "check_load", Output: "OK - load average: 0.08, 0.05, 0.35|load1=0.080;15.000;30.000;0;"}}
	}
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, it := range items {
			buf = sink.AppendCommand(buf, it)
		}
	}
}
