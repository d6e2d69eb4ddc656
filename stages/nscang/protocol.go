// Package nscang is nsca-ng's front end: its listener (listener.go), the
// fixed goroutines that run every TLS-PSK session over epoll sets
// (worker.go, session.go), and the protocol, version 1 (this file): the
// request lines a client sends after the TLS handshake, the responses, and
// the monitoring commands it pushes, which it hands to validation as
// intake.Submissions (push.go), check results and other commands alike,
// answering OKAY or FAIL once validation has told it the outcome.
package nscang

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
)

// Limits of the protocol and nsca-ng's defaults.
const (
	// MaxLine is the longest request line, CRLF included.
	MaxLine = 1024
	// DefaultMaxCommandSize is nsca-ng's max_command_size.
	DefaultMaxCommandSize = 16384
)

// Errors of a pushed command that cannot be taken.
var (
	ErrCommand = errors.New("nscang: cannot parse the command")
)

// Verb is a request's keyword.
type Verb int

// The requests of version 1; Unknown is any other keyword.
const (
	Unknown Verb = iota
	Moin
	Ping
	Push
	Noop
	Quit
	Bail
)

var verbs = map[string]Verb{"MOIN": Moin, "PING": Ping, "PUSH": Push, "NOOP": Noop, "QUIT": Quit, "BAIL": Bail}

// Request is one request line.
type Request struct {
	Verb Verb
	// Args are the space-separated words after the keyword.
	Args []string
	// Line is the request as sent, without its line end.
	Line string
}

// ParseRequest reads a request line without its CRLF or LF. The keyword is
// matched on its first four letters, case-insensitively, as nsca-ng does.
func ParseRequest(line string) Request {
	r := Request{Line: line}
	if len(line) >= 4 {
		r.Verb = verbs[strings.ToUpper(line[:4])]
	}
	if i := strings.IndexByte(line, ' '); i >= 0 {
		r.Args = strings.Split(line[i+1:], " ")
	}
	return r
}

// Responses, as nsca-ng's server words them.
const (
	ReplyMoin        = "MOIN 1"
	ReplyPong        = "PONG 1"
	ReplyOkay        = "OKAY"
	FailMoin         = "FAIL Cannot parse MOIN request"
	FailVersion      = "FAIL Expected protocol version"
	FailFirst        = "FAIL Expected MOIN or PING or BAIL"
	FailPush         = "FAIL Cannot parse PUSH request"
	FailSize         = "FAIL Expected number of bytes"
	FailTooLarge     = "FAIL PUSH data size too large"
	FailSession      = "FAIL Expected PUSH or NOOP or QUIT"
	FailUnauthorized = "FAIL You're not authorized"
	BailTimeout      = "BAIL Connection timed out"
	BailLineTooLong  = "BAIL Request line too long"
)

// MoinOK checks a MOIN request: it names a positive protocol version and a
// session id. The reply on failure is returned.
func MoinOK(r Request) (ok bool, fail string) {
	if len(r.Args) < 2 {
		return false, FailMoin
	}
	if v, _ := strconv.Atoi(r.Args[0]); v <= 0 {
		return false, FailVersion
	}
	return true, ""
}

// PushSize checks a PUSH request against maxSize (0: no limit) and
// returns the number of octets that follow, or the reply on failure.
func PushSize(r Request, maxSize int) (n int, fail string) {
	if len(r.Args) < 1 {
		return 0, FailPush
	}
	n, _ = strconv.Atoi(r.Args[0])
	switch {
	case n <= 0:
		return 0, FailSize
	case maxSize > 0 && n > maxSize:
		return 0, FailTooLarge
	}
	return n, ""
}

// Command is one pushed monitoring command.
type Command struct {
	// Time is the bracketed timestamp; HasTime says there was one.
	Time    int64
	HasTime bool
	// Text is the command without timestamp and trailing newline, what
	// authorization matches (PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;ok).
	Text string
	// Result is set for a host or service check result, with its output
	// unescaped; the pipeline writes it again in the configured dialect.
	Result *codec.Result
}

// Result commands and their field counts (name included).
const (
	serviceResult = "PROCESS_SERVICE_CHECK_RESULT"
	hostResult    = "PROCESS_HOST_CHECK_RESULT"
)

// ParseCommand reads what a PUSH delivered: `[timestamp] NAME;args\n`.
// A check result whose fields do not parse is an error: it would reach
// the core as a command it rejects.
func ParseCommand(data []byte) (Command, error) {
	s := strings.TrimSuffix(string(data), "\n")
	var c Command
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return c, fmt.Errorf("%w: no ']' after the timestamp", ErrCommand)
		}
		t, err := strconv.ParseInt(s[1:end], 10, 64)
		if err != nil {
			return c, fmt.Errorf("%w: timestamp %q", ErrCommand, s[1:end])
		}
		c.Time, c.HasTime = t, true
		s = strings.TrimLeft(s[end+1:], " ")
	}
	if strings.ContainsAny(s, "\n") {
		return c, fmt.Errorf("%w: a newline inside the command", ErrCommand)
	}
	c.Text = s
	name, args, _ := strings.Cut(s, ";")
	var f []string
	switch name {
	case serviceResult:
		f = strings.SplitN(args, ";", 4)
		if len(f) != 4 {
			return c, fmt.Errorf("%w: %s needs host;service;return_code;output", ErrCommand, name)
		}
	case hostResult:
		f = strings.SplitN(args, ";", 3)
		if len(f) != 3 {
			return c, fmt.Errorf("%w: %s needs host;return_code;output", ErrCommand, name)
		}
		f = []string{f[0], "", f[1], f[2]}
	default:
		return c, nil
	}
	rc, err := strconv.ParseInt(f[2], 10, 16)
	if err != nil || f[0] == "" || (name == serviceResult && f[1] == "") {
		return c, fmt.Errorf("%w: %s with host %q, service %q, return code %q", ErrCommand, name, f[0], f[1], f[2])
	}
	c.Result = &codec.Result{Timestamp: uint32(c.Time), ReturnCode: int16(rc), Host: f[0], Service: f[1], Output: dialect.Unescape(f[3])}
	return c, nil
}
