package mcrypt

import "errors"

// ErrCannotOpen is wrapped by Open's errors so callers can tell "this
// encryption method is unavailable" (a configuration problem, reported once
// at startup) apart from per-connection failures.
var ErrCannotOpen = errors.New("mcrypt: cannot open algorithm")

// ErrInit is wrapped by Init's errors; libmcrypt rejects keys or runs out of
// memory here, which is per-connection and should drop only that connection.
var ErrInit = errors.New("mcrypt: cannot initialise")
