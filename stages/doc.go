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
//   - stages/nrdp: NRDP's front end (HTTP and HTTPS, XML and JSON, tokens
//     as identities).
//   - stages/frontend: what the front ends share below their protocols
//     (the accept step, SO_REUSEPORT listening, epoll sets, the gate).
//   - stages/validate: the one ordered list of rules every submission
//     passes (form, age, checks per connection, names, authorization,
//     spoofing), each rule a file and a row.
//   - stages/emit: the emit stage and the destinations it builds, each
//     engine in a package beneath it.
//   - stages/stage: the one shape of a stage (Go, Send, Shards, Sharded, Env).
//   - stages/codec, stages/cipher, stages/counters, stages/diagnose,
//     stages/rawsys: the wire format, the ciphers, the counters and
//     metrics, the diagnosis of failing clients, raw system calls.
//
// What a change touches, on paper:
//
//   - A new front end: its package beneath stages (its listener, sessions
//     and wire format; it sends intake.Submissions with a Source of its
//     own, declares its intake.Front and implements intake.Outcomes),
//     plus server.go (its settings in New, its start in startFrontEnds)
//     and conf/conf.go (its options' rows nested, as stages/nrdp's).
//   - A new validation rule: its file in stages/validate and one row of
//     rules (rules.go).
//   - A new sink: stages/emit/<engine>/ (the sink, its Options, rows and
//     checks), conf/conf.go (the field and one engines line) and
//     stages/emit/destinations.go (one remotes() entry).
//
// Every front end sends to one bounded queue (intake.Queue), the last to
// leave closes it; the channels between stages are bounded by queue_size,
// so a slow sink makes the stages upstream wait and, at the end, the
// clients, as with stock. Shutdown stops the front ends from accepting,
// the channels drain downstream, the sinks flush, then Run returns.
package stages
