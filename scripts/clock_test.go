package scripts

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A late reply's reading is far below the true offset: it must not lower
// the estimate, or a grant that ran before a hold's validity would be
// placed after it, and a give-back left without its token (RT31-1). A
// server clock that went back does lower it: even the reading's high end
// (as if the server read its clock when the call left) is below.
func TestClockIgnoresALateReplyAndFollowsAClockThatWentBack(t *testing.T) {
	var c Clock
	t0 := time.Now()
	server := func(at time.Time, shift time.Duration) int64 { return at.Add(time.Hour + shift).UnixMicro() }
	c.Observe(server(t0, 0), t0, t0.Add(time.Millisecond))
	offset := c.offset.Load()
	require.InDelta(t, time.Hour.Microseconds(), offset, 2000)

	sent := t0.Add(10 * time.Second) // long after, with nothing learnt meanwhile
	c.Observe(server(sent, 0), sent, sent.Add(1500*time.Millisecond))
	require.Equal(t, offset, c.offset.Load(), "a reply 1.5 s late moves nothing")
	require.True(t, c.IssuedBefore(server(sent, 0), sent.Add(5*time.Millisecond)), "a grant that ran at sent ran before sent+5ms (the estimate is 1 ms low)")

	back := t0.Add(20 * time.Second)
	c.Observe(server(back, -3*time.Second), back, back.Add(time.Millisecond))
	require.InDelta(t, (time.Hour - 3*time.Second).Microseconds(), c.offset.Load(), 2000, "the server's clock went back 3 s")
}
