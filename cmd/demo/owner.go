package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// sectionTimeout bounds the Redis calls of one critical section, which run
// to their end even when the run is over (see increment).
const sectionTimeout = 5 * time.Second

func counterKey(c int) string { return fmt.Sprintf("actorlock-demo:account:%d", c) }
func lockName(c int) string   { return fmt.Sprintf("actorlock-demo:lock:account:%d", c) }
func ticketKey(c int) string  { return fmt.Sprintf("actorlock-demo:unsafe-ticket:%d", c) }

// section is one critical section. Times are wall-clock Unix nanoseconds, so
// sections of different processes on this machine compare.
type section struct {
	Proc    int   `json:"p"`
	Owner   int   `json:"o"`
	Counter int   `json:"c"`
	Token   int64 `json:"t"`
	Wait    int64 `json:"w"` // the owner asked for the lock
	Start   int64 `json:"s"` // the owner held it
	End     int64 `json:"e"` // the SET was done; Unlock comes next
}

// sink receives what owners do: the parent's tally, or a worker's reporter.
type sink interface {
	record(section)
	timedOut()
}

// entry is a way into a counter's critical section.
type entry struct {
	token int64
	lost  func() error                    // non-nil once the section is no longer protected
	leave func(ctx context.Context) error // ends the section
}

// enterFunc opens the critical section of counter c, waiting if it must.
type enterFunc func(ctx context.Context, c int) (entry, error)

// lockedEntry enters through actorlock's lock of the counter. It makes one
// handle per counter for the calling owner: every handle is an owner of its
// own, so owners exclude each other rather than re-enter.
func lockedEntry(rt *actorlock.Runtime, counters int, wait time.Duration) enterFunc {
	locks := make([]*actorlock.Lock, counters)
	for c := range locks {
		locks[c] = rt.Lock(lockName(c))
	}
	return func(ctx context.Context, c int) (entry, error) {
		h, err := locks[c].Acquire(ctx, actorlock.WaitTime(wait))
		if err != nil {
			return entry{}, err
		}
		return entry{token: h.Token(), lost: h.Err, leave: h.Unlock}, nil
	}
}

// unsafeEntry lets everyone in at once, for showing what the lock prevents.
// An INCR stands in for the fencing token so the token check has data.
func unsafeEntry(rdb redis.UniversalClient) enterFunc {
	return func(ctx context.Context, c int) (entry, error) {
		t, err := rdb.Incr(ctx, ticketKey(c)).Result()
		if err != nil {
			return entry{}, err
		}
		return entry{
			token: t,
			lost:  func() error { return nil },
			leave: func(context.Context) error { return nil },
		}, nil
	}
}

type owner struct {
	proc, id int
	counters int
	hold     time.Duration
	rdb      redis.UniversalClient
	enter    enterFunc
	sink     sink
}

// runOwners runs cfg.owners owners of process proc until ctx ends.
func runOwners(ctx context.Context, cfg config, proc int, rt *actorlock.Runtime, rdb redis.UniversalClient, s sink) error {
	errs := make([]error, cfg.owners)
	var wg sync.WaitGroup
	for i := range cfg.owners {
		o := &owner{proc: proc, id: i, counters: cfg.counters, hold: cfg.hold, rdb: rdb, sink: s}
		if cfg.unsafe {
			o.enter = unsafeEntry(rdb)
		} else {
			o.enter = lockedEntry(rt, cfg.counters, cfg.wait)
		}
		wg.Go(func() { errs[i] = o.run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// run increments random counters until ctx ends or something breaks.
func (o *owner) run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := o.increment(ctx, rand.IntN(o.counters))
		switch {
		case err == nil:
		case errors.Is(err, actorlock.ErrNotAcquired):
			o.sink.timedOut()
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			// Acquire gave up because the run is over; nothing was held.
			return nil
		default:
			return fmt.Errorf("process %d owner %d: %w", o.proc, o.id, err)
		}
	}
	return nil
}

// increment is one critical section on counter c.
func (o *owner) increment(ctx context.Context, c int) error {
	s := section{Proc: o.proc, Owner: o.id, Counter: c, Wait: time.Now().UnixNano()}
	e, err := o.enter(ctx, c)
	if err != nil {
		return err
	}
	s.Token, s.Start = e.token, time.Now().UnixNano()
	// Once in, finish even if the run ends: a SET cut off by cancellation
	// may or may not have happened, and the count could not be checked.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sectionTimeout)
	defer cancel()
	err = o.readModifyWrite(sctx, counterKey(c), e.lost)
	s.End = time.Now().UnixNano()
	if err == nil {
		o.sink.record(s)
	}
	return errors.Join(err, e.leave(sctx))
}

// readModifyWrite increments key the racy way on purpose: two owners in here
// at once both read n and both write n+1, and an update is lost.
func (o *owner) readModifyWrite(ctx context.Context, key string, lost func() error) error {
	n, err := o.rdb.Get(ctx, key).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	time.Sleep(o.hold)
	// A holder that lost the lock must not write: another owner may be in.
	if err := lost(); err != nil {
		return err
	}
	return o.rdb.Set(ctx, key, n+1, 0).Err()
}
