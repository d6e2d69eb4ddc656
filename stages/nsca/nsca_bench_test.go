package nsca

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// Benchmarks of the hot stages, one 4304-byte check per op, each stage run
// by its Start function with one goroutine, as the pipeline runs it, and fed
// and drained by the benchmark: read (a socketpair feeding the read stage),
// decrypt (XOR), validate. The command-file line is benchmarked in
// stages/emit/sink. Allocations per op include the stage's goroutines.
//
//	go test -run '^$' -bench 'Stage' -benchmem ./stages ./stages/emit/...

const benchPassword = "bench-password"

func benchEnv() stage.Env {
	return stage.Env{Stats: counters.NewStats(), Log: counters.NewRateLog(time.Second, 5)}
}

// benchPlain is a valid plaintext send_nsca packet.
func benchPlain(tb testing.TB) []byte {
	pkt := make([]byte, codec.Size)
	codec.Encode(pkt, codec.Result{Timestamp: uint32(time.Now().Unix()), ReturnCode: 1, Host: "bench-host-01.example.com",
		Service: "check_disk /var", Output: "DISK WARNING - free space: /var 1234 MB (12% inode=90%)|/var=9000MB;8000;9000;0;10240"})
	if err := codec.Check(pkt); err != nil {
		tb.Fatal(err)
	}
	return pkt
}

// benchXOR is benchPlain encrypted with XOR for iv, as send_nsca sends it.
func benchXOR(tb testing.TB, iv []byte) []byte {
	pkt := benchPlain(tb)
	codec.XOR(pkt, iv, []byte(benchPassword), 0)
	return pkt
}

// BenchmarkReadStage: one connection (a socketpair) with a writer sending
// packets as fast as the stage takes them; per op one 4304-byte packet
// read by the stage's epoll loop and handed on as chunks. The consumer
// gives the bytes back to the read budget as the decrypt stage does.
func BenchmarkReadStage(b *testing.B) {
	env := benchEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := make(chan *clientConn, 1)
	out := newChunkShards(1, 128)
	if err := startRead(ctx, in, out, readConfig{Readers: 1, Timeout: time.Hour, Grace: time.Second}, env); err != nil {
		b.Fatal(err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := unix.SetNonblock(sp[1], false); err != nil {
		b.Fatal(err)
	}
	c := &clientConn{connIdentity: connIdentity{ID: 1}, read: connRead{fd: sp[0]}}
	env.Stats.Open.Add(1)
	in <- c
	close(in)
	pkt := benchXOR(b, c.IV[:])
	b.SetBytes(codec.Size)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			for off := 0; off < len(pkt); {
				n, err := unix.Write(sp[1], pkt[off:])
				if err != nil {
					return
				}
				off += n
			}
		}
	}()
	want := b.N * codec.Size
	for got := 0; got < want; {
		ch, ok := <-out.C[0]
		if !ok {
			b.Fatalf("read stage ended after %d of %d bytes", got, want)
		}
		got += len(ch.buf)
		if r := ch.conn.read.reader; r != nil && !ch.eof {
			r.flow.giveBack(ch.conn, cap(ch.buf))
		}
		if ch.buf != nil {
			putBuf(ch.buf)
		}
	}
	b.StopTimer()
	unix.Close(sp[1])
	for ch := range out.C[0] {
		if ch.buf != nil {
			putBuf(ch.buf)
		}
	}
}

// BenchmarkDecryptStageXOR: per op one chunk holding one 4304-byte XOR
// packet of a connection, decrypted, framed, checked and decoded into a
// submission.
func BenchmarkDecryptStageXOR(b *testing.B) {
	env := benchEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := newChunkShards(1, 64)
	out := make(chan intake.Submission, 64)
	cfg := decryptConfig{Cipher: cipherConfig{Method: 1, Password: []byte(benchPassword)}}
	if err := startDecrypt(ctx, in, out, cfg, env); err != nil {
		b.Fatal(err)
	}
	c := &clientConn{connIdentity: connIdentity{ID: 1}}
	for i := range c.IV {
		c.IV[i] = byte(i * 7)
	}
	pkt := benchXOR(b, c.IV[:])
	b.SetBytes(codec.Size)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			buf := getBuf(chunkSize)
			buf = buf[:copy(buf[:cap(buf)], pkt)]
			in.C[0] <- chunk{conn: c, buf: buf}
		}
		in.C[0] <- chunk{conn: c, eof: true, why: "benchmark over"}
		in.Close()
	}()
	n := 0
	for p := range out {
		if p.Kind == intake.KindResult {
			if n == 0 && (p.Malformed != nil || p.Result.Service != "check_disk /var") {
				b.Fatalf("the decrypted packet was handed on as %+v", p)
			}
			n++
		}
	}
	b.StopTimer()
	if n != b.N {
		b.Fatalf("%d packets out of %d", n, b.N)
	}
}
