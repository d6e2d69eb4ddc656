package proc

import (
	"os"
	"os/signal"
	"syscall"
)

// onReopenSignal runs do on every SIGUSR1, whose default action would end
// the process: an operator or a rotation script asks with it that the
// files the daemon appends to be opened anew (a rotation that renames them
// is noticed without it).
func onReopenSignal(do func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			do()
		}
	}()
}

// reopen makes this process's sinks open their files anew.
func (a *App) reopen() {
	if a.Reopen != nil {
		a.Reopen()
	}
}
