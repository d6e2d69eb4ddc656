package proc

import (
	"strings"

	"github.com/golang/glog"

	"nsca_fast/conf"
)

// loaded remembers cfg as read for a reload that is under way; the reload
// that succeeds makes it the running one.
func (a *App) loaded(cfg *conf.Config) { a.next = cfg }

// reloaded counts a reload that ended with err and, when it succeeded,
// logs that it did with the options it changed; how says what serves now.
func (a *App) reloaded(err error, how string) {
	a.reloads.Record(err)
	if err != nil {
		return
	}
	changes := "no option changed"
	if a.running != nil && a.next != nil {
		if names := a.next.Changed(a.running); len(names) > 0 {
			changes = "changed " + strings.Join(names, ", ")
		}
	}
	a.running = a.next
	glog.Infof("SIGHUP: configuration reloaded (%s); %s", changes, how)
}

// replace has srv drain because a reload replaced it: its last lines then
// say so rather than read as the daemon's stop.
func replace(srv Server) {
	if r, ok := srv.(interface{ Replaced() }); ok {
		r.Replaced()
	}
	srv.Shutdown()
}
