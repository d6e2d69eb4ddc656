package cipher

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkDecrypt decrypts one 4304-byte packet per op, with the State
// running on as on a long connection:
// BenchmarkDecrypt/<method>-<name>/<engine>. Without cgo the libmcrypt
// sub-benchmarks are skipped. Besides ns/op (wall time) it reports
// cpu-ns/op, the CPU time of the benchmark's thread, which other load on a
// shared machine inflates far less.
func BenchmarkDecrypt(b *testing.B) {
	for _, s := range natives {
		b.Run(fmt.Sprintf("%d-%s", s.method, s.algorithm), func(b *testing.B) {
			for _, engine := range []string{EngineLibmcrypt, EngineNative} {
				b.Run(engine, func(b *testing.B) { benchDecrypt(b, engine, s.method, s.algorithm) })
			}
			if s.method == 14 && useAESNI {
				b.Run("native-crypto-aes", func(b *testing.B) {
					useAESNI = false
					defer func() { useAESNI = true }()
					benchDecrypt(b, EngineNative, s.method, s.algorithm)
				})
			}
		})
	}
}

func benchDecrypt(b *testing.B, engine string, method int, algorithm string) {
	e, err := New(engine, method, algorithm, []byte("bench-password"))
	if err != nil {
		b.Skip(err)
	}
	k, err := e.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	r := newRand("bench")
	var st State
	st.Start(e, randBytes(r, 128))
	pkt := randBytes(r, bigPacket)
	b.SetBytes(bigPacket)
	b.ReportAllocs()
	runtime.LockOSThread() // the thread whose CPU time is counted; cgo calls run on it too
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	for b.Loop() {
		k.Decrypt(&st, pkt)
	}
	b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// threadCPU is the CPU time the calling OS thread has used, in ns.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

// BenchmarkNewKey is the key schedule, paid per connection in
// decryption_mode 0 and per decrypt goroutine in mode 1.
func BenchmarkNewKey(b *testing.B) {
	for _, s := range natives {
		for _, engine := range []string{EngineLibmcrypt, EngineNative} {
			b.Run(fmt.Sprintf("%d-%s/%s", s.method, s.algorithm, engine), func(b *testing.B) {
				e, err := New(engine, s.method, s.algorithm, []byte("bench-password"))
				if err != nil {
					b.Skip(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					k, err := e.NewKey()
					if err != nil {
						b.Fatal(err)
					}
					k.Close()
				}
			})
		}
	}
}
