package cipher

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkDecryptCPU is BenchmarkDecrypt's cpu-ns/op for both engines in one
// loop, for a shared, noisy machine: each op decrypts one 4304-byte packet
// with libmcrypt and then the same with the native engine, on one locked
// thread, counting the thread's CPU time for each, so that a change of load
// between two sub-benchmarks (the neighbours' cache and core sharing) does
// not enter the ratio. It reports
// libmcrypt-cpu-ns/op, native-cpu-ns/op and native/libmcrypt:
// BenchmarkDecryptCPU/<method>-<name>. Without cgo it is skipped.
func BenchmarkDecryptCPU(b *testing.B) {
	for _, s := range referenced() {
		b.Run(fmt.Sprintf("%d-%s", s.method, s.algorithm), func(b *testing.B) {
			var engines [2]Engine // libmcrypt, native
			for i, engine := range []string{EngineLibmcrypt, EngineNative} {
				e, err := New(engine, s.method, s.algorithm, []byte("bench-password"))
				if err != nil {
					b.Skip(err)
				}
				engines[i] = e
			}
			r := newRand("bench cpu")
			iv := randBytes(r, 128)
			var keys [2]Key
			var states [2]State
			for i, e := range engines {
				k, err := e.NewKey()
				if err != nil {
					b.Fatal(err)
				}
				defer k.Close()
				keys[i] = k
				states[i].Start(e, iv)
			}
			pkt := randBytes(r, bigPacket)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var spent [2]int64 // ns
			b.SetBytes(bigPacket)
			for b.Loop() {
				for i := range keys {
					t0 := threadCPU(b)
					keys[i].Decrypt(&states[i], pkt)
					spent[i] += threadCPU(b) - t0
				}
			}
			lib := float64(spent[0]) / float64(b.N)
			native := float64(spent[1]) / float64(b.N)
			b.ReportMetric(lib, "libmcrypt-cpu-ns/op")
			b.ReportMetric(native, "native-cpu-ns/op")
			b.ReportMetric(native/lib, "native/libmcrypt")
		})
	}
}
