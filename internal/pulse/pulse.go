// Package pulse keeps the heartbeat rule: when a compaction the client
// sees has been silent long enough that its progress is re-sent, so that
// client watchdogs see life while a summary takes minutes.
//
// The emitter (per compaction, WithHeartbeat) and the proxy (per
// connection, for what it shows the client) both follow this rule. Each
// drives its own timer, because each writes under its own lock: the
// emitter writes from its timer under the session's lock, while the proxy
// writes to the client under its output lock and calls the emitter with
// that lock held, so one timer serving both would take the locks in both
// orders. What is due, and how often it is looked at, lives here.
package pulse

import "time"

// Period is how often a host looks at the silence for heartbeat interval
// d: a quarter of d (at least a millisecond), so a heartbeat goes out
// within 1.25 d of the last sign of life.
func Period(d time.Duration) time.Duration { return max(d/4, time.Millisecond) }

// Clock is the silence of one stream as a host's ticks see it. The zero
// value is not ready: use Start. A Clock is not safe for concurrent use:
// its host calls it under the lock that orders its writes.
type Clock struct {
	d     time.Duration
	quiet time.Time // since when nothing was seen, as the ticks saw it
	beat  time.Time // the last heartbeat
}

// Start returns the clock of a stream that is alive at now, with
// heartbeat interval d.
func Start(d time.Duration, now time.Time) Clock { return Clock{d: d, quiet: now} }

// Tick is one look at the stream at now. active reports that something
// reached the client since the previous look, which restarts the silence.
// Tick reports whether a heartbeat is due: the stream has been silent for
// at least d and no heartbeat went out in the last d. A due heartbeat is
// taken as sent; the silence goes on, so the next one is due d later.
func (c *Clock) Tick(now time.Time, active bool) bool {
	if active {
		c.quiet = now
		return false
	}
	if now.Sub(c.quiet) >= c.d && now.Sub(c.beat) >= c.d {
		c.beat = now
		return true
	}
	return false
}
