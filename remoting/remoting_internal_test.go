package remoting

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shutdownScript plays protoactor remote's Shutdown: graceful runs the
// given function, hard counts its calls and ends a blocked graceful one.
type shutdownScript struct {
	graceful func(cut <-chan struct{})
	hard     atomic.Int32
	cut      chan struct{}
}

func newShutdownScript(graceful func(cut <-chan struct{})) *shutdownScript {
	return &shutdownScript{graceful: graceful, cut: make(chan struct{})}
}

func (s *shutdownScript) Shutdown(graceful bool) {
	if graceful {
		s.graceful(s.cut)
		return
	}
	if s.hard.Add(1) == 1 {
		close(s.cut)
	}
}

func TestStopRemoteSurvivesProtoactorsDisconnectRace(t *testing.T) {
	// The real race panics with a send on a channel the stream's reader
	// closed; this sends on one too, so the panic value is the runtime's.
	s := newShutdownScript(func(<-chan struct{}) {
		notice := make(chan bool, 1)
		close(notice)
		notice <- true
	})
	start := time.Now()
	require.NoError(t, stop(context.Background(), s))
	assert.Less(t, time.Since(start), remoteDrainTime/2, "no wait for the drain bound")
	assert.Equal(t, int32(1), s.hard.Load(), "the streams the graceful stop skipped are cut")
}

func TestStopRemoteReportsOtherPanics(t *testing.T) {
	s := newShutdownScript(func(<-chan struct{}) { panic("boom") })
	err := stop(context.Background(), s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "boom")
	assert.Equal(t, int32(1), s.hard.Load())
}

func TestStopRemoteCutsADrainThatDoesNotEnd(t *testing.T) {
	s := newShutdownScript(func(cut <-chan struct{}) { <-cut })
	start := time.Now()
	require.NoError(t, stop(context.Background(), s))
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, remoteDrainTime)
	assert.Less(t, took, remoteDrainTime+500*time.Millisecond)
	assert.Equal(t, int32(1), s.hard.Load())
}

func TestStopRemoteGivesUpWhenTheContextEnds(t *testing.T) {
	never := make(chan struct{})
	defer close(never)
	s := newShutdownScript(func(<-chan struct{}) { <-never })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := stop(ctx, s)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// Close lets the last inbound stream to end settle before a graceful
// Shutdown: no wait when none ended, or long ago; the rest of
// streamSettle after a recent end; no longer than ctx.
func TestStreamEndsSettle(t *testing.T) {
	var e streamEnds
	start := time.Now()
	e.settle(context.Background())
	assert.Less(t, time.Since(start), streamSettle/2, "no stream ended: no wait")

	e.last.Store(time.Now().Add(-time.Second).UnixNano())
	start = time.Now()
	e.settle(context.Background())
	assert.Less(t, time.Since(start), streamSettle/2, "the last end is long past: no wait")

	e.last.Store(time.Now().UnixNano())
	start = time.Now()
	e.settle(context.Background())
	assert.GreaterOrEqual(t, time.Since(start), streamSettle-5*time.Millisecond, "a stream just ended: it settles first")

	e.last.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	e.settle(ctx)
	assert.Less(t, time.Since(start), streamSettle/2, "ctx ended: no wait")
}
