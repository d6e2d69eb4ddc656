package validate

import (
	"context"
	"testing"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// BenchmarkValidateStage: per op one decoded check result through every
// rule of the default configuration into a sink.Item.
func BenchmarkValidateStage(b *testing.B) {
	env := stage.Env{Stats: counters.NewStats(), Log: counters.NewRateLog(time.Minute, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := make(chan intake.Submission, 64)
	out := make(chan sink.Item, 64)
	if err := Start(ctx, in, out, Config{Goroutines: 1, Depth: 64, MaxPacketAge: 30 * time.Second}, env); err != nil {
		b.Fatal(err)
	}
	src := &intake.Source{ID: 1, Front: intake.Front("nsca")}
	r := codec.Result{Host: "web01", Service: "check_disk /var", Output: "DISK OK"}
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		now := time.Now().Unix()
		for range b.N {
			in <- intake.Submission{Source: src, Result: r, Time: now, Sent: now, HasSent: true}
		}
		close(in)
	}()
	n := 0
	for it := range out {
		if n == 0 && it.Result.Service != "check_disk /var" {
			b.Fatalf("validated %+v", it.Result)
		}
		n++
	}
	b.StopTimer()
	if n != b.N {
		b.Fatalf("%d items out of %d", n, b.N)
	}
}
