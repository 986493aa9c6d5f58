package actors

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Calls starting within one window share a context whose deadline is at
// least CallTimeout away and at most a window more; a later call gets a
// new one; Close (callsCtx) ends them all.
func TestCallCtxSharesADeadlinePerWindow(t *testing.T) {
	callsCtx, cancel := context.WithCancel(context.Background())
	e := &runtimeEnv{Config: Config{CallTimeout: time.Second}, callsCtx: callsCtx}
	const window = 50 * time.Millisecond // min(1 s / 20, 50 ms)

	start := time.Now()
	first := e.callCtx()
	again := e.callCtx()
	if time.Since(start) < window {
		assert.True(t, first == again, "two calls within the window share a context")
	}
	d, ok := first.Deadline()
	require.True(t, ok)
	assert.False(t, d.Before(start.Add(time.Second)), "never less than CallTimeout")
	assert.False(t, d.After(time.Now().Add(time.Second+window)), "at most a window more")

	time.Sleep(window + 10*time.Millisecond)
	later := e.callCtx()
	assert.False(t, later == first, "a call after the window gets a context of its own")
	d2, _ := later.Deadline()
	assert.True(t, d2.After(d))

	cancel()
	for _, c := range []context.Context{first, later} {
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("Close did not end a shared call context")
		}
	}
}

// A call whose first attempt may have run (its reply was lost) and whose
// retry could not even connect may still have taken effect: the error
// retryUnknown returns says so, or the caller would not undo the first
// attempt's grant (found by the simulation: a read hold left in Redis).
func TestRetryUnknownRemembersAnEarlierTryThatMayHaveRun(t *testing.T) {
	lost := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	var tries []int
	err := retryUnknown(context.Background(), func(_ context.Context, attempt int) error {
		tries = append(tries, attempt)
		if attempt == 0 {
			return lost
		}
		return dial
	})
	assert.Equal(t, []int{0, 1}, tries, "a failed dial is final")
	require.Error(t, err)
	assert.True(t, mayHaveRun(err), "the first try may have run")
	assert.ErrorIs(t, err, dial, "the last try's error is kept")
	assert.Contains(t, err.Error(), "an earlier try may have run")

	// A dial failure alone: nothing ran.
	err = retryUnknown(context.Background(), func(context.Context, int) error { return dial })
	assert.False(t, mayHaveRun(err))
	assert.Same(t, dial, err)
}
