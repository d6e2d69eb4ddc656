package cipher

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkDecrypt decrypts one packet per op (4304 bytes, send_nsca's, and
// 720, the legacy size), with the State running on as on a long connection:
// BenchmarkDecrypt/<method>-<name>/<size>/<engine>, the engines being
// libmcrypt, native, and the native fallbacks where the native engine has
// an assembly path (AES without AES-NI; DES in AVX2 where native is
// AVX-512, and portable). Without cgo the libmcrypt sub-benchmarks are
// skipped. Besides ns/op (wall time) it reports cpu-ns/op, the CPU time of
// the benchmark's thread, which other load on a shared machine inflates far
// less.
func BenchmarkDecrypt(b *testing.B) {
	for _, s := range natives {
		b.Run(fmt.Sprintf("%d-%s", s.method, s.algorithm), func(b *testing.B) {
			for _, size := range []int{bigPacket, smallPacket} {
				b.Run(fmt.Sprint(size), func(b *testing.B) {
					for _, engine := range []string{EngineLibmcrypt, EngineNative} {
						b.Run(engine, func(b *testing.B) { benchDecrypt(b, engine, s.method, s.algorithm, size) })
					}
					if s.method == 14 && useAESNI {
						b.Run("native-crypto-aes", func(b *testing.B) {
							useAESNI = false
							defer func() { useAESNI = true }()
							benchDecrypt(b, EngineNative, s.method, s.algorithm, size)
						})
					}
					if s.method == 2 || s.method == 3 {
						for p := desbsBest - 1; p >= desbsPortable; p-- {
							b.Run("native-"+desbsPathNames[p], func(b *testing.B) {
								defer func(saved int) { desbsPath = saved }(desbsPath)
								desbsPath = p
								benchDecrypt(b, EngineNative, s.method, s.algorithm, size)
							})
						}
					}
				})
			}
		})
	}
}

func benchDecrypt(b *testing.B, engine string, method int, algorithm string, size int) {
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
	pkt := randBytes(r, size)
	b.SetBytes(int64(size))
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
