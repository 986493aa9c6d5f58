package actorlock

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/actors"
)

// An answer that reached the caller's reply channel before the runtime's
// actors stopped is the call's outcome: a Take that won an item must return
// it, not ErrClosed with the item dropped. The actor delivers the item, and
// Close runs before the caller reads its reply, so that the caller finds
// both the reply and the runtime's end ready (a select between them would
// pick at random).
func TestCloseNeverDropsAnAnswerThatArrived(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := fmt.Sprintf("ask-close-%d", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(context.Background(), name) })
	for i := range 20 {
		item := fmt.Sprintf("item-%d", i)
		require.NoError(t, rdb.RPush(ctx, name, item).Err())
		rt, err := New(rdb)
		require.NoError(t, err)
		q := rt.BlockingQueue(name)
		var reply chan<- actors.TakeResult
		send := func(m any) {
			q.send(m)
			if _, ok := m.(*actors.Take); !ok {
				return
			}
			// The actor answers, then the runtime closes, before the
			// caller looks.
			require.Eventually(t, func() bool { return len(reply) == 1 }, 10*time.Second, time.Millisecond)
			require.NoError(t, rt.Close(ctx))
		}
		res, err := ask(ctx, rt, send, func(r chan<- actors.TakeResult) any {
			reply = r
			return &actors.Take{Name: name, ID: 1, Reply: r}
		}, nil, nil)
		left := rdb.LRange(ctx, name, 0, -1).Val()
		if !assert.NoError(t, err, "round %d: the item taken is returned", i) || !assert.True(t, res.OK) {
			assert.Contains(t, left, item, "round %d: nor was it given back: lost", i)
			return
		}
		assert.Equal(t, item, string(res.Value))
		assert.Empty(t, left)
	}
}
