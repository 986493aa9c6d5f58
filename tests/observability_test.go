package tests

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/observe"
)

// obsLease is the watchdog lease where timing matters: a loaded machine
// under -race must not lose a hold by accident.
const obsLease = 2 * time.Second

// metricsReader is a runtime's metrics as a ManualReader collects them.
type metricsReader struct {
	t *testing.T
	r *sdkmetric.ManualReader
}

func newMetrics(t *testing.T) (*metricsReader, actorlock.Option) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &metricsReader{t: t, r: r}, actorlock.WithMeterProvider(mp)
}

func (m *metricsReader) collect() map[string]metricdata.Aggregation {
	var rm metricdata.ResourceMetrics
	require.NoError(m.t, m.r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			out[mt.Name] = mt.Data
		}
	}
	return out
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// sum adds up the int64 counter or up-down counter name over the data
// points with the attributes in want.
func (m *metricsReader) sum(name string, want map[string]string) int64 {
	var n int64
	switch d := m.collect()[name].(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n += p.Value
			}
		}
	case nil:
	default:
		m.t.Fatalf("%s is a %T", name, d)
	}
	return n
}

// count adds up the counts of histogram name over the data points with the
// attributes in want.
func (m *metricsReader) count(name string, want map[string]string) uint64 {
	var n uint64
	switch d := m.collect()[name].(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n += p.Count
			}
		}
	case nil:
	default:
		m.t.Fatalf("%s is a %T", name, d)
	}
	return n
}

// eventLog records what WithEvents reports.
type eventLog struct {
	mu     sync.Mutex
	events []observe.Event
	added  chan struct{}
}

func newEventLog() (*eventLog, actorlock.Option) {
	l := &eventLog{added: make(chan struct{}, 1)}
	return l, actorlock.WithEvents(func(e observe.Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
		select {
		case l.added <- struct{}{}:
		default:
		}
	})
}

func (l *eventLog) of(kind observe.EventKind, name string) []observe.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []observe.Event
	for _, e := range l.events {
		if e.Kind == kind && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// wait returns the first event of kind for name, failing after d.
func (l *eventLog) wait(t *testing.T, kind observe.EventKind, name string, d time.Duration) observe.Event {
	t.Helper()
	deadline := time.After(d)
	for {
		if es := l.of(kind, name); len(es) > 0 {
			return es[0]
		}
		select {
		case <-l.added:
		case <-deadline:
			t.Fatalf("no %v event for %q within %v", kind, name, d)
		}
	}
}

// waitQueued waits until a waiter of this runtime has met the holder of
// lock name: it then listens on the lock's channel.
func waitQueued(t *testing.T, ctx context.Context, rdb *redis.Client, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(ctx, "redisson_lock__channel:{"+name+"}").Result()
		return err == nil && n["redisson_lock__channel:{"+name+"}"] == 1
	}, 10*time.Second, 10*time.Millisecond)
}

// waitFairQueued waits until n waiters are in the Redis queue of fair lock
// name.
func waitFairQueued(t *testing.T, ctx context.Context, l *actorlock.Lock, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		w, err := l.Waiters(ctx)
		return err == nil && len(w) == n
	}, 10*time.Second, 10*time.Millisecond)
}

// The instruments count what happened, with the attributes
// docs/observability.md documents: acquisitions by kind and outcome, holds up then down to 0,
// hand-offs local and remote, a loss by DEL, the scripts called.
func TestMetricsCountAcquisitionsHoldsHandoffsAndLosses(t *testing.T) {
	t.Parallel()
	m, opt := newMetrics(t)
	_, rdb, rt := setup(t, opt, actorlock.WithWatchdog(obsLease))
	other := newRuntime(t, rdb, actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)

	a, err := rt.FairLock("m:a").Acquire(ctx)
	require.NoError(t, err)
	r, err := rt.ReadWriteLock("m:rw").ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	_, err = rt.FairLock("m:a").TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	assert.EqualValues(t, 2, m.sum("actorlock.held", nil))
	assert.EqualValues(t, 1, m.sum("actorlock.held", map[string]string{"kind": "read"}))

	// A waiter, then a local hand-off to it (the fair lock's waiters are
	// in the Redis queue: we can see it wait).
	got := make(chan *actorlock.Held, 1)
	go func() {
		h, err := rt.FairLock("m:a").Acquire(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	waitFairQueued(t, ctx, rt.FairLock("m:a"), 1)
	assert.EqualValues(t, 1, m.sum("actorlock.waiters", map[string]string{"kind": "fair"}))
	require.NoError(t, a.Unlock(ctx))
	b := <-got
	require.NotNil(t, b)
	assert.EqualValues(t, 1, m.sum("actorlock.handoffs", map[string]string{"kind": "fair", "via": "local"}))
	assert.EqualValues(t, 0, m.sum("actorlock.waiters", nil))

	// A remote hand-off: another runtime's holder releases, our waiter
	// (which met it in Redis, so listens on the lock's channel) gets it.
	x, err := other.Lock("m:r").Acquire(ctx)
	require.NoError(t, err)
	go func() {
		h, err := rt.Lock("m:r").Acquire(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	waitQueued(t, ctx, rdb, "m:r")
	require.NoError(t, x.Unlock(ctx))
	y := <-got
	require.NotNil(t, y)
	assert.EqualValues(t, 1, m.sum("actorlock.handoffs", map[string]string{"kind": "lock", "via": "remote"}))
	assert.EqualValues(t, 2, m.sum("actorlock.handoffs", nil))

	// A loss by DEL.
	c, err := rt.Lock("m:lost").Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, "m:lost").Err())
	select {
	case <-c.Done():
	case <-time.After(obsLease + 5*time.Second):
		t.Fatal("the deleted lock was not reported lost")
	}
	require.ErrorIs(t, c.Err(), actorlock.ErrLost)
	assert.EqualValues(t, 1, m.sum("actorlock.lost", map[string]string{"reason": "gone", "kind": "lock"}))
	assert.EqualValues(t, 1, m.sum("actorlock.lost", nil))

	require.NoError(t, b.Unlock(ctx))
	require.NoError(t, y.Unlock(ctx))
	require.NoError(t, r.Unlock(ctx))
	assert.EqualValues(t, 0, m.sum("actorlock.held", nil), "held goes back to 0")

	assert.EqualValues(t, 2, m.count("actorlock.acquire.duration", map[string]string{"kind": "fair", "outcome": "acquired"}))
	assert.EqualValues(t, 1, m.count("actorlock.acquire.duration", map[string]string{"kind": "fair", "outcome": "not_acquired"}))
	assert.EqualValues(t, 2, m.count("actorlock.acquire.duration", map[string]string{"kind": "lock", "outcome": "acquired"}))
	assert.EqualValues(t, 1, m.count("actorlock.acquire.duration", map[string]string{"kind": "read", "outcome": "acquired"}))
	assert.EqualValues(t, 6, m.count("actorlock.acquire.duration", nil), "only this runtime's")
	assert.EqualValues(t, 5, m.count("actorlock.hold.duration", nil), "a, b, c, r and y ended")
	assert.EqualValues(t, 0, m.sum("actorlock.renewal.failures", nil))

	// The scripts this runtime ran: a's acquisition and b's place in the
	// queue, a's unlock handing over to b, b's unlock; the waiter of m:r
	// tried at least twice (refused, then granted), and c once.
	assert.EqualValues(t, 2, m.sum("actorlock.redis.calls", map[string]string{"script": "fair_acquire"}))
	assert.EqualValues(t, 2, m.sum("actorlock.redis.calls", map[string]string{"script": "fair_unlock"}))
	assert.EqualValues(t, 1, m.sum("actorlock.redis.calls", map[string]string{"script": "rw_read_acquire"}))
	assert.EqualValues(t, 1, m.sum("actorlock.redis.calls", map[string]string{"script": "rw_read_unlock"}))
	assert.GreaterOrEqual(t, m.sum("actorlock.redis.calls", map[string]string{"script": "lock_acquire"}), int64(3))
	assert.EqualValues(t, 1, m.sum("actorlock.redis.calls", map[string]string{"script": "lock_unlock"}), "y's; c's unlock never ran")

	_, isGauge := m.collect()["actorlock.subscriptions"].(metricdata.Gauge[int64])
	assert.True(t, isGauge, "actorlock.subscriptions is reported")
}

// Semaphores, permits and MultiLocks report their acquisitions under their
// own kind; the delayed queue reports how late its items were moved.
func TestMetricsOfOtherPrimitives(t *testing.T) {
	t.Parallel()
	m, opt := newMetrics(t)
	_, _, rt := setup(t, opt, actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)

	sem := rt.Semaphore("m:sem")
	_, err := sem.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, sem.Acquire(ctx, 1))
	ok, err := sem.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok)
	assert.EqualValues(t, 1, m.count("actorlock.acquire.duration", map[string]string{"kind": "semaphore", "outcome": "acquired"}))
	assert.EqualValues(t, 1, m.count("actorlock.acquire.duration", map[string]string{"kind": "semaphore", "outcome": "not_acquired"}))

	g, err := actorlock.MultiLock(rt.Lock("m:x"), rt.Lock("m:y")).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Unlock(ctx))
	assert.EqualValues(t, 1, m.count("actorlock.acquire.duration", map[string]string{"kind": "multi", "outcome": "acquired"}))
	assert.EqualValues(t, 2, m.count("actorlock.acquire.duration", map[string]string{"kind": "lock", "outcome": "acquired"}), "its members")

	q := rt.DelayedQueue("m:q")
	defer q.Close()
	require.NoError(t, q.Offer(ctx, []byte("a"), 100*time.Millisecond))
	require.NoError(t, q.Offer(ctx, []byte("b"), 200*time.Millisecond))
	for range 2 {
		_, err := rt.BlockingQueue("m:q").Take(ctx)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return m.count("actorlock.queue.lateness", nil) == 2 }, 5*time.Second, 10*time.Millisecond)
	h := m.collect()["actorlock.queue.lateness"].(metricdata.Histogram[float64])
	assert.GreaterOrEqual(t, h.DataPoints[0].Sum, 0.0)
	assert.Less(t, h.DataPoints[0].Sum, 2.0, "items are moved within a second of being due")
}

// parentHook records, for every command sent through the client, the span
// its context carries: what a redisotel-style hook would make the parent
// of its command span.
type parentHook struct {
	mu    sync.Mutex
	calls []hookedCall
}

type hookedCall struct {
	cmd    string
	parent trace.SpanContext
}

func (h *parentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *parentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (h *parentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.record(ctx, c)
		}
		return next(ctx, cmds)
	}
}

func (h *parentHook) record(ctx context.Context, cmd redis.Cmder) {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "client", "auth", "select":
		return // setting up a new connection, in the context of its first command
	}
	h.mu.Lock()
	h.calls = append(h.calls, hookedCall{cmd: strings.ToLower(cmd.Name()), parent: trace.SpanContextFromContext(ctx)})
	h.mu.Unlock()
}

// under lists the commands whose context carried span id.
func (h *parentHook) under(id trace.SpanID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.calls {
		if c.parent.SpanID() == id {
			out = append(out, c.cmd)
		}
	}
	return out
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return tracetest.SpanStub{}
}

func spanAttr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// With a TracerProvider, Acquire, Unlock and queue calls have spans under
// the caller's span, and the Redis calls made for them (run by the lock
// actor for Acquire and Unlock) carry those spans: a go-redis tracing hook
// nests its command spans under them.
func TestTraceSpansNestAndRedisCallsCarryThem(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	hook := &parentHook{}
	rdb.AddHook(hook)
	rt := newRuntime(t, rdb, actorlock.WithTracerProvider(tp), actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)

	callerCtx, caller := tp.Tracer("test").Start(ctx, "caller")
	h, err := rt.Lock("t:lock").Acquire(callerCtx)
	require.NoError(t, err)
	require.NoError(t, h.Unlock(callerCtx))
	require.NoError(t, rt.BlockingQueue("t:q").Offer(callerCtx, []byte("x")))
	_, err = rt.BlockingQueue("t:q").Take(callerCtx)
	require.NoError(t, err)
	caller.End()

	spans := exp.GetSpans()
	acq := spanNamed(t, spans, "actorlock.acquire")
	unl := spanNamed(t, spans, "actorlock.unlock")
	offer := spanNamed(t, spans, "actorlock.queue.offer")
	take := spanNamed(t, spans, "actorlock.queue.take")
	for _, s := range []tracetest.SpanStub{acq, unl, offer, take} {
		assert.Equal(t, caller.SpanContext().SpanID(), s.Parent.SpanID(), "%s is a child of the caller's span", s.Name)
		assert.Equal(t, caller.SpanContext().TraceID(), s.SpanContext.TraceID())
	}
	assert.Equal(t, "acquired", spanAttr(acq, "actorlock.outcome").AsString())
	assert.Equal(t, h.Token(), spanAttr(acq, "actorlock.token").AsInt64())
	assert.Equal(t, "lock", spanAttr(acq, "actorlock.kind").AsString())
	assert.GreaterOrEqual(t, spanAttr(acq, "actorlock.wait").AsFloat64(), 0.0)

	// The acquire and unlock scripts ran (on the lock actor's goroutines)
	// under the Acquire's and the Unlock's span.
	// (A fresh server answers the first EVALSHA of each script NOSCRIPT:
	// EVAL follows, under the same span.)
	assert.Contains(t, [][]string{{"evalsha"}, {"evalsha", "eval"}}, hook.under(acq.SpanContext.SpanID()))
	assert.Contains(t, [][]string{{"evalsha"}, {"evalsha", "eval"}}, hook.under(unl.SpanContext.SpanID()))
	assert.Contains(t, hook.under(offer.SpanContext.SpanID()), "evalsha")
	assert.Empty(t, hook.under(caller.SpanContext().SpanID()), "every call is under an actorlock span")
}

// Without a TracerProvider of ours, the Redis calls made for a caller still
// carry the caller's own span.
func TestRedisCallsCarryTheCallersSpanWithoutOurTracer(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	hook := &parentHook{}
	rdb.AddHook(hook)
	rt := newRuntime(t, rdb, actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)

	callerCtx, caller := tp.Tracer("test").Start(ctx, "caller")
	h, err := rt.FairLock("t:fair").Acquire(callerCtx)
	require.NoError(t, err)
	require.NoError(t, h.Unlock(callerCtx))
	caller.End()
	assert.Equal(t, []string{"evalsha", "eval", "evalsha", "eval"}, hook.under(caller.SpanContext().SpanID()), "acquire, then unlock, each new to the server")
	assert.Len(t, exp.GetSpans(), 1, "only the caller's span")
}

// Acquired, released, gave up and handed off are reported with the hold's
// fields.
func TestEventsAcquiredReleasedGaveUpHandedOff(t *testing.T) {
	t.Parallel()
	log, opt := newEventLog()
	_, _, rt := setup(t, opt, actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)

	h, err := rt.Lock("e:a").Acquire(ctx)
	require.NoError(t, err)
	acq := log.wait(t, observe.EventAcquired, "e:a", 5*time.Second)
	assert.Equal(t, h.Owner(), acq.Owner)
	assert.Equal(t, h.Token(), acq.Token)
	assert.Equal(t, "lock", acq.LockKind)

	// Given up: the wait time is over.
	started := time.Now()
	_, err = rt.Lock("e:a").Acquire(ctx, actorlock.WaitTime(time.Second))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	gave := log.wait(t, observe.EventGaveUp, "e:a", 5*time.Second)
	assert.ErrorIs(t, gave.Err, actorlock.ErrNotAcquired)
	assert.GreaterOrEqual(t, gave.Wait, time.Second)
	assert.LessOrEqual(t, gave.Wait, time.Since(started))
	assert.Empty(t, log.of(observe.EventGaveUp, "e:other"))

	require.NoError(t, h.Unlock(ctx))
	rel := log.wait(t, observe.EventReleased, "e:a", 5*time.Second)
	assert.Equal(t, h.Token(), rel.Token)
	assert.Equal(t, h.Owner(), rel.Owner)
	assert.NoError(t, rel.Err)
	assert.Positive(t, rel.Held)

	// Handed off: a waiter of this runtime gets the fair lock from f's
	// release, in the same script.
	f, err := rt.FairLock("e:f").Acquire(ctx)
	require.NoError(t, err)
	got := make(chan *actorlock.Held, 1)
	go func() {
		w, err := rt.FairLock("e:f").Acquire(ctx)
		assert.NoError(t, err)
		got <- w
	}()
	waitFairQueued(t, ctx, rt.FairLock("e:f"), 1)
	require.NoError(t, f.Unlock(ctx))
	w := <-got
	require.NotNil(t, w)
	ho := log.wait(t, observe.EventHandedOff, "e:f", 5*time.Second)
	assert.Equal(t, f.Owner(), ho.From)
	assert.Equal(t, w.Owner(), ho.Owner)
	assert.Equal(t, "fair", ho.LockKind)
	require.NoError(t, w.Unlock(ctx))
	require.Eventually(t, func() bool { return len(log.of(observe.EventReleased, "e:f")) == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Len(t, log.of(observe.EventAcquired, "e:f"), 2)
	assert.Len(t, log.of(observe.EventAcquired, "e:a"), 1)

	// Close releases what is held, and delivers the events before it
	// returns.
	c, err := rt.Lock("e:c").Acquire(ctx)
	require.NoError(t, err)
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Close(closeCtx))
	rels := log.of(observe.EventReleased, "e:c")
	require.Len(t, rels, 1)
	assert.ErrorIs(t, rels[0].Err, actorlock.ErrClosed)
	assert.Equal(t, c.Token(), rels[0].Token)
	assert.Empty(t, rt.Held())
	st, err := rt.Stats(ctx)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	assert.Zero(t, st.DroppedEvents, "no event dropped, Close's releases included")
}

// A lost hold is reported once, with its reason, whatever lost it.
func TestEventsLost(t *testing.T) {
	t.Parallel()
	type loss func(t *testing.T, ctx context.Context, srv *redisserver.Server, admin *redis.Client)
	for _, tc := range []struct {
		name   string
		reason string
		debug  bool
		lease  bool // a fixed lease (no watchdog renewal races the loss)
		lose   loss
	}{
		{name: "deleted", reason: "gone", lose: func(t *testing.T, ctx context.Context, _ *redisserver.Server, admin *redis.Client) {
			require.NoError(t, admin.Del(ctx, "e:lost").Err())
		}},
		// A re-entry meets another owner.
		{name: "taken", reason: "taken", lease: true, lose: func(t *testing.T, ctx context.Context, _ *redisserver.Server, admin *redis.Client) {
			require.NoError(t, admin.Del(ctx, "e:lost").Err())
			require.NoError(t, admin.HSet(ctx, "e:lost", "intruder:1", 1).Err())
		}},
		{name: "frozen server (DEBUG SLEEP)", reason: "renewal_failed", debug: true, lose: func(t *testing.T, ctx context.Context, _ *redisserver.Server, admin *redis.Client) {
			debugSleep(t, ctx, admin, obsLease+2*time.Second)
		}},
		{name: "server restarted", reason: "gone", lose: func(t *testing.T, _ context.Context, srv *redisserver.Server, _ *redis.Client) {
			require.NoError(t, srv.Restart())
		}},
		{name: "fixed lease ran out", reason: "local_deadline", lease: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var extra []string
			if tc.debug {
				extra = []string{"--enable-debug-command", "local"}
			}
			srv := startRedis(t, extra...)
			rdb, admin := client(t, srv.Addr), client(t, srv.Addr)
			log, opt := newEventLog()
			rt := newRuntime(t, rdb, opt, actorlock.WithWatchdog(obsLease))
			ctx := ctxFor(t, 30*time.Second)
			var opts []actorlock.AcquireOption
			if tc.lease {
				opts = append(opts, actorlock.LeaseTime(obsLease))
			}
			h, err := rt.Lock("e:lost").Acquire(ctx, opts...)
			require.NoError(t, err)
			if tc.lose != nil {
				tc.lose(t, ctx, srv, admin)
			}
			if tc.reason == "taken" {
				// The re-entry's context is the Held's, ended by the loss.
				_, err := rt.Lock("e:lost").TryAcquire(h.Context())
				require.ErrorIs(t, err, actorlock.ErrLost)
			}
			e := log.wait(t, observe.EventLost, "e:lost", 2*obsLease+5*time.Second)
			assert.Equal(t, tc.reason, e.Reason)
			assert.ErrorIs(t, e.Err, actorlock.ErrLost)
			assert.Equal(t, h.Err(), e.Err, "the event carries the Held's Err")
			assert.Equal(t, h.Token(), e.Token)
			assert.Equal(t, h.Owner(), e.Owner)
			assert.Empty(t, log.of(observe.EventReleased, "e:lost"))
			assert.Empty(t, rt.Held())
			closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, rt.Close(closeCtx))
			assert.Len(t, log.of(observe.EventLost, "e:lost"), 1, "reported once")
		})
	}
}

// When renewals fail, each failure is reported with Redis's error, then
// the hold is lost for that reason once its lease is over.
func TestEventsRenewalFailedCarriesTheError(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	// Without go-redis's retries (and their back-off), a renewal fails as
	// soon as its dial is refused, well within the lease.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	log, opt := newEventLog()
	m, mopt := newMetrics(t)
	rt := newRuntime(t, rdb, opt, mopt, actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)
	h, err := rt.Lock("e:renew").Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, srv.Kill()) // renewals now fail at once: connection refused

	e := log.wait(t, observe.EventRenewalFailed, "e:renew", obsLease)
	assert.Equal(t, h.Owner(), e.Owner)
	require.Error(t, e.Err)
	var opErr *net.OpError
	assert.True(t, errors.As(e.Err, &opErr), "the Redis client's error: %v", e.Err)
	assert.NoError(t, h.Err(), "not lost yet: the lease is not over")

	lost := log.wait(t, observe.EventLost, "e:renew", obsLease+5*time.Second)
	assert.Equal(t, "renewal_failed", lost.Reason)
	assert.GreaterOrEqual(t, m.sum("actorlock.renewal.failures", nil), int64(1))
	assert.EqualValues(t, 1, m.sum("actorlock.lost", map[string]string{"reason": "renewal_failed"}))
}

// rt.Held lists the runtime's holds with their fields; a hold leaves the
// list when it is unlocked or lost.
func TestRuntimeHeldListsHolds(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t, actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)
	assert.Empty(t, rt.Held())

	before := time.Now()
	a, err := rt.Lock("h:a").Acquire(ctx)
	require.NoError(t, err)
	f, err := rt.FairLock("h:f").Acquire(ctx, actorlock.LeaseTime(time.Minute))
	require.NoError(t, err)
	r, err := rt.ReadWriteLock("h:rw").ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	again, err := rt.Lock("h:a").Acquire(a.Context()) // a re-entry: one more acquisition
	require.NoError(t, err)

	held := rt.Held()
	require.Len(t, held, 4)
	want := []struct {
		h    *actorlock.Held
		kind string
	}{{a, "lock"}, {f, "fair"}, {r, "read"}, {again, "lock"}}
	for i, w := range want {
		got := held[i]
		assert.Equal(t, w.h.Name(), got.Name)
		assert.Equal(t, w.kind, got.Kind)
		assert.Equal(t, w.h.Owner(), got.Owner)
		assert.Equal(t, w.h.Token(), got.Token)
		assert.Equal(t, w.h.Lease(), got.Lease)
		assert.False(t, got.Since.Before(before))
		assert.False(t, got.Since.After(time.Now()))
	}
	assert.Equal(t, obsLease, held[0].Lease)
	assert.Equal(t, time.Minute, held[1].Lease)
	assert.Equal(t, a.Owner(), held[3].Owner, "the re-entry acts as the same owner")

	require.NoError(t, again.Unlock(ctx))
	require.NoError(t, f.Unlock(ctx))
	require.NoError(t, rdb.Del(ctx, "h:rw").Err())
	<-r.Done()
	held = rt.Held()
	require.Len(t, held, 1)
	assert.Equal(t, a.Token(), held[0].Token)
	require.NoError(t, a.Unlock(ctx))
	assert.Empty(t, rt.Held())
}

// Bad observability options are refused with ErrInvalidArgument.
func TestObservabilityOptionsRefuseNil(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, o := range []actorlock.Option{actorlock.WithMeterProvider(nil), actorlock.WithTracerProvider(nil), actorlock.WithEvents(nil)} {
		_, err := actorlock.New(rdb, o)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	}
}

// A MultiLock's acquisition span is the parent of its members'.
func TestTraceMultiLockSpanParentsItsMembers(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, _, rt := setup(t, actorlock.WithTracerProvider(tp), actorlock.WithWatchdog(obsLease))
	ctx := ctxFor(t, 30*time.Second)

	callerCtx, caller := tp.Tracer("test").Start(ctx, "caller")
	g, err := actorlock.MultiLock(rt.Lock("t:m1"), rt.Lock("t:m2")).Acquire(callerCtx)
	require.NoError(t, err)
	require.NoError(t, g.Unlock(ctx))
	caller.End()

	var multi tracetest.SpanStub
	members := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.Name != "actorlock.acquire" {
			continue
		}
		switch spanAttr(s, "actorlock.kind").AsString() {
		case "multi":
			multi = s
		case "lock":
			members[spanAttr(s, "actorlock.name").AsString()] = s
		}
	}
	require.True(t, multi.SpanContext.IsValid(), "a span for the MultiLock")
	assert.Equal(t, caller.SpanContext().SpanID(), multi.Parent.SpanID())
	assert.Equal(t, "acquired", spanAttr(multi, "actorlock.outcome").AsString())
	require.Len(t, members, 2)
	for name, s := range members {
		assert.Equal(t, multi.SpanContext.SpanID(), s.Parent.SpanID(), "member %s", name)
	}
}
