package pulse_test

import (
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/internal/pulse"
	"github.com/stretchr/testify/assert"
)

func TestPeriodIsAQuarterOfTheIntervalAndAtLeastAMillisecond(t *testing.T) {
	for _, c := range []struct{ d, want time.Duration }{
		{time.Second, 250 * time.Millisecond},
		{10 * time.Second, 2500 * time.Millisecond},
		{2 * time.Millisecond, time.Millisecond},
		{time.Microsecond, time.Millisecond},
	} {
		assert.Equal(t, c.want, pulse.Period(c.d), "Period(%v)", c.d)
	}
}

// look is one tick of a table: at is the time since Start, active whether
// something reached the client since the previous tick.
type look struct {
	at     time.Duration
	active bool
	due    bool
}

func TestTickBeatsAfterAnIntervalOfSilenceAndThenEveryInterval(t *testing.T) {
	const d = time.Second
	q := d / 4
	cases := []struct {
		name  string
		looks []look
	}{
		{"silent from the start: the first beat at d, then every d", []look{
			{q, false, false}, {2 * q, false, false}, {3 * q, false, false}, {4 * q, false, true},
			{5 * q, false, false}, {7 * q, false, false}, {8 * q, false, true}, {12 * q, false, true},
		}},
		{"activity restarts the silence", []look{
			{3 * q, true, false}, {6 * q, false, false}, {7 * q, false, true},
		}},
		{"never a beat while something flows", []look{
			{q, true, false}, {5 * q, true, false}, {9 * q, true, false}, {13 * q, true, false},
		}},
		{"activity after a beat: the next beat waits a whole silence", []look{
			{4 * q, false, true}, {5 * q, true, false}, {8 * q, false, false}, {9 * q, false, true},
		}},
		{"a late tick beats at once, and the one after waits d", []look{
			{10 * q, false, true}, {12 * q, false, false}, {14 * q, false, true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			clk := pulse.Start(d, t0)
			for _, l := range c.looks {
				assert.Equal(t, l.due, clk.Tick(t0.Add(l.at), l.active), "tick at %v (active %v): due", l.at, l.active)
			}
		})
	}
}
