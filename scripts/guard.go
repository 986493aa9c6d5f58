package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/sentinel"
)

//go:embed guard.lua
var guardLua string

// ErrNotRun: the request did nothing in Redis and never will. An attempt of
// it arrived after its call's deadline, or it was settled (Guard.Settle)
// before any attempt acted.
var ErrNotRun error = sentinel.Error("actorlock: the request did not run in Redis")

// Guard is one request's duplicate guard (guard.lua): every attempt of the
// request carries the same one, so that the request acts in Redis once
// however many attempts arrive, in whatever order, and a request whose
// outcome is unknown can be settled: asked what it did, and stopped from
// acting later if it did nothing.
type Guard struct {
	ID string // the request's id, unique among the requests of its name
	// Spent is an earlier request's id no attempt of which can arrive any
	// more (its one attempt was answered): its guard is deleted by this
	// call, sparing Redis a key per request. "": none.
	Spent string
	// TTL is how long the guard lives once written: longer than any
	// attempt of the request can act (Clock bounds that), and than its
	// caller may take to settle it.
	TTL time.Duration
	// Clock, if it knows the server's clock, has Redis refuse an attempt
	// that arrives after its call's deadline (the ctx deadline) plus
	// Clock.Slack. nil: attempts are not refused.
	Clock *Clock
	// Settle: do not act; report what an attempt did, or mark the request
	// so that no attempt acts later (then ErrNotRun).
	Settle bool
	// Until, when set, is the local time after which the call must not act
	// (settle included: a mark written after the guard may have expired
	// would pass a request that acted for one that did not); it replaces
	// the ctx deadline and Clock.Slack. Redis refuses a call that arrives
	// later with ErrTooLate.
	Until time.Time
}

// ErrTooLate: a settle arrived after its Guard.Until, when the guard may
// have expired: what the request did can no longer be told.
var ErrTooLate error = sentinel.Error("actorlock: too late to tell what the request did")

// keys and args append the guard's keys and arguments to a script's own.
func (g Guard) keys(name string, keys ...string) []string {
	guard, spent := requestKey(name, g.ID), requestKey(name, g.ID)
	if g.Spent != "" {
		spent = requestKey(name, g.Spent)
	}
	return append(keys, spent, guard)
}

func (g Guard) args(ctx context.Context, args ...any) []any {
	notAfter := g.Clock.notAfter(ctx)
	if !g.Until.IsZero() {
		notAfter = g.Clock.serverTime(g.Until)
	}
	return append(args, ms(g.TTL), notAfter, flag(g.Settle))
}

// guardedInts runs s under g and returns its integer reply, without the
// server clock every guarded reply ends with (which Clock learns from), or
// ErrNotRun. It is never retried: its caller retries it with the same g.
func guardedInts(ctx context.Context, c Client, s script, g Guard, name string, keys []string, args ...any) ([]int64, error) {
	if err := g.Clock.learn(ctx, c); err != nil {
		return nil, err
	}
	sent := time.Now()
	res, err := s.evalOnce(ctx, c, g.keys(name, keys...), g.args(ctx, args...)...)
	if err != nil {
		return nil, err
	}
	v, err := ints(res)
	if err != nil || len(v) < 2 {
		return nil, fmt.Errorf("scripts: unexpected guarded reply %v", res)
	}
	g.Clock.Observe(v[len(v)-1], sent, time.Now())
	v = v[:len(v)-1]
	switch {
	case v[0] == lateReply && g.Settle:
		return nil, ErrTooLate
	case v[0] == notRunReply || v[0] == lateReply:
		return nil, ErrNotRun
	}
	return v, nil
}

// DeleteGuards deletes the guards of requests ids of object name, none of
// whose attempts can arrive any more (Guard.Spent, for the last requests
// of a name that goes idle).
func DeleteGuards(ctx context.Context, c redis.Cmdable, name string, ids []string) error {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = requestKey(name, id)
	}
	return c.Del(ctx, keys...).Err()
}

// The replies guard.lua gives for a request that did nothing.
const (
	notRunReply = -8
	lateReply   = -9
)

// Clock is a runtime's estimate of the Redis server's clock, learnt from the
// server's time that every guarded reply carries: the offset from the
// local clock, in microseconds. A reading taken when the reply arrives is
// at most the true offset (the server read its clock before), so the
// estimate errs towards refusing an attempt early, never late, and towards
// placing a grant later than it ran (IssuedBefore); Slack covers that and
// servers whose clocks differ a little (a cluster, a failover).
type Clock struct {
	Slack time.Duration
	// offset and at pack the estimate and when it was taken (unix µs); at
	// 0: nothing learnt yet, and no attempt is refused.
	offset, at atomic.Int64
}

// Observe takes a reading: serverUs as the server read it, sometime
// between sent (when the call left) and local (when its reply arrived), so
// the true offset lies between serverUs - local and serverUs - sent. A
// higher low end is closer to the truth. The estimate goes down only when
// even the high end is below it: the server's clock went back (a failover
// to another machine). A reply that was merely late (its low end far
// below) moves nothing: taken at its low end, it would place grants later
// than they ran (RT31-1).
func (c *Clock) Observe(serverUs int64, sent, local time.Time) {
	if c == nil {
		return
	}
	low, high := serverUs-local.UnixMicro(), serverUs-sent.UnixMicro()
	if c.at.Load() == 0 || low > c.offset.Load() || high < c.offset.Load() {
		c.offset.Store(low)
		c.at.Store(local.UnixMicro())
	}
}

// learn reads the server's clock (TIME) if nothing was learnt yet, so that
// a runtime's very first guarded calls carry a deadline too: without one,
// an attempt held back longer than its guard lives could act again. Its
// failure fails the call, which never left.
func (c *Clock) learn(ctx context.Context, rdb Client) error {
	if c == nil || c.Known() {
		return nil
	}
	// Once per runtime, not part of the call that happens to come first:
	// outside its trace, within its deadline.
	lctx := context.Background()
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		lctx, cancel = context.WithDeadline(lctx, d)
		defer cancel()
	}
	cmd := redis.NewTimeCmd(lctx, "time")
	sent := time.Now()
	if err := rdb.Process(lctx, cmd); err != nil {
		return fmt.Errorf("%w: reading the server's clock first: %w", ErrNotRun, err)
	}
	c.Observe(cmd.Val().UnixMicro(), sent, time.Now())
	return nil
}

// notAfter is the server time after which an attempt of a call bounded by
// ctx must not act, or "" when either is unknown.
func (c *Clock) notAfter(ctx context.Context) string {
	if c == nil || c.at.Load() == 0 {
		return ""
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return ""
	}
	return strconv.FormatInt(deadline.UnixMicro()+c.offset.Load()+c.Slack.Microseconds(), 10)
}

// ActsUntil is the local time after which no attempt of a call bounded by
// ctx can act any more, since Redis refuses it (notAfter: ctx's deadline
// plus Slack, the estimate of the server's clock erring towards refusing
// early); false when either is unknown, and an attempt is not refused.
func (c *Clock) ActsUntil(ctx context.Context) (time.Time, bool) {
	deadline, ok := ctx.Deadline()
	if !ok || !c.Known() {
		return time.Time{}, false
	}
	return deadline.Add(c.Slack), true
}

// serverTime is local time t in the server's clock (µs), "" when the clock
// is unknown.
func (c *Clock) serverTime(t time.Time) string {
	if c == nil || c.at.Load() == 0 {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro()+c.offset.Load(), 10)
}

// IssuedBefore reports whether a fencing token (the server's clock in µs
// when its grant ran, or more: reentrant.lua's next_token) shows that its
// grant ran before local time t, by the estimate of the server's clock,
// which errs towards false; false when the clock is unknown.
func (c *Clock) IssuedBefore(token int64, t time.Time) bool {
	return c.Known() && token < t.UnixMicro()+c.offset.Load()
}

// Known reports whether the clock has learnt the server's time.
func (c *Clock) Known() bool { return c != nil && c.at.Load() != 0 }
