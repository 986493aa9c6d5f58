// Package inspect reads actorlock's objects, which are Redisson's, from the
// way they are laid out in Redis (docs/design.md, "The Redis layout"):
// which kind an object is, who holds it, for how long, who waits. It only
// reads; it is the one place that knows the layout well enough to show it,
// for Lock.Holders and the like and for cmd/actorlock. No compatibility
// promise: the root package exports what users need.
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/sentinel"
	"github.com/actorlock/actorlock/scripts"
)

// Kind is what a name holds, as told by its layout.
type Kind string

// The kinds Detect tells apart.
const (
	Lock               Kind = "lock"                       // reentrant lock (RLock)
	FairLock           Kind = "fair-lock"                  // RFairLock
	ReadWriteLock      Kind = "read-write-lock"            // RReadWriteLock
	Semaphore          Kind = "semaphore"                  // RSemaphore
	ExpirableSemaphore Kind = "permit-expirable-semaphore" // RPermitExpirableSemaphore
	CountDownLatch     Kind = "count-down-latch"           // RCountDownLatch
	DelayedQueue       Kind = "delayed-queue"              // RDelayedQueue (and its destination list)
	Queue              Kind = "queue"                      // RBlockingQueue: a LIST
)

// Kinds lists every kind, for flags and messages.
var Kinds = []Kind{Lock, FairLock, ReadWriteLock, Semaphore, ExpirableSemaphore, CountDownLatch, DelayedQueue, Queue}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: unknown kind %q (want one of %v)", ErrInvalidArgument, s, Kinds)
}

var (
	// ErrNotFound: neither the name nor any auxiliary key of it exists: a
	// free lock that never issued a token looks like this too.
	ErrNotFound = errors.New("inspect: nothing stored under this name")
	// ErrNotObject: the name holds something no actorlock/Redisson object
	// looks like (a SET, a HASH of text, ...).
	ErrNotObject = errors.New("inspect: not an actorlock/Redisson object")
	// ErrWrongKind: the name holds another kind of object than the one
	// asked for (a read-write lock read as a reentrant lock, ...). Package
	// actorlock declares the same sentinel, as its users see it.
	ErrWrongKind error = sentinel.Error("actorlock: the name holds another kind of object")
	// ErrInvalidArgument: an empty name, a bad kind or limit.
	ErrInvalidArgument = errors.New("inspect: invalid argument")
)

// DefaultLimit is how many waiters, permits or read holds Read lists when
// given no limit: what a person reads; the totals are always exact.
const DefaultLimit = 100

// Hold is one owner's holds of a lock.
type Hold struct {
	Owner string
	// Count is the owner's holds (a read-write lock's: read holds).
	Count int64
	// Writes is a read-write lock owner's write holds.
	Writes int64
	// ReadTTLs is, for a read-write lock, the remaining lease of each read
	// hold (hold n at index n-1, at most the limit): 0 when its key is gone
	// (that hold no longer counts once the lock's lease is renewed), -1
	// when it has no expiry.
	ReadTTLs []time.Duration
	// Process is the process of the owner's runtime, from its record (see
	// Identify); nil when unknown (a Redisson client, a runtime that keeps
	// no record, or not looked up).
	Process *Process `json:",omitempty"`
}

// Process is what an actorlock runtime records about itself
// (scripts.RuntimeKey): which host and process it runs in.
type Process struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// Identify looks up the process of each holder of o whose runtime keeps a
// record. An owner's runtime id is what precedes its last ':'; the record is
// under the runtime's key prefix, which is a leading part of o's name
// ending in ':' (or empty), so each of those is tried: a few GETs in one
// pipeline.
func Identify(ctx context.Context, c redis.UniversalClient, o *Object) error {
	prefixes := []string{""}
	for i, r := range o.Name {
		if r == ':' {
			prefixes = append(prefixes, o.Name[:i+1])
		}
	}
	type lookup struct {
		hold int
		get  *redis.StringCmd
	}
	var lookups []lookup
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range o.Holds {
			sep := strings.LastIndexByte(h.Owner, ':')
			if sep <= 0 {
				continue
			}
			for _, prefix := range prefixes {
				lookups = append(lookups, lookup{i, p.Get(ctx, scripts.RuntimeKey(prefix, h.Owner[:sep]))})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for _, l := range lookups {
		v, err := l.get.Result()
		if err != nil || o.Holds[l.hold].Process != nil {
			continue
		}
		var p Process
		if json.Unmarshal([]byte(v), &p) == nil && p.PID > 0 {
			o.Holds[l.hold].Process = &p
		}
	}
	return nil
}

// Waiter is one owner queued for a fair lock.
type Waiter struct {
	Owner string
	// Deadline is when it loses its place if it has not been granted the
	// lock by then (Redis server clock).
	Deadline time.Time
	// Remaining is Deadline less the server's time when read.
	Remaining time.Duration
}

// Permit is one taken permit of a permit-expirable semaphore.
type Permit struct {
	ID string // 32 hex digits, as Redisson gives them out
	// Expiry is when it returns to the pool by itself (Redis server
	// clock); zero: never.
	Expiry time.Time
	// Remaining is Expiry less the server's time when read; negative: it
	// expired and is returned on the semaphore's next call.
	Remaining time.Duration
	// Legacy: kept in the ZSET of actorlock versions before Redisson 4.x's
	// layout.
	Legacy bool
}

// QueueStats describes a delayed queue and its destination list.
type QueueStats struct {
	Delayed   int64         // items not yet due
	NextDue   time.Time     // when the earliest delayed item is due; zero: none
	NextDueIn time.Duration // NextDue less the server's time when read
	Ready     int64         // items in the destination list, ready to take
}

// Object is what a name holds at one moment.
type Object struct {
	Name string
	Kind Kind
	Now  time.Time // the Redis server's clock when read
	// TTL is the main key's remaining time to live: 0 when the key does
	// not exist, -1 when it has no expiry.
	TTL time.Duration

	// Locks.
	Mode    string // read-write lock: "read", "write", or "" when free
	Holds   []Hold // owners, sorted
	Waiters []Waiter
	// WaitersTotal counts the fair lock's queue (Waiters lists at most the
	// limit).
	WaitersTotal int64
	// Token is the last fencing token issued for the name; TokenSet says
	// whether the counter exists.
	Token    int64
	TokenSet bool

	// Value is a semaphore's available permits or a latch's count.
	Value        int64
	Permits      []Permit // sorted by expiry
	PermitsTotal int64

	Queue QueueStats
}

// Locked reports whether a lock is held by anyone.
func (o *Object) Locked() bool { return len(o.Holds) > 0 }

// Inspect detects what name holds and reads it (see Detect and Read).
func Inspect(ctx context.Context, c redis.UniversalClient, name string, limit int) (*Object, error) {
	kind, err := Detect(ctx, c, name)
	if err != nil {
		return nil, err
	}
	return Read(ctx, c, name, kind, limit)
}

// Detect tells what kind of object name is from its layout:
//   - a HASH is a lock: read-write with a "mode" field, fair when its queue
//     or timeouts exist, reentrant otherwise;
//   - a STRING is a semaphore: permit-expirable when its permit ZSET
//     exists; a semaphore and a latch look the same, so it is called a
//     count-down latch only when someone waits on the latch's channel (pass
//     the kind to Read when you know better);
//   - a LIST is a queue, a delayed queue when its delay ZSET or LIST exists;
//   - a name with no key of its own is what its auxiliary keys say (a free
//     fair lock with waiters, a free lock that issued fencing tokens, a
//     permit-expirable semaphore with no permit left, a delayed queue whose
//     destination is empty), and ErrNotFound without them.
//
// Anything else is ErrNotObject.
func Detect(ctx context.Context, c redis.UniversalClient, name string) (Kind, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrInvalidArgument)
	}
	var typ *redis.StatusCmd
	var mode *redis.BoolCmd
	var fairQ, fairT, permits, legacy, delayT, delayQ, token *redis.IntCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, name)
		fairQ = p.Exists(ctx, scripts.FairQueueKey(name))
		fairT = p.Exists(ctx, scripts.FairTimeoutKey(name))
		permits = p.Exists(ctx, scripts.PermitTimeoutKey(name))
		legacy = p.Exists(ctx, scripts.LegacyPermitTimeoutKey(name))
		delayT = p.Exists(ctx, scripts.DelayTimeoutKey(name))
		delayQ = p.Exists(ctx, scripts.DelayQueueKey(name))
		token = p.Exists(ctx, scripts.TokenKey(name))
		return nil
	})
	if err != nil {
		return "", err
	}
	fair := fairQ.Val()+fairT.Val() > 0
	expirable := permits.Val()+legacy.Val() > 0
	delayed := delayT.Val()+delayQ.Val() > 0
	switch t := typ.Val(); t {
	case "hash":
		mode = c.HExists(ctx, name, "mode")
		if err := mode.Err(); err != nil {
			return "", err
		}
		switch {
		case mode.Val():
			return ReadWriteLock, nil
		case fair:
			return FairLock, nil
		}
		return Lock, nil
	case "string":
		if expirable {
			return ExpirableSemaphore, nil
		}
		// Best effort: PUBSUB answers for the node the client asks, which
		// in a cluster may not be the one the latch's waiters use.
		subs, err := c.PubSubNumSub(ctx, scripts.LatchChannel(name)).Result()
		if err == nil && subs[scripts.LatchChannel(name)] > 0 {
			return CountDownLatch, nil
		}
		return Semaphore, nil
	case "list":
		if delayed {
			return DelayedQueue, nil
		}
		return Queue, nil
	case "none":
		switch {
		case fair:
			return FairLock, nil
		case expirable:
			return ExpirableSemaphore, nil
		case delayed:
			return DelayedQueue, nil
		case token.Val() > 0:
			return Lock, nil
		}
		return "", sentinel.Named(ErrNotFound, name, "")
	default:
		return "", sentinel.Named(ErrNotObject, name, "is a "+t)
	}
}

// Read reads name as an object of kind. Lists (waiters, permits, read
// holds) are cut at limit entries (0: DefaultLimit), their totals are
// exact. The main reads of each kind are one MULTI, so they agree with each
// other; what needs names read first (waiters' deadlines, read holds'
// TTLs) is a second round trip, and a waiter gone meanwhile is left out.
// A key of another type, or a value no such object has, is ErrWrongKind or
// ErrNotObject.
func Read(ctx context.Context, c redis.UniversalClient, name string, kind Kind, limit int) (*Object, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: empty name", ErrInvalidArgument)
	case limit < 0:
		return nil, fmt.Errorf("%w: negative limit %d", ErrInvalidArgument, limit)
	case limit == 0:
		limit = DefaultLimit
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	o := &Object{Name: name, Kind: kind, Now: now}
	r := reader{c: c, o: o, limit: int64(limit)}
	switch kind {
	case Lock, FairLock, ReadWriteLock:
		err = r.lock(ctx)
	case Semaphore, CountDownLatch:
		err = r.counter(ctx)
	case ExpirableSemaphore:
		err = r.expirable(ctx)
	case DelayedQueue, Queue:
		err = r.queue(ctx)
	default:
		return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalidArgument, kind)
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

type reader struct {
	c     redis.UniversalClient
	o     *Object
	limit int64
}

// ttl turns a PTTL reply, which go-redis passes through as -1ns/-2ns for
// "no expiry"/"no key", into Object.TTL's convention.
func ttl(d time.Duration) time.Duration {
	switch {
	case d == -2:
		return 0
	case d < 0:
		return -1
	}
	return d
}

// wrongType makes a WRONGTYPE reply ErrWrongKind.
func (r *reader) wrongType(err error) error {
	if err != nil && redis.HasErrorPrefix(err, "WRONGTYPE") {
		return sentinel.Named(ErrWrongKind, r.o.Name, fmt.Sprintf("is not a %s", r.o.Kind))
	}
	return err
}

// failed is the first error of a pipeline's commands other than a missing
// key (redis.Nil), WRONGTYPE being ErrWrongKind; or the pipeline's own.
func (r *reader) failed(pipeErr error, cmds ...redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return r.wrongType(err)
		}
	}
	if pipeErr != nil && !errors.Is(pipeErr, redis.Nil) {
		return pipeErr
	}
	return nil
}

// msTime is a Redis millisecond timestamp.
func msTime(ms float64) time.Time { return time.UnixMilli(int64(ms)) }

// parseCount reads an integer stored by a script; anything else means the
// key is not ours.
func (r *reader) parseCount(what, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, sentinel.Named(ErrNotObject, r.o.Name, fmt.Sprintf(": %s is %q, not an integer", what, s))
	}
	return n, nil
}

// counter reads a semaphore's or latch's STRING.
func (r *reader) counter(ctx context.Context) error {
	o := r.o
	v, err := r.c.Get(ctx, o.Name).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case err != nil:
		return r.wrongType(err)
	}
	o.Value, err = r.parseCount("the value", v)
	return err
}

// expirable reads a permit-expirable semaphore: available permits and the
// taken ones, soonest expiry first, from both permit ZSETs.
func (r *reader) expirable(ctx context.Context) error {
	o := r.o
	var get *redis.StringCmd
	var n, legacyN *redis.IntCmd
	var ids, legacyIDs *redis.ZSliceCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, o.Name)
		n = p.ZCard(ctx, scripts.PermitTimeoutKey(o.Name))
		ids = p.ZRangeWithScores(ctx, scripts.PermitTimeoutKey(o.Name), 0, r.limit-1)
		legacyN = p.ZCard(ctx, scripts.LegacyPermitTimeoutKey(o.Name))
		legacyIDs = p.ZRangeWithScores(ctx, scripts.LegacyPermitTimeoutKey(o.Name), 0, r.limit-1)
		return nil
	})
	if err := r.failed(err, get, n, ids, legacyN, legacyIDs); err != nil {
		return err
	}
	if v, err := get.Result(); err == nil {
		if o.Value, err = r.parseCount("the permit count", v); err != nil {
			return err
		}
	}
	o.PermitsTotal = n.Val() + legacyN.Val()
	add := func(zs []redis.Z, legacy bool) {
		for _, z := range zs {
			id, _ := z.Member.(string)
			if !legacy {
				id = fmt.Sprintf("%x", id)
			}
			p := Permit{ID: id, Legacy: legacy}
			if int64(z.Score) < scripts.PermitNever {
				p.Expiry = msTime(z.Score)
				p.Remaining = p.Expiry.Sub(o.Now)
			}
			o.Permits = append(o.Permits, p)
		}
	}
	add(ids.Val(), false)
	add(legacyIDs.Val(), true)
	sortPermits(o.Permits)
	if int64(len(o.Permits)) > r.limit {
		o.Permits = o.Permits[:r.limit]
	}
	return nil
}

// queue reads a delayed queue (or a plain one): delayed items, the next
// due time and the destination list's length.
func (r *reader) queue(ctx context.Context) error {
	o := r.o
	var ready, delayed *redis.IntCmd
	var next *redis.ZSliceCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ready = p.LLen(ctx, o.Name)
		delayed = p.ZCard(ctx, scripts.DelayTimeoutKey(o.Name))
		next = p.ZRangeWithScores(ctx, scripts.DelayTimeoutKey(o.Name), 0, 0)
		return nil
	})
	if err := r.failed(err, ready, delayed, next); err != nil {
		return err
	}
	q := &o.Queue
	q.Ready, q.Delayed = ready.Val(), delayed.Val()
	if zs := next.Val(); len(zs) == 1 {
		q.NextDue = msTime(zs[0].Score)
		q.NextDueIn = q.NextDue.Sub(o.Now)
	}
	return nil
}
