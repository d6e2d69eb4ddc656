package counters

import (
	"fmt"
	"net/http"
	"strings"
)

// HealthHandler answers /healthz: 200 while the process answers at all
// (a liveness probe restarts what does not).
func HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
}

// ReadyHandler answers /readyz: 200 while the daemon serves (serving
// reports it: started, not stopping) and every sink takes results, else
// 503 with the reason, so a load balancer sends clients elsewhere while
// results would only reach a fallback or be dropped.
func ReadyHandler(serving func() bool, snapshot func() Snapshot) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var why []string
		if !serving() {
			why = append(why, "not serving (starting or stopping)")
		}
		down := snapshot().SinkDown
		for _, k := range sortedKeys(down) {
			if down[k] > 0 {
				why = append(why, "sink "+k+" is not writable (its last write failed)")
			}
		}
		if len(why) > 0 {
			http.Error(w, strings.Join(why, "\n"), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}
