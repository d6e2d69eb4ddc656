// Package stages is the nsca_fast pipeline: accept → read → decrypt →
// validate → emit, one file per stage (the emit stage is package
// stages/emit), wired together in server.go, with the helpers every stage
// uses in stages/stage. Memory and goroutine counts depend on the
// configuration, never on how many clients connect. Outside the package
// only Server (built by New, in a Process from NewProcess) and the
// configuration checks and descriptions of describe.go are used.
//
// Every stage has the one shape that package stages/stage describes and
// gives (stage.Go, stage.Send, stage.Sharded, stage.Env): accept, read,
// decrypt and validate here, emit in stages/emit.
//
// One hand-off is not a channel: accept gives a connection it greeted to a
// reader by registering it with that reader's epoll set (readIntake). The
// next thing to happen on a new connection is an epoll event anyway, and a
// channel would wake a goroutine per connection only to make that call.
// Connections taken over from elsewhere (inetd's) still come through the
// read stage's channel, whose closing still starts the drain. Who may come
// in is admission's (admit.go): accept applies it, and the read stage for
// a client behind a PROXY header once the header has come.
//
// Flow control is not a channel either: one flow (flow.go) owns the read
// budgets, what the front end has taken off client sockets and the stages
// after it have not consumed yet, globally and per connection, and the
// gate accept waits at while the stages after it cannot take more. Read
// takes, decrypt gives back and says what decrypting costs, and accept
// waits in flow.waitRoom, woken when room comes back, so that a backlog
// waits in the kernel's socket buffers and listen queue, not in our memory.
// A clientConn's fields are grouped by the stage that owns them (conn.go).
//
// The nsca-ng listener (ngserve.go) is a second source beside accept →
// read → decrypt: its fixed pool of goroutines runs TLS-PSK sessions over
// epoll sets and sends the check results its clients push to the validate
// stage as decoded packets; decrypt and the listener each say when they
// are done, and the last one closes validate's input. It has a flow of
// its own: each session's command in the pipeline is taken until its
// outcome, and its accept waits at the gate while validate's input is full.
//
// The stages share counters and the rate-limited log through stage.Env; the
// channels between them are bounded by queue_size, so a slow sink makes
// the stages upstream wait and, at the end, the clients, as with stock.
// Readers wait for their epoll sets in Go's poller, and the hot path's
// non-blocking system calls are made raw (stages/rawsys), so that no thread
// blocks in a system call and none of them wakes the runtime's sysmon.
//
// What the stages use lives beside them: the wire format in stages/codec,
// the ciphers in stages/cipher, the emit stage and the destinations it
// builds in stages/emit (each engine in a package of its own beneath it),
// and the counters and metrics in stages/counters.
package stages
