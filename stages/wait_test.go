package stages

import "time"

// waitFor polls cond every 10 ms until it holds or timeout passes, and
// reports whether it held.
func waitFor(timeout time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
