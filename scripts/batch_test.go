package scripts

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// pipelines records the size of every pipeline of SETs the client sends
// (go-redis also pipelines its connection handshake).
type pipelines struct {
	mu    sync.Mutex
	sizes []int
}

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() == "set" {
			p.mu.Lock()
			p.sizes = append(p.sizes, len(cmds))
			p.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// While the one flight is on the wire (a script keeps Redis busy for
// 1 s), three calls queue; the first one's caller gives up meanwhile. The
// two others leave together in one pipeline, sent by that first one's
// goroutine, which does not send its own call: its caller was told it may
// have run, and it must not act behind its back now.
func TestBatchedQueueLeavesTogetherAndOutlivesItsSender(t *testing.T) {
	srv, err := redisserver.Start()
	if err != nil {
		t.Skip("needs redis-server:", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &pipelines{}
	rdb.AddHook(hook)
	b := &Batched{UniversalClient: rdb, Flights: 1}
	ctx := context.Background()

	busy := redis.NewCmd(ctx, "eval", `
local t0 = redis.call('time')
while true do
  local t = redis.call('time')
  if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 1000000 then return 1 end
end`, 0)
	senderCtx, giveUp := context.WithCancel(ctx)
	abandoned := redis.NewCmd(senderCtx, "set", "batch:abandoned", 1)
	rider := redis.NewCmd(ctx, "set", "batch:rider", 1)
	other := redis.NewCmd(ctx, "set", "batch:other", 1)

	var wg sync.WaitGroup
	wg.Go(func() { _ = b.Process(ctx, busy) })
	time.Sleep(200 * time.Millisecond) // the busy script holds the flight
	wg.Go(func() { _ = b.Process(senderCtx, abandoned) })
	time.Sleep(100 * time.Millisecond)
	wg.Go(func() { _ = b.Process(ctx, rider) })
	wg.Go(func() { _ = b.Process(ctx, other) })
	time.Sleep(100 * time.Millisecond)
	giveUp()
	wg.Wait()

	require.NoError(t, busy.Err())
	require.NoError(t, rider.Err(), "a call failed because the caller that sent its pipeline gave up")
	require.NoError(t, other.Err())
	assert.ErrorIs(t, abandoned.Err(), context.Canceled, "the call whose caller gave up while it queued")
	n, err := rdb.Exists(ctx, "batch:abandoned").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a call whose caller gave up before it left is not sent")
	n, err = rdb.Exists(ctx, "batch:rider", "batch:other").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	assert.Equal(t, []int{2}, hook.sizes, "the two live queued calls left in one pipeline")
}
