package tests

import (
	"fmt"
	"testing"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/icinga2"
	"nsca_fast/stages/emit/sink"
)

// BenchmarkIcinga2Sink measures the Icinga 2 sink posting results into a
// real Icinga 2 on loopback, in batches as the emit stage hands them over:
// what one nsca_fast server can pass on to one Icinga, with the default
// icinga2_max_in_flight=8.
func BenchmarkIcinga2Sink(b *testing.B) {
	const services = 200
	host := Icinga2Host{Name: "bench-host"}
	for i := range services {
		host.Services = append(host.Services, fmt.Sprintf("b%03d", i))
	}
	i2 := startIcinga2(b, host)
	s, err := icinga2.New(icinga2.Config{Options: icinga2.Options{URL: i2.URL(), User: i2.User(), Password: i2.Password(),
		CAFile: i2.CAFile(), VerifyTLS: true, MaxInFlight: 8, Timeout: 10 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	items := make([]sink.Item, 256)
	b.ResetTimer()
	for done := 0; done < b.N; {
		batch := items[:min(len(items), b.N-done)]
		now := time.Now().Unix()
		for i := range batch {
			n := done + i
			batch[i] = sink.Item{Time: now, Result: codec.Result{Host: host.Name, Service: host.Services[n%services],
				ReturnCode: int16(n % 4), Output: fmt.Sprintf("bench %d|n=%d", n, n)}}
		}
		n, err := s.Write(batch)
		if err != nil || n != len(batch) {
			b.Fatalf("Write = %d of %d: %v", n, len(batch), err)
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
}
