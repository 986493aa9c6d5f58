package tests

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/observe"
)

// redissonMember packs a delayed item as Redisson's Lua does,
// struct.pack('Bc0Lc0', 8, id, #value, value), written out byte by byte here
// so the test does not trust the code it checks.
func redissonMember(id string, value string) string {
	b := []byte{8}
	b = append(b, id[:8]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(value)))
	return string(append(b, value...))
}

// serverMs is the Redis server's clock in Unix ms.
func serverMs(t testing.TB, ctx context.Context, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

// waitSubscribers waits until channel has n subscribers.
func waitSubscribers(t testing.TB, ctx context.Context, rdb *redis.Client, channel string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := rdb.PubSubNumSub(ctx, channel).Result()
		return err == nil && got[channel] == n
	}, 5*time.Second, 5*time.Millisecond, "%d subscribers on %s", n, channel)
}

// waitDeploymentSubscribers waits until channel has n subscribers of the
// kind the runtime makes on d (sharded ones on a cluster).
func waitDeploymentSubscribers(t testing.TB, ctx context.Context, d *deployment, channel string, n int64) {
	t.Helper()
	node := d.nodeOf(t, channel)
	verb := "numsub"
	if d.cluster != nil {
		verb = "shardnumsub"
	}
	require.Eventually(t, func() bool {
		res, err := node.Do(ctx, "pubsub", verb, channel).Slice()
		return err == nil && len(res) == 2 && res[1] == n
	}, 5*time.Second, 5*time.Millisecond, "%d subscribers on %s", n, channel)
}

// subscriptions lists, over every server of d, the channels matching
// pattern that have subscribers of the kind the runtime makes on d (sharded
// ones on a cluster), those of the other kind, and counts the pattern
// subscriptions.
func subscriptions(t testing.TB, ctx context.Context, d *deployment, pattern string) (channels, others []string, patterns int64) {
	t.Helper()
	for _, s := range d.servers {
		node := client(t, s.Addr)
		plain, err := node.PubSubChannels(ctx, pattern).Result()
		require.NoError(t, err)
		sharded, err := node.PubSubShardChannels(ctx, pattern).Result()
		require.NoError(t, err)
		n, err := node.PubSubNumPat(ctx).Result()
		require.NoError(t, err)
		mine, other := plain, sharded
		if d.cluster != nil {
			mine, other = sharded, plain
		}
		channels, others, patterns = append(channels, mine...), append(others, other...), patterns+n
	}
	return channels, others, patterns
}

// subscribe subscribes rdb to channel the way the runtime's scripts publish
// on d: SSUBSCRIBE on a cluster, SUBSCRIBE otherwise.
func subscribe(ctx context.Context, d *deployment, rdb redis.UniversalClient, channel string) *redis.PubSub {
	if d.cluster != nil {
		return rdb.SSubscribe(ctx, channel)
	}
	return rdb.Subscribe(ctx, channel)
}

// Items offered out of order land in due order, each at most 100 ms after
// it is due.
func TestDelayedQueueDeliversInDueOrderOnTime(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		q := rt.DelayedQueue("dq-order")
		defer q.Close()
		bq := rt.BlockingQueue("dq-order")

		offered := map[string]time.Time{} // due time by our clock, from before the offer
		for _, n := range []int{1, 5, 4, 2, 3} {
			delay := time.Duration(n) * time.Second
			at := time.Now()
			require.NoError(t, q.Offer(ctx, fmt.Appendf(nil, "%d", n), delay))
			offered[fmt.Sprint(n)] = at.Add(delay)
		}
		var got []string
		for range 5 {
			v, err := bq.Take(ctx)
			require.NoError(t, err)
			arrived := time.Now()
			due := offered[string(v)]
			late := arrived.Sub(due)
			t.Logf("item %s: %v after due", v, late)
			// The server's ms clock may round a due time down by up to 1 ms.
			assert.GreaterOrEqual(t, late, -2*time.Millisecond, "item %s came early", v)
			assert.LessOrEqual(t, late, 100*time.Millisecond, "item %s came late", v)
			got = append(got, string(v))
		}
		assert.Equal(t, []string{"1", "2", "3", "4", "5"}, got)
	})
}

// Equal payloads stay separate items; Remove, Poll and Clear take items out
// before they are due, and the layout is Redisson's.
func TestDelayedQueueViewsAndLayout(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		const name = "dq-views"
		q := rt.DelayedQueue(name)
		defer q.Close()

		// The due time of every new earliest item is published.
		sub := subscribe(ctx, d, rdb, "redisson_delay_queue_channel:{"+name+"}")
		defer sub.Close()
		_, err := sub.Receive(ctx)
		require.NoError(t, err)

		node := d.nodeOf(t, name) // every key of the queue is in name's slot
		before := serverMs(t, ctx, node)
		for _, it := range []struct {
			v     string
			delay time.Duration
		}{{"a", 400 * time.Millisecond}, {"a", 400 * time.Millisecond}, {"b", 400 * time.Millisecond}, {"c", time.Hour}, {"d", 300 * time.Millisecond}} {
			require.NoError(t, q.Offer(ctx, []byte(it.v), it.delay))
		}
		after := serverMs(t, ctx, node)
		// "a" is announced first; an equal due time may sort a later item first
		// (ties go by member bytes), which is then announced too; "d" last.
		var heads []int64
		for len(heads) < 5 {
			msg, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			var due int64
			_, err = fmt.Sscan(msg.Payload, &due)
			require.NoError(t, err)
			heads = append(heads, due)
			if due <= after+300 {
				break // d's
			}
		}
		first, last := heads[0], heads[len(heads)-1]
		assert.True(t, first >= before+400 && first <= after+400, "due of a: %d in [%d, %d]", first, before+400, after+400)
		assert.True(t, last >= before+300 && last <= after+300, "due of d: %d in [%d, %d]", last, before+300, after+300)

		// Redisson's keys and member encoding.
		members, err := rdb.LRange(ctx, "redisson_delay_queue:{"+name+"}", 0, -1).Result()
		require.NoError(t, err)
		require.Len(t, members, 5)
		for i, want := range []string{"a", "a", "b", "c", "d"} {
			m := members[i]
			require.Equal(t, byte(8), m[0])
			require.Equal(t, uint64(len(want)), binary.LittleEndian.Uint64([]byte(m[9:17])))
			require.Equal(t, want, m[17:])
			score, err := rdb.ZScore(ctx, "redisson_delay_queue_timeout:{"+name+"}", m).Result()
			require.NoError(t, err)
			assert.Greater(t, score, float64(before))
		}
		assert.NotEqual(t, members[0], members[1], "equal payloads are distinct members")

		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 5, n)
		ok, err := q.Contains(ctx, []byte("c"))
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = q.Remove(ctx, []byte("b"))
		require.NoError(t, err)
		assert.True(t, ok, "b removed before it was due")
		ok, err = q.Remove(ctx, []byte("zzz"))
		require.NoError(t, err)
		assert.False(t, ok)
		v, ok, err := q.Poll(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "a", string(v), "Poll takes the oldest")

		// Left: a@400ms, c@1h, d@300ms. After 700 ms a and d arrive, b never.
		time.Sleep(700 * time.Millisecond)
		list, err := rdb.LRange(ctx, name, 0, -1).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{"d", "a"}, list)
		ok, err = q.Contains(ctx, []byte("a"))
		require.NoError(t, err)
		assert.False(t, ok, "moved items are no longer pending")
		require.NoError(t, q.Clear(ctx))
		n, err = q.Len(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		exists, err := rdb.Exists(ctx, "redisson_delay_queue_timeout:{"+name+"}", "redisson_delay_queue:{"+name+"}").Result()
		require.NoError(t, err)
		assert.Zero(t, exists)
	})
}

// Items offered by a process that then exits are delivered once another
// process opens the queue.
func TestDelayedItemsOfAnExitedProducerAreDelivered(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 30*time.Second)
		const name, count = "dq-orphans", 20
		w := spawn(t, "dq-offer-exit", with(d.workerEnv(), map[string]string{"QUEUE": name, "COUNT": fmt.Sprint(count), "DELAY_MS": "2000"}))
		w.expect(t, "OFFERED", 10*time.Second)
		w.wait(t, 10*time.Second)
		// Let every item come due with nobody moving it. (2 s of delay leave
		// the producer time to offer and exit first, even on a loaded machine.)
		time.Sleep(2200 * time.Millisecond)
		n, err := rdb.LLen(ctx, name).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing moved them while no process had the queue open")

		opened := time.Now()
		q := rt.DelayedQueue(name)
		defer q.Close()
		bq := rt.BlockingQueue(name)
		seen := map[string]bool{}
		for range count {
			v, err := bq.Take(ctx)
			require.NoError(t, err)
			seen[string(v)] = true
		}
		assert.Len(t, seen, count)
		assert.Less(t, time.Since(opened), time.Second, "delivered as soon as the queue was opened")
	})
}

// Three processes each run a mover: every one of 1000 items with random
// delays is delivered exactly once.
func TestDelayedQueueExactlyOnceWithThreeMovers(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 60*time.Second)
		const name, procs, per = "dq-race", 3, 334
		var ws []*worker
		for p := range procs {
			ws = append(ws, spawn(t, "dq-mover", with(d.workerEnv(), map[string]string{
				"QUEUE": name, "PROC": fmt.Sprint(p), "COUNT": fmt.Sprint(per), "MAX_DELAY_MS": "3000",
			})))
		}
		for _, w := range ws {
			w.expect(t, "READY", 10*time.Second)
		}
		waitDeploymentSubscribers(t, ctx, d, "redisson_delay_queue_channel:{"+name+"}", procs)
		for _, w := range ws {
			w.expect(t, "OFFERED", 20*time.Second)
		}
		bq := rt.BlockingQueue(name)
		seen := map[string]int{}
		for range procs * per {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			v, err := bq.Take(tctx)
			cancel()
			require.NoError(t, err, "after %d items", len(seen))
			seen[string(v)]++
		}
		for v, n := range seen {
			assert.Equal(t, 1, n, "item %s delivered %d times", v, n)
		}
		assert.Len(t, seen, procs*per)
		// Nothing more arrives, nothing is left.
		time.Sleep(500 * time.Millisecond)
		n, err := rdb.LLen(ctx, name).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no duplicate was moved")
		n, err = rdb.ZCard(ctx, "redisson_delay_queue_timeout:{"+name+"}").Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

// A due time whose announcement is lost (never published, or published
// while the pub/sub connection is down) still delivers within the safety
// interval. The items are written the way a Redisson producer writes them.
func TestDelayedQueueSurvivesLostPublishes(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 30*time.Second)
		const name = "dq-lost"
		q := rt.DelayedQueue(name)
		defer q.Close()
		bq := rt.BlockingQueue(name)
		channel := "redisson_delay_queue_channel:{" + name + "}"
		node := d.nodeOf(t, channel) // the queue's keys and channel share a slot
		waitDeploymentSubscribers(t, ctx, d, channel, 1)
		time.Sleep(100 * time.Millisecond) // the mover's first move found nothing

		// A Redisson-style offer without its PUBLISH.
		offerSilently := func(id, value string, delay time.Duration) time.Time {
			due := serverMs(t, ctx, node) + delay.Milliseconds()
			m := redissonMember(id, value)
			require.NoError(t, rdb.ZAdd(ctx, "redisson_delay_queue_timeout:{"+name+"}", redis.Z{Score: float64(due), Member: m}).Err())
			require.NoError(t, rdb.RPush(ctx, "redisson_delay_queue:{"+name+"}", m).Err())
			return time.Now().Add(delay)
		}
		const bound = actorlockSafetyInterval + 200*time.Millisecond

		due := offerSilently("silent-1", "never announced", 300*time.Millisecond)
		v, err := bq.Take(ctx)
		require.NoError(t, err)
		assert.Equal(t, "never announced", string(v))
		late := time.Since(due)
		t.Logf("unannounced item: %v after due", late)
		assert.Less(t, late, bound)

		killed, err := node.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Int()
		require.NoError(t, err)
		require.GreaterOrEqual(t, killed, 1)
		due = offerSilently("silent-2", "pub/sub down", 300*time.Millisecond)
		v, err = bq.Take(ctx)
		require.NoError(t, err)
		assert.Equal(t, "pub/sub down", string(v))
		late = time.Since(due)
		t.Logf("item offered while pub/sub was down: %v after due", late)
		assert.Less(t, late, bound)
	})
}

// actorlockSafetyInterval mirrors the actors package's safetyInterval (the mover's safety
// tick), which the test asserts as a bound.
const actorlockSafetyInterval = 2 * time.Second

// 10,000 items due at once are all moved, and no script call moves more
// than 100 (watched with MONITOR: a call's commands are contiguous in it).
func TestTenThousandDueItemsMoveInBoundedBatches(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 60*time.Second)
		const name, count = "dq-bulk", 10_000
		mon := startMonitor(t, d.serverOf(t, name).Addr)

		q := rt.DelayedQueue(name)
		defer q.Close()
		// Far enough out for 10,000 offers on a loaded machine (race
		// detector, parallel tests): all must be offered before it.
		dueAt := time.Now().Add(5 * time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for w := range 32 {
			wg.Go(func() {
				for i := w; i < count; i += 32 {
					if err := q.Offer(ctx, fmt.Appendf(nil, "bulk-%d", i), max(time.Until(dueAt), 0)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		offered := time.Now()
		require.True(t, offered.Before(dueAt), "offering took too long for the test to mean anything")
		require.Eventually(t, func() bool {
			n, err := rdb.LLen(ctx, name).Result()
			return err == nil && n == count
		}, 20*time.Second, 10*time.Millisecond)
		moved := time.Since(dueAt)
		t.Logf("10,000 items moved within %v of their due time", moved)
		assert.Less(t, moved, 3*time.Second)

		batches := mon.stop(t)
		total, largest := 0, 0
		for _, b := range batches {
			total += b
			largest = max(largest, b)
		}
		t.Logf("MONITOR: %d items pushed by scripts in %d calls, at most %d per call", total, len(batches), largest)
		assert.Equal(t, count, total)
		assert.LessOrEqual(t, largest, 100)
		assert.GreaterOrEqual(t, len(batches), 100)
	})
}

type monitor struct {
	conn    net.Conn
	admin   *redis.Client // runs the end marker
	done    chan struct{} // closed when the reader returns
	ended   chan struct{} // closed when the reader saw the end marker
	mu      sync.Mutex
	batches []int // values pushed by each script's RPUSH into the destination
}

// monitorEnd is the argument of the ECHO that marks the end of a MONITOR
// stream.
const monitorEnd = "actorlock-monitor-end"

// startMonitor runs MONITOR on a raw connection and records, for every RPUSH
// a script runs, how many values it pushes.
func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	m := &monitor{conn: conn, admin: client(t, addr), done: make(chan struct{}), ended: make(chan struct{})}
	r := bufio.NewReaderSize(conn, 1<<20)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", line)
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if strings.Contains(line, ` "echo" "`+monitorEnd+`"`) {
				close(m.ended)
				return
			}
			// +1700000000.123456 [0 lua] "rpush" "dq-bulk" "bulk-1" ...
			// (offers push into "redisson_delay_queue:{dq-bulk}" instead)
			if !strings.Contains(line, " lua] \"rpush\" \"dq-bulk\" ") {
				continue
			}
			m.mu.Lock()
			m.batches = append(m.batches, strings.Count(line, "\"bulk-"))
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); <-m.done })
	return m
}

// stop returns the batches of every script the server ran before stop was
// called. MONITOR lines reach the monitor behind the replies other clients
// get (the server may still hold them in the monitor's output buffer), so
// it runs a marker command and reads up to it.
func (m *monitor) stop(t *testing.T) []int {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	require.NoError(t, m.admin.Echo(ctx, monitorEnd).Err())
	select {
	case <-m.done:
	case <-ctx.Done():
		t.Fatal("the MONITOR stream did not reach its end marker")
	}
	select {
	case <-m.ended:
	default:
		t.Fatal("the MONITOR stream ended before its end marker")
	}
	_ = m.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.batches...)
}

func TestBlockingQueueOfferPollTakeLen(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		q := rt.BlockingQueue("bq")
		_, ok, err := q.Poll(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, q.Offer(ctx, []byte("x")))
		require.NoError(t, q.Offer(ctx, []byte("")))
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 2, n)
		v, ok, err := q.Poll(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "x", string(v))
		v, err = q.Take(ctx)
		require.NoError(t, err)
		assert.Empty(t, v, "an empty item is an item")

		// A waiting Take is woken by an offer from anywhere.
		got := make(chan time.Time, 1)
		go func() {
			if v, err := q.Take(ctx); assert.NoError(t, err) {
				assert.Equal(t, "late", string(v))
				got <- time.Now()
			}
		}()
		time.Sleep(300 * time.Millisecond)
		offered := time.Now()
		require.NoError(t, rdb.RPush(ctx, "bq", "late").Err())
		select {
		case at := <-got:
			assert.Less(t, at.Sub(offered), 50*time.Millisecond)
		case <-time.After(3 * time.Second):
			t.Fatal("Take was not woken")
		}

		// Take honours its context.
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = q.Take(tctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 300*time.Millisecond)
	})
}

// Takes cancelled while items arrive never lose an item: every item offered
// is either taken by a Take that returned it or still in the queue.
func TestCancelledTakesLoseNoItem(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 60*time.Second)
		q := rt.BlockingQueue("bq-cancel")
		const rounds = 200
		taken := 0
		for i := range rounds {
			tctx, cancel := context.WithCancel(ctx)
			go func() {
				time.Sleep(time.Duration(i%7) * 100 * time.Microsecond)
				_ = rdb.RPush(ctx, "bq-cancel", fmt.Sprint(i)).Err()
				time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
				cancel()
			}()
			if _, err := q.Take(tctx); err == nil {
				taken++
			} else {
				require.ErrorIs(t, err, context.Canceled)
			}
			cancel()
		}
		// Give back calls run before the answer; the last BLPOP round may still
		// be handing an item back.
		require.Eventually(t, func() bool {
			n, err := rdb.LLen(ctx, "bq-cancel").Result()
			return err == nil && int(n)+taken == rounds
		}, 5*time.Second, 20*time.Millisecond, "items lost: taken %d", taken)
		t.Logf("taken %d of %d, the rest still queued", taken, rounds)
	})
}

// Offers and Takes by protobuf message, from an actor.
func TestQueueMessages(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		sys := actorkit.System(rt)
		p := spawnProbe(t, sys)

		p.send(sys, actorkit.PID(rt), &messages.OfferRequest{RequestId: "o1", Name: "mq", Payload: []byte("now")})
		resp := receive[*messages.OfferResponse](t, p, 5*time.Second)
		assert.Equal(t, "o1", resp.RequestId)
		assert.Nil(t, resp.Error)
		p.send(sys, actorkit.PID(rt), &messages.OfferRequest{RequestId: "o2", Name: "mq", Payload: []byte("later"), DelayMs: 300})
		resp = receive[*messages.OfferResponse](t, p, 5*time.Second)
		assert.Nil(t, resp.Error)

		p.send(sys, actorkit.PID(rt), &messages.TakeRequest{RequestId: "t1", Name: "mq", WaitIndefinitely: true})
		tr := receive[*messages.TakeResponse](t, p, 5*time.Second)
		assert.True(t, tr.Taken)
		assert.Equal(t, "now", string(tr.Payload))
		start := time.Now()
		p.send(sys, actorkit.PID(rt), &messages.TakeRequest{RequestId: "t2", Name: "mq", WaitMs: 5000})
		tr = receive[*messages.TakeResponse](t, p, 5*time.Second)
		assert.True(t, tr.Taken)
		assert.Equal(t, "later", string(tr.Payload))
		assert.Greater(t, time.Since(start), 150*time.Millisecond, "the delayed item waited for its due time")

		// An empty queue: a single attempt, a bounded wait, a cancel.
		p.send(sys, actorkit.PID(rt), &messages.TakeRequest{RequestId: "t3", Name: "mq"})
		tr = receive[*messages.TakeResponse](t, p, 5*time.Second)
		assert.False(t, tr.Taken)
		assert.Nil(t, tr.Error)
		p.send(sys, actorkit.PID(rt), &messages.TakeRequest{RequestId: "t4", Name: "mq", WaitMs: 200})
		tr = receive[*messages.TakeResponse](t, p, 5*time.Second)
		assert.False(t, tr.Taken)
		p.send(sys, actorkit.PID(rt), &messages.TakeRequest{RequestId: "t5", Name: "mq", WaitIndefinitely: true})
		time.Sleep(100 * time.Millisecond)
		p.send(sys, actorkit.PID(rt), &messages.CancelWaitRequest{RequestId: "t5", Name: "mq", Kind: messages.WaitKind_WAIT_KIND_TAKE})
		tr = receive[*messages.TakeResponse](t, p, 5*time.Second)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_CANCELED, tr.GetError().GetCode())

		// Bad requests are refused.
		for _, m := range []*messages.TakeRequest{
			{RequestId: "", Name: "mq"}, {RequestId: "x", Name: ""}, {RequestId: "x", Name: "mq", WaitMs: -1},
			{RequestId: "x", Name: "mq", WaitMs: 5, WaitIndefinitely: true},
		} {
			p.send(sys, actorkit.PID(rt), m)
			tr = receive[*messages.TakeResponse](t, p, 5*time.Second)
			assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, tr.GetError().GetCode(), "%v", m)
		}
		p.send(sys, actorkit.PID(rt), &messages.OfferRequest{RequestId: "x", Name: "mq", DelayMs: -1})
		resp = receive[*messages.OfferResponse](t, p, 5*time.Second)
		assert.Equal(t, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, resp.GetError().GetCode())
		n, err := rdb.LLen(ctx, "mq").Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

// Bad input gets sentinel errors; Close fails a waiting Take with ErrClosed
// and stops every mover and waiter.
func TestQueueBadInputAndClose(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb := d.client(t)
		rt, err := actorlock.New(rdb, actorlock.WithIdleTimeout(100*time.Millisecond))
		require.NoError(t, err)
		ctx := ctxFor(t, 20*time.Second)

		for _, name := range []string{"", strings.Repeat("x", 64<<10+1)} {
			assert.ErrorIs(t, rt.DelayedQueue(name).Offer(ctx, nil, 0), actorlock.ErrInvalidArgument)
			_, err := rt.BlockingQueue(name).Take(ctx)
			assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		}
		q := rt.DelayedQueue("dq-close")
		assert.ErrorIs(t, q.Offer(ctx, nil, -time.Second), actorlock.ErrInvalidArgument)
		//lint:ignore SA1012 a nil context must be refused, not panic
		assert.ErrorIs(t, q.Offer(nil, nil, 0), actorlock.ErrInvalidArgument)
		require.NoError(t, q.Offer(ctx, []byte("x"), 50*time.Millisecond))
		st, err := rt.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, st.DelayedQueueMovers)
		require.NoError(t, q.Close())
		assert.ErrorIs(t, q.Offer(ctx, nil, 0), actorlock.ErrClosed)
		// The item is delivered, then the mover goes idle and stops.
		require.Eventually(t, func() bool {
			st, err := rt.Stats(ctx)
			return err == nil && st.DelayedQueueMovers == 0
		}, 5*time.Second, 20*time.Millisecond)
		n, err := rdb.LLen(ctx, "dq-close").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the pending item was delivered before the mover stopped")

		// Semaphore, latch and queue waiters keep no state once idle.
		_, err = rt.Semaphore("sem-idle").TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.NoError(t, rt.CountDownLatch("latch-idle").Await(ctx))
		_, err = rt.BlockingQueue("dq-close").Take(ctx)
		require.NoError(t, err)
		st, err = rt.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, st.PrimitiveActors)
		require.Eventually(t, func() bool {
			st, err := rt.Stats(ctx)
			return err == nil && st == observe.Stats{}
		}, 5*time.Second, 20*time.Millisecond, "per-name state must go once idle")

		took := make(chan error, 1)
		go func() {
			_, err := rt.BlockingQueue("bq-close").Take(ctx)
			took <- err
		}()
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		require.NoError(t, rt.Close(ctx))
		assert.ErrorIs(t, <-took, actorlock.ErrClosed)
		assert.Less(t, time.Since(start), 2*time.Second, "Close waits at most one blocking-pop round")
		_, err = rt.BlockingQueue("bq-close").Take(ctx)
		assert.ErrorIs(t, err, actorlock.ErrClosed)
		channels, err := rdb.PubSubChannels(ctx, "*").Result()
		require.NoError(t, err)
		assert.Empty(t, channels)
		assert.False(t, errors.Is(err, actorlock.ErrClosed))
		channels, others, _ := subscriptions(t, ctx, d, "*")
		assert.Empty(t, channels, "no subscription is left on any server")
		assert.Empty(t, others)
	})
}
