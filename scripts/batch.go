package scripts

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batched is a Client that pipelines the calls of concurrent goroutines:
// while Flights pipelines are on the wire, the calls that arrive queue up,
// and the next pipeline to leave carries all of them in one write, their
// replies routed back by position. Nothing waits to fill a batch: a call
// that finds a flight free goes out at once, on its own goroutine, exactly
// as a plain Process would (no hand-off added at low load).
//
// Whoever finishes a flight hands the queue to the first goroutine waiting
// in it, which sends it: that goroutine had to be woken for its reply
// anyway, so batching adds no goroutine and no hand-off. A pipeline with a
// NoRetry command is never replayed by go-redis, so lock scripts stay
// exactly-once.
//
// Only Process is batched (what evalOnce uses); every other method is the
// embedded client's.
type Batched struct {
	redis.UniversalClient
	// Flights is how many pipelines may be on the wire at once (at least 1).
	Flights int

	mu     sync.Mutex
	flying int
	queue  []*batchCall
}

// batchCall is one queued call. wake receives nil when its command has
// been answered, or the batch it is to send (itself included).
type batchCall struct {
	ctx  context.Context
	cmd  redis.Cmder
	wake chan []*batchCall
}

var batchCalls = sync.Pool{New: func() any { return &batchCall{wake: make(chan []*batchCall, 1)} }}

// Process runs cmd, in a pipeline with whatever queued meanwhile.
func (b *Batched) Process(ctx context.Context, cmd redis.Cmder) error {
	b.mu.Lock()
	if b.flying < max(b.Flights, 1) {
		// A flight is free, so nothing is queued (a finishing flight hands
		// a non-empty queue on rather than freeing itself).
		b.flying++
		b.mu.Unlock()
		_ = b.UniversalClient.Process(ctx, cmd)
		b.landed()
		return cmd.Err()
	}
	c := batchCalls.Get().(*batchCall)
	c.ctx, c.cmd = ctx, cmd
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	var batch []*batchCall
	select {
	case batch = <-c.wake:
	case <-ctx.Done():
		// Given up while it queued: it leaves the queue unsent, unless a
		// landing flight took it already (then it goes, or is dropped, with
		// that batch).
		b.mu.Lock()
		i := slices.Index(b.queue, c)
		if i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
		b.mu.Unlock()
		if i >= 0 {
			cmd.SetErr(context.Cause(ctx))
		} else {
			batch = <-c.wake
		}
	}
	if batch != nil {
		b.send(ctx, batch, c)
	}
	c.ctx, c.cmd = nil, nil
	batchCalls.Put(c)
	return cmd.Err()
}

// send runs batch as one pipeline on the flight its sender (one of its
// calls) was handed, then wakes the others. The pipeline does not end
// with the sender's ctx: a caller that gives up must not fail the calls of
// others riding with it (a cancelled call would look final to them). The
// client's read and write timeouts bound it, as they bound a lone call.
//
// A call whose ctx ended while it queued is not sent: its caller has
// returned or is returning (bounded), told the call may have run, and a
// command that left now would act behind its back for as long as its
// deadline in Redis allows.
//
// The pipeline ends at the earliest deadline of its calls: a client that
// ends a command with its context (ContextTimeoutEnabled) then keeps every
// call within its own deadline; one cut short by another's has an unknown
// outcome, as any call its deadline ended (settled). A caller that gives
// up (cancels) does not fail the others.
func (b *Batched) send(ctx context.Context, batch []*batchCall, sender *batchCall) {
	ctx = context.WithoutCancel(ctx)
	live := batch[:0:0]
	var earliest time.Time
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.cmd.SetErr(context.Cause(c.ctx))
			continue
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if !earliest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, earliest)
		defer cancel()
	}
	switch len(live) {
	case 0:
	case 1:
		_ = b.UniversalClient.Process(ctx, live[0].cmd) // no pipeline to build
	default:
		pipe := b.UniversalClient.Pipeline()
		for _, c := range live {
			_ = pipe.Process(ctx, c.cmd)
		}
		// Exec's error is also each command's: the callers read their own.
		_, _ = pipe.Exec(ctx)
	}
	b.landed()
	for _, c := range batch {
		if c != sender {
			c.wake <- nil
		}
	}
}

// landed ends a flight: the queue, if any, leaves at once on it, sent by
// its first caller; otherwise the flight is freed.
func (b *Batched) landed() {
	b.mu.Lock()
	next := b.queue
	if len(next) == 0 {
		b.flying--
		b.mu.Unlock()
		return
	}
	b.queue = nil
	b.mu.Unlock()
	next[0].wake <- next
}
