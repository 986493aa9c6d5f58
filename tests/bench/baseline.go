package main

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The baseline is the lock most teams write by hand: SET NX PX to lock, a
// compare-and-delete script that also announces the unlock to unlock, and
// waiters that sleep on the announcement instead of polling.

const baselineTTL = 30 * time.Second

// baselineUnlock deletes the key only if it still holds our token, and then
// wakes the waiters. Returns 1 if released, 0 if the lock was not ours.
var baselineUnlock = redis.NewScript(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], 1)
  return 1
end
return 0`)

var errBaselineNotHeld = errors.New("baseline: lock not held")

type baselineImpl struct {
	rdb *redis.Client

	mu      sync.Mutex
	lockers []*baselineLocker
}

func openBaseline(rdb *redis.Client) (impl, error) { return &baselineImpl{rdb: rdb}, nil }

func (b *baselineImpl) newLocker(name string) locker {
	l := &baselineLocker{rdb: b.rdb, key: name, channel: "baseline:unlocked:" + name}
	b.mu.Lock()
	b.lockers = append(b.lockers, l)
	b.mu.Unlock()
	return l
}

func (b *baselineImpl) close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, l := range b.lockers {
		if l.ps != nil {
			errs = append(errs, l.ps.Close())
		}
	}
	return errors.Join(errs...)
}

type baselineLocker struct {
	rdb          *redis.Client
	key, channel string
	token        string

	// ps is this goroutine's own pub/sub connection, opened at its first
	// wait and kept: dialing one per wait would make the baseline
	// needlessly slow.
	ps   *redis.PubSub
	msgs <-chan any
}

func (l *baselineLocker) lock(ctx context.Context) error {
	l.token = rand.Text()
	ok, err := l.trySet(ctx)
	if err != nil || ok {
		return err
	}
	return l.wait(ctx)
}

func (l *baselineLocker) trySet(ctx context.Context) (bool, error) {
	return l.rdb.SetNX(ctx, l.key, l.token, baselineTTL).Result()
}

// wait subscribes to the unlock channel and retries SET on each unlock
// message, or when the holder's TTL runs out should a message be missed.
func (l *baselineLocker) wait(ctx context.Context) error {
	if l.ps == nil {
		l.ps = l.rdb.Subscribe(ctx)
		l.msgs = l.ps.ChannelWithSubscriptions()
	}
	if err := l.ps.Subscribe(ctx, l.channel); err != nil {
		return err
	}
	// Unsubscribe even when ctx has ended: a failed write would make
	// go-redis reconnect and re-subscribe.
	defer func() { _ = l.ps.Unsubscribe(context.Background(), l.channel) }()
	if err := l.subscribed(ctx); err != nil {
		return err
	}

	// The fallback timer is armed from the holder's PTTL and kept across
	// message-triggered retries: every holder uses the same TTL, so the
	// lock cannot outlive it by much, and re-reading PTTL after each lost
	// race would only add a command.
	var fallback *time.Timer
	var due <-chan time.Time
	defer func() {
		if fallback != nil {
			fallback.Stop()
		}
	}()
	for {
		// This SET comes after Redis confirmed the subscription, so an
		// unlock between the first failed SET and now is not missed.
		ok, err := l.trySet(ctx)
		if err != nil || ok {
			return err
		}
		if due == nil {
			ttl, err := l.rdb.PTTL(ctx, l.key).Result()
			if err != nil {
				return err
			}
			// A key without TTL, or gone since the SET: check again soon.
			ttl = max(ttl, time.Millisecond)
			if fallback == nil {
				fallback = time.NewTimer(ttl)
			} else {
				fallback.Reset(ttl)
			}
			due = fallback.C
		}
		if err := l.nextMessage(ctx, &due); err != nil {
			return err
		}
	}
}

// subscribed waits for Redis to confirm the subscription, dropping what is
// left over from this goroutine's earlier waits.
func (l *baselineLocker) subscribed(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-l.msgs:
			if s, ok := m.(*redis.Subscription); ok && s.Kind == "subscribe" && s.Channel == l.channel {
				return nil
			}
		}
	}
}

// nextMessage returns on an unlock message or when the fallback timer fires
// (then *due is cleared so the caller re-arms it).
func (l *baselineLocker) nextMessage(ctx context.Context, due *<-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-*due:
			*due = nil
			return nil
		case m := <-l.msgs:
			if msg, ok := m.(*redis.Message); ok && msg.Channel == l.channel {
				return nil
			}
		}
	}
}

func (l *baselineLocker) unlock(ctx context.Context) error {
	n, err := baselineUnlock.Run(ctx, l.rdb, []string{l.key}, l.token, l.channel).Int()
	if err != nil {
		return err
	}
	if n != 1 {
		return errBaselineNotHeld
	}
	return nil
}
