// Package core is what an actorlock Runtime shares with the handles that
// packages other than the root define (package primitive): its actors, its
// Redis client, whether it is closed, its ids and its telemetry, and the
// round trip of a Go caller with an actor (Ask). No compatibility promise.
package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/inspect"
	"github.com/actorlock/actorlock/internal/sentinel"
)

// The sentinels of package actorlock that the handles return: the same
// values (errors_internal_test.go checks them).
var (
	ErrClosed          = actors.ErrClosed
	ErrInvalidArgument = actors.ErrInvalidArgument
	ErrNotAcquired     = actors.ErrNotAcquired
	ErrPermitExpired   = actors.ErrPermitExpired
	ErrWrongKind       = inspect.ErrWrongKind
)

// Runtime is a runtime as the handles of other packages see it. The
// actorlock.Runtime that owns it fills it in once its actors run.
type Runtime struct {
	Actors *actors.Handle
	Redis  redis.UniversalClient
	Obs    Observer
	closed *atomic.Bool
	done   <-chan struct{}
	ids    *atomic.Uint64
}

// New is the view of a runtime: closed and done are its own (Close sets
// and closes them), ids the counter its requests are numbered by.
func New(a *actors.Handle, rdb redis.UniversalClient, obs Observer, closed *atomic.Bool, done <-chan struct{}, ids *atomic.Uint64) *Runtime {
	return &Runtime{Actors: a, Redis: rdb, Obs: obs, closed: closed, done: done, ids: ids}
}

// Closed reports whether the runtime is closing or closed.
func (rt *Runtime) Closed() bool { return rt.closed.Load() }

// Done is closed once the runtime's actors have stopped.
func (rt *Runtime) Done() <-chan struct{} { return rt.done }

// NextID numbers a request of a Go caller.
func (rt *Runtime) NextID() uint64 { return rt.ids.Add(1) }

// Observer is the telemetry of calls that wait: the acquisitions of permits
// (as metrics and spans of kind "semaphore" or "permit") and the spans of
// queue calls.
type Observer interface {
	// StartPermits starts an acquisition of permits; end reports whether
	// it got them, or its error.
	StartPermits(ctx context.Context, expirable bool, name string, waiting bool) (_ context.Context, end func(acquired bool, err error))
	// StartSpan starts a span op on name; end ends it with *err.
	StartSpan(ctx context.Context, op, name string) (_ context.Context, end func(err *error))
}

// CtxError is ctx's error, carrying its cause too when one was given, so
// that both errors.Is(err, context.Canceled) and errors.Is(err, cause)
// hold.
func CtxError(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// WrongKind makes a value that no object of ours holds ErrWrongKind too.
func WrongKind(o *inspect.Object, err error) (*inspect.Object, error) {
	if errors.Is(err, inspect.ErrNotObject) {
		err = fmt.Errorf("%w: %w", ErrWrongKind, err)
	}
	return o, err
}

// NotKind adds to an error wrapping ErrWrongKind, which says what the name
// holds, what the handle that got it is (kind: "a semaphore", ...): "it is
// a lock or fair lock, not a semaphore". Other errors stay as they are.
func NotKind(err error, kind string) error {
	if err == nil || !errors.Is(err, ErrWrongKind) {
		return err
	}
	// An error already in actorlock's shape keeps it, with the kind in
	// its cause.
	if oe, ok := err.(*sentinel.OpError); ok {
		return &sentinel.OpError{Op: oe.Op, Name: oe.Name, Err: fmt.Errorf("%w, not %s", oe.Err, kind)}
	}
	return fmt.Errorf("%w, not %s", err, kind)
}

// Handle is what every handle of package primitive starts from: its
// runtime and its name, and what is wrong with them (reported by every
// call).
type Handle struct {
	RT   *Runtime
	Name string
	Err  error
}

// Handles builds the handles of package primitive, whose fields the root
// cannot set. Package primitive sets them at init; the root imports it, so
// they are set before any runtime exists.
var Handles struct {
	Semaphore, PermitExpirableSemaphore, CountDownLatch, BlockingQueue, DelayedQueue func(Handle) any
}
