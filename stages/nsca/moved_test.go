package nsca

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/cgo/mcrypt"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/stage"
)

const testPassword = "s3cret pass " // trailing blank is part of it, as in nsca.cfg

// A rejected packet makes the validate stage ask the connection's reader to
// close it (requestClose), which writes to the reader's eventfd. The reader
// stage may already have finished by then (it ends once its connections have
// closed, while packets of those connections can still be queued for
// decrypt and validate), and it closes its eventfd when it finishes. The
// descriptor number is then free for reuse (the emitter opens the command
// file once per write), so requestClose must not write to it.
func TestRequestCloseAfterReaderExit(t *testing.T) {
	stats := counters.NewStats()
	in := make(chan *clientConn, 1)
	out := newChunkShards(1, 16)
	ctx := t.Context()
	if err := startRead(ctx, in, out, readConfig{Readers: 1, Timeout: 10 * time.Second, Grace: time.Second}, stage.Env{Stats: stats, Log: counters.NewRateLog(time.Second, 5)}); err != nil {
		t.Fatal(err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &clientConn{connIdentity: connIdentity{ID: 1}, read: connRead{fd: sp[0]}}
	stats.Open.Add(1)
	in <- c
	close(in)
	unix.Close(sp[1]) // the client hangs up: the reader closes the conn and, with no conns left, finishes
	deadline := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case ch, ok := <-out.C[0]:
			if !ok {
				done = true
			} else if ch.buf != nil {
				putBuf(ch.buf)
			}
		case <-deadline:
			t.Fatal("the read stage did not finish")
		}
	}

	// The read stage is done and has closed its eventfd; simulate the number
	// being reused, as the next open() in the process would.
	wakefd := c.read.reader.wakefd
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := p[0], p[1]
	if r == wakefd { // the read end took the number: move it
		nr, err := unix.Dup(r)
		if err != nil {
			t.Fatal(err)
		}
		r = nr
	}
	if w != wakefd { // put the write end at the reader's old eventfd number
		if err := unix.Dup3(w, wakefd, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		unix.Close(w)
	}
	defer unix.Close(r)
	defer unix.Close(wakefd)

	c.requestClose() // what validate does for a packet of this connection that fails Check

	buf := make([]byte, 64)
	n, _ := unix.Read(r, buf)
	if n > 0 {
		t.Errorf("requestClose after the read stage finished wrote %d bytes (% x) to descriptor %d, "+
			"the reader's closed eventfd, now reused by another file", n, buf[:n], wakefd)
	}
}

// decryption_mode=0 keys a fresh key per connection and starts its register
// from the connection's IV. With libmcrypt the IV and the buffers must be
// handed to C in memory that holds no Go pointers, or the cgo pointer check
// panics and takes the daemon down; the native engine must agree.
func TestDecryptPerConnection(t *testing.T) {
	for _, alg := range []string{"tripledes", "rijndael-128"} {
		for _, engine := range []string{cipher.EngineLibmcrypt, cipher.EngineNative} {
			t.Run(alg+"/"+engine, func(t *testing.T) {
				cfg := cipherConfig{Method: 3, Password: []byte(testPassword), PerConnection: true}
				if alg == "rijndael-128" {
					cfg.Method = 14
				}
				cfg = chooseCipher(t, alg, engine, cfg)
				// A clientConn as the pipeline has it: on the heap, with its pointers set.
				c := &clientConn{connIdentity: connIdentity{ID: 1}, read: connRead{reader: &reader{}}}
				for i := range c.IV {
					c.IV[i] = byte(i * 7)
				}
				plain := make([]byte, codec.Size)
				codec.Encode(plain, codec.Result{Timestamp: 1, Host: "h", Service: "s", Output: "per-connection"})
				enc, err := mcrypt.Open(alg)
				if err != nil {
					t.Fatal(err)
				}
				defer enc.Close()
				if err := enc.Init([]byte(testPassword), bytes.Clone(c.IV[:])); err != nil {
					t.Fatal(err)
				}
				buf := getBuf(chunkSize)[:codec.Size]
				copy(buf, plain)
				enc.Encrypt(buf)

				d, err := newDecrypter(cfg, counters.NewStats(), counters.NewRateLog(time.Second, 5))
				if err != nil {
					t.Fatal(err)
				}
				defer d.close()
				c.decrypt.sec = &d.cands[0]
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("decrypter.decrypt (decryption_mode=0, %s, %s) panicked: %v", alg, engine, r)
						}
					}()
					d.decrypt(c, buf)
				}()
				if c.decrypt.key != nil {
					defer c.decrypt.key.Close()
				}
				if c.decrypt.cipherErr != nil {
					t.Fatal(c.decrypt.cipherErr)
				}
				if !bytes.Equal(buf, plain) {
					t.Errorf("decrypted packet differs from the plaintext")
				}
			})
		}
	}
}
