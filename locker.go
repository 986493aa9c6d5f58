package actorlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// Locker is a lock as a sync.Locker (as etcd's concurrency.NewLocker), for
// code that takes one.
//
// Once the runtime is closed, Lock never returns: a goroutine waiting in
// Lock when Close comes, or calling it afterwards, stays blocked until the
// process exits (Err reports ErrClosed). A sync.Locker cannot fail, and of
// what is left, panicking crashes a service in its graceful shutdown and
// returning would run the caller's critical section without the lock while
// another process may hold it; a blocked goroutine harms nothing but
// itself. So stop the goroutines that lock before closing the runtime.
// Unlock after Close does not block (Err reports the outcome).
//
// Lock waits as long as it takes and Unlock cannot report errors, so prefer
// Lock.Acquire, which can: use a Locker only where a sync.Locker is
// required. Every Lock acquires as a new owner, so goroutines sharing a
// Locker exclude each other, as with a sync.Mutex.
//
// A nil Locker, or one Runtime.Locker did not make, locks nothing: Lock
// blocks for good, as after Close, Unlock does nothing, and Err reports
// ErrInvalidArgument.
type Locker struct {
	rt   *Runtime
	name string

	mu   sync.Mutex
	held *Held // the current hold, between Lock and Unlock
	err  error
}

// Locker returns a sync.Locker on the reentrant lock name, held with the
// watchdog. A bad name is refused with ErrInvalidArgument; after Close, it
// returns ErrClosed.
func (rt *Runtime) Locker(name string) (*Locker, error) {
	if err := rt.Lock(name).err; err != nil {
		return nil, sentinel.Op("locker", name, err)
	}
	if rt.closed.Load() {
		return nil, sentinel.Op("locker", name, ErrClosed)
	}
	return &Locker{rt: rt, name: name}, nil
}

// Lock waits until the lock is acquired. When Redis cannot be reached it
// tries again (after 100 ms, doubling up to 2 s; Err reports the failure
// meanwhile). Once the runtime is closed it blocks for good (see Locker).
func (k *Locker) Lock() {
	if k == nil || k.rt == nil {
		select {} // never returns unprotected (see Locker)
	}
	backoff := 100 * time.Millisecond
	for {
		held, err := k.rt.Lock(k.name).Acquire(context.Background())
		if err == nil {
			k.mu.Lock()
			k.held, k.err = held, nil
			k.mu.Unlock()
			return
		}
		if errors.Is(err, ErrClosed) {
			k.mu.Lock()
			k.err = sentinel.Op("lock", k.name, ErrClosed)
			k.mu.Unlock()
			select {} // never returns unprotected (see Locker)
		}
		k.mu.Lock()
		k.err = err
		k.mu.Unlock()
		select {
		case <-time.After(backoff):
		case <-k.rt.done:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Unlock releases the lock taken by Lock. A release Redis could not confirm
// leaves the hold renewed, so Unlock tries again (after 100 ms, doubling up
// to 2 s) until it succeeds or the hold ends: during an outage, at most
// about a watchdog lease, after which the hold is lost. Its errors (the
// lock was lost meanwhile, Unlock without Lock) are reported by Err.
func (k *Locker) Unlock() {
	if k == nil || k.rt == nil {
		return
	}
	k.mu.Lock()
	held := k.held
	k.held = nil
	k.mu.Unlock()
	var err error
	if held == nil {
		err = sentinel.Op("unlock", k.name, fmt.Errorf("%w: Unlock without Lock", ErrUnlocked))
	}
	if held != nil {
		err = release(held, func(err error) {
			k.mu.Lock()
			k.err = err
			k.mu.Unlock()
		})
	}
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

// Err is the error of the last Unlock, or of the last failed attempt of a
// Lock still trying; nil otherwise.
func (k *Locker) Err() error {
	if k == nil || k.rt == nil {
		return errNilHandle("Locker")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Context is the context of the current hold, cancelled if the lock is
// lost; nil when not locked.
func (k *Locker) Context() context.Context {
	if k == nil || k.rt == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held == nil {
		return nil
	}
	return k.held.Context()
}

var _ sync.Locker = (*Locker)(nil)
