// Package stages wires the nsca_fast pipeline: front ends → validate →
// emit, one Server per loaded configuration (New, Run, Shutdown, Abort,
// in the manner of nsq's nsqd), sharing a Process's state across reloads.
// Memory and goroutine counts depend on the configuration, never on how
// many clients connect.
//
// The packages beneath it, each with one concern:
//
//   - stages/intake: what every front end hands in, a Submission from a
//     Source, and the Outcomes it is told; a leaf.
//   - stages/nsca: send_nsca's front end (accept → read → decrypt, its
//     flow control, PROXY headers, every secret's cipher).
//   - stages/nscang: nsca-ng's front end (TLS-PSK sessions over epoll
//     sets, its line protocol).
//   - stages/frontend: what the front ends share below their protocols
//     (the accept step, SO_REUSEPORT listening, epoll sets, the gate).
//   - stages/validate: the one ordered list of rules every submission
//     passes (form, age, checks per connection, names, authorization,
//     spoofing), each rule a file and a row.
//   - stages/emit: the emit stage and the destinations it builds, each
//     engine in a package beneath it.
//   - stages/stage: the one shape of a stage (Go, Send, Sharded, Env).
//   - stages/codec, stages/cipher, stages/counters, stages/diagnose,
//     stages/rawsys: the wire format, the ciphers, the counters and
//     metrics, the diagnosis of failing clients, raw system calls.
//
// A new front end is its own package that sends intake.Submissions and
// implements intake.Outcomes, plus its start in startFrontEnds and its
// options; a new validation rule is its file in stages/validate and one
// row of its list; a new sink is its engine package, its conf field and
// one destinations entry.
//
// Every front end sends to one bounded queue (intake.Queue), the last to
// leave closes it; the channels between stages are bounded by queue_size,
// so a slow sink makes the stages upstream wait and, at the end, the
// clients, as with stock. Shutdown stops the front ends from accepting,
// the channels drain downstream, the sinks flush, then Run returns.
package stages
