// Package condwait keeps a bound on waits on a sync.Cond, which has none of
// its own: every wait of the project has a bound.
package condwait

import (
	"sync"
	"time"
)

// Until waits on c, whose L the caller holds, until done reports true or d
// has passed, and returns done's last answer. done is called with c.L
// held. A timer wakes the wait at d, so whoever changes what done reads
// still broadcasts on c as usual.
func Until(c *sync.Cond, d time.Duration, done func() bool) bool {
	if done() {
		return true
	}
	timedOut := false
	timer := time.AfterFunc(d, func() {
		c.L.Lock()
		timedOut = true
		c.Broadcast()
		c.L.Unlock()
	})
	defer timer.Stop()
	for !done() {
		if timedOut {
			return false
		}
		c.Wait()
	}
	return true
}
