package actors

import (
	"context"
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
