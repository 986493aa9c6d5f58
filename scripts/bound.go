package scripts

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

type callBoundKey struct{}

// WithCallBound makes the script calls made with ctx (or a context derived
// from it) return when that context ends, even through a client that
// would keep waiting: go-redis ends a command with its context only when
// the client has ContextTimeoutEnabled; otherwise its read timeout does (3 s
// by default, more with its retries), whatever the context's deadline. Each
// call runs on a goroutine that goRun starts (the runtime's worker
// goroutines, which Close waits for), while its caller waits for it or for
// the context; a call the context ended goes on until the client gives up
// on it, and its caller gets the context's cause: as through a client that
// honours the context, the script may or may not have run.
func WithCallBound(ctx context.Context, goRun func(func())) context.Context {
	return context.WithValue(ctx, callBoundKey{}, goRun)
}

// bounded returns what call returns, or, if ctx ends first and carries a
// call bound, ctx's cause (call goes on, on its own goroutine). A failure
// after ctx ended is reported as ctx's cause too, which says what happened
// (see WithCallBound and the runtime's call timeout) better than the
// client's "i/o timeout".
func bounded[T any](ctx context.Context, call func() (T, error)) (T, error) {
	goRun, _ := ctx.Value(callBoundKey{}).(func(func()))
	if goRun == nil || ctx.Done() == nil {
		v, err := call()
		return v, causeOf(ctx, err)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	goRun(func() {
		v, err := call()
		done <- result{v, err}
	})
	select {
	case r := <-done:
		return r.v, causeOf(ctx, r.err)
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// causeOf is err, or ctx's cause when err is the client giving up on a
// call because ctx's deadline passed: its read timed out at that deadline
// (ContextTimeoutEnabled), possibly a moment before ctx itself ended.
func causeOf(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var nerr net.Error
	if !(errors.As(err, &nerr) && nerr.Timeout()) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	if ctx.Err() == nil {
		deadline, ok := ctx.Deadline()
		if !ok || time.Now().Before(deadline) {
			return err // the client's own timeout, not ctx's
		}
		<-ctx.Done() // its deadline passed: ends at once
	}
	return context.Cause(ctx)
}

// failedCmd is a command that carries err and nothing else.
func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
