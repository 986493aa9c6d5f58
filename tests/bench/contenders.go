package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// impl is one lock implementation running on one go-redis client.
type impl interface {
	// newLocker returns a locker on lock name for one goroutine: each
	// goroutine is an owner of its own.
	newLocker(name string) locker
	// close releases what the implementation keeps (runtimes, pub/sub
	// connections); it does not close the client.
	close(ctx context.Context) error
}

// locker is one owner's view of one lock, used by one goroutine.
type locker interface {
	// lock waits until the lock is held or ctx ends.
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// gaveUpCounter is implemented by contenders whose lock call can give up
// on its own (redsync), so the harness can report how often it did.
type gaveUpCounter interface{ gaveUp() int64 }

type openFunc func(rdb *redis.Client) (impl, error)

// registry holds every contender by name; tests add a deliberately broken
// one, which child processes find here too because they run the same binary.
var registry = map[string]openFunc{
	"actorlock": openActorlock,
	"redsync":   openRedsync,
	"redislock": openRedislock,
	"baseline":  openBaseline,
	evalshaName: openEvalsha,
}

// defaultContenders is the order in which contenders run and are printed.
// evalsha, the floor of one script round trip, runs in the uncontended
// scenarios only.
var defaultContenders = []string{"actorlock", "redsync", "redislock", "baseline", evalshaName}

func knownContenders() []string { return slices.Sorted(maps.Keys(registry)) }

// ---- actorlock ----------------------------------------------------------------

type actorlockImpl struct{ rt *actorlock.Runtime }

func openActorlock(rdb *redis.Client) (impl, error) {
	rt, err := actorlock.New(rdb)
	if err != nil {
		return nil, err
	}
	return &actorlockImpl{rt: rt}, nil
}

func (a *actorlockImpl) newLocker(name string) locker {
	return &actorlockLocker{h: a.rt.Lock(name)}
}

func (a *actorlockImpl) close(ctx context.Context) error { return a.rt.Close(ctx) }

type actorlockLocker struct {
	h    *actorlock.Lock
	held *actorlock.Held
}

func (l *actorlockLocker) lock(ctx context.Context) error {
	held, err := l.h.Acquire(ctx)
	if err != nil {
		return err
	}
	l.held = held
	return nil
}

func (l *actorlockLocker) unlock(ctx context.Context) error {
	held := l.held
	l.held = nil
	return held.Unlock(ctx)
}

// ---- redsync ------------------------------------------------------------------

type redsyncImpl struct {
	rs    *redsync.Redsync
	fails atomic.Int64
}

func openRedsync(rdb *redis.Client) (impl, error) {
	return &redsyncImpl{rs: redsync.New(redsyncgoredis.NewPool(rdb))}, nil
}

func (r *redsyncImpl) newLocker(name string) locker {
	return &redsyncLocker{m: r.rs.NewMutex(name), fails: &r.fails}
}

func (r *redsyncImpl) close(context.Context) error { return nil }

func (r *redsyncImpl) gaveUp() int64 { return r.fails.Load() }

type redsyncLocker struct {
	m     *redsync.Mutex
	fails *atomic.Int64
}

// lock calls LockContext until it succeeds: with its defaults redsync gives
// up after 32 tries, which under contention is routine, not an error.
func (l *redsyncLocker) lock(ctx context.Context) error {
	for {
		err := l.m.LockContext(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case redsyncGaveUp(err):
			l.fails.Add(1)
		default:
			return err
		}
	}
}

// redsyncGaveUp reports redsync's "failed to acquire" outcomes: ErrFailed,
// or, when the last of its tries found the lock taken, ErrTaken.
func redsyncGaveUp(err error) bool {
	var taken *redsync.ErrTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)
}

func (l *redsyncLocker) unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("redsync: unlock released nothing")
	}
	return nil
}

// ---- redislock ----------------------------------------------------------------

const redislockTTL = 30 * time.Second

type redislockImpl struct {
	c    *redislock.Client
	opts *redislock.Options
}

func openRedislock(rdb *redis.Client) (impl, error) {
	return &redislockImpl{
		c:    redislock.New(rdb),
		opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)},
	}, nil
}

func (r *redislockImpl) newLocker(name string) locker {
	return &redislockLocker{impl: r, name: name}
}

func (r *redislockImpl) close(context.Context) error { return nil }

type redislockLocker struct {
	impl *redislockImpl
	name string
	held *redislock.Lock
}

// lock relies on ctx's deadline (the end of the run) to bound Obtain, which
// otherwise stops retrying after one TTL.
func (l *redislockLocker) lock(ctx context.Context) error {
	held, err := l.impl.c.Obtain(ctx, l.name, redislockTTL, l.impl.opts)
	if err != nil {
		return err
	}
	l.held = held
	return nil
}

func (l *redislockLocker) unlock(ctx context.Context) error {
	held := l.held
	l.held = nil
	return held.Release(ctx)
}
