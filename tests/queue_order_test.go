package tests

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/scripts"
)

// Items due at the same ms reach the list in the order they were offered,
// not in the order of their members' random ids (the ZSET's order for equal
// scores, which is how Redisson's own transfer breaks ties).

// One producer offers items with one delay, one after another: many share a
// due ms, and they arrive in the order offered.
func TestDelayedItemsWithOneDelayArriveInTheOrderOffered(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	q := rt.DelayedQueue("dq-fifo")
	defer q.Close()
	const n = 300
	for i := range n {
		require.NoError(t, q.Offer(ctx, fmt.Appendf(nil, "%04d", i), 500*time.Millisecond))
	}
	bq := rt.BlockingQueue("dq-fifo")
	var got []string
	for range n {
		v, err := bq.Take(ctx)
		require.NoError(t, err)
		got = append(got, string(v))
	}
	outOfOrder := 0
	for i := 1; i < n; i++ {
		if got[i] < got[i-1] {
			outOfOrder++
		}
	}
	assert.Zero(t, outOfOrder, "items taken before one offered earlier")
}

// descendingMember is item i of a test layout: its id falls as i rises, so
// the ZSET orders ties last offered first.
func descendingMember(i int) string {
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], uint64(1<<32-i))
	return redissonMember(string(id[:]), fmt.Sprintf("%04d", i))
}

// Layouts written as Redisson's offer writes them, with ids that order each
// tie backwards: at the list's head, behind an item not yet due, a tie
// larger than a move's batch (100), and a tie that a batch would cut.
func TestDelayedItemsDueTogetherMoveInTheOrderOffered(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	cases := []struct {
		name   string
		items  []tieItem // in the order offered
		notDue int       // items first in the list, due in an hour
	}{
		{name: "head", items: spread(0, 5, 0)},
		{name: "behind", items: spread(0, 5, 0), notDue: 1},
		{name: "mixed", items: append(spread(0, 4, 1), spread(4, 4, 0)...)},
		{name: "tie-over-a-batch", items: spread(0, 250, 0)},
		{name: "tie-cut-by-a-batch", items: append(spread(0, 60, 0), spread(60, 80, 1)...)},
		{name: "tie-over-a-batch-behind", items: spread(0, 230, 0), notDue: 3},
	}
	base := serverMs(t, ctx, rdb) - 10_000
	for _, c := range cases {
		name := "dq-tie-" + c.name
		timeouts, list := scripts.DelayTimeoutKey(name), scripts.DelayQueueKey(name)
		pipe := rdb.TxPipeline()
		for j := range c.notDue {
			m := descendingMember(100_000 + j)
			pipe.ZAdd(ctx, timeouts, redis.Z{Score: float64(base + 3_600_000), Member: m})
			pipe.RPush(ctx, list, m)
		}
		for _, it := range c.items {
			m := descendingMember(it.i)
			pipe.ZAdd(ctx, timeouts, redis.Z{Score: float64(base + it.score), Member: m})
			pipe.RPush(ctx, list, m)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		// Due first, then in the order offered.
		var want []string
		for _, pass := range []int64{0, 1} {
			for _, it := range c.items {
				if it.score == pass {
					want = append(want, fmt.Sprintf("%04d", it.i))
				}
			}
		}
		q := rt.DelayedQueue(name) // its mover moves what is due
		require.Eventually(t, func() bool { return rdb.LLen(ctx, name).Val() >= int64(len(want)) }, 10*time.Second, 5*time.Millisecond, c.name)
		require.NoError(t, q.Close())
		got, err := rdb.LRange(ctx, name, 0, -1).Result()
		require.NoError(t, err)
		assert.Equal(t, want, got, c.name)
		assert.Equal(t, int64(c.notDue), rdb.ZCard(ctx, timeouts).Val(), "%s: what is not due stays", c.name)
		assert.Equal(t, int64(c.notDue), rdb.LLen(ctx, list).Val(), c.name)
	}
}

// tieItem is item i of a test layout, due at score ms after the test's base.
type tieItem struct {
	i     int
	score int64
}

// spread is n items numbered from first, all due at offset ms.
func spread(first, n int, offset int64) []tieItem {
	out := make([]tieItem, n)
	for k := range out {
		out[k] = tieItem{i: first + k, score: offset}
	}
	return out
}
