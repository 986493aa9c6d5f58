package inspect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// lock reads a lock's HASH (owner -> count; for a read-write lock also
// mode and <owner>:write), its lease, its fencing counter and, for a fair
// lock, its queue with deadlines; then a read-write lock's read-hold TTLs
// or a fair lock's deadlines.
func (r *reader) lock(ctx context.Context) error {
	o := r.o
	var fields *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	var token *redis.StringCmd
	var queueLen *redis.IntCmd
	var queue *redis.StringSliceCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, o.Name)
		pttl = p.PTTL(ctx, o.Name)
		token = p.Get(ctx, scripts.TokenKey(o.Name))
		if o.Kind == FairLock {
			queueLen = p.LLen(ctx, scripts.FairQueueKey(o.Name))
			queue = p.LRange(ctx, scripts.FairQueueKey(o.Name), 0, r.limit-1)
		}
		return nil
	})
	cmds := []redis.Cmder{fields, pttl, token}
	if queue != nil {
		cmds = append(cmds, queueLen, queue)
	}
	if err := r.failed(err, cmds...); err != nil {
		return err
	}
	o.TTL = ttl(pttl.Val())
	if v, err := token.Result(); err == nil {
		if o.Token, err = r.parseCount("the fencing counter", v); err != nil {
			return err
		}
		o.TokenSet = true
	}
	if err := r.holds(fields.Val()); err != nil {
		return err
	}
	switch o.Kind {
	case ReadWriteLock:
		return r.readTTLs(ctx)
	case FairLock:
		o.WaitersTotal = queueLen.Val()
		return r.deadlines(ctx, queue.Val())
	}
	return nil
}

// holds reads the lock HASH's fields into o.Holds, refusing what a lock of
// o.Kind never holds.
func (r *reader) holds(fields map[string]string) error {
	o := r.o
	byOwner := map[string]*Hold{}
	hold := func(owner string) *Hold {
		h := byOwner[owner]
		if h == nil {
			h = &Hold{Owner: owner}
			byOwner[owner] = h
		}
		return h
	}
	for f, v := range fields {
		if f == "mode" {
			if o.Kind != ReadWriteLock {
				return sentinel.Named(ErrWrongKind, o.Name, fmt.Sprintf("is a %s, not a %s", ReadWriteLock, o.Kind))
			}
			if v != "read" && v != "write" {
				return sentinel.Named(ErrNotObject, o.Name, fmt.Sprintf(": mode is %q", v))
			}
			o.Mode = v
			continue
		}
		if f == scripts.HoldMarkField && o.Kind != ReadWriteLock {
			continue // which run of holds this is (scripts.HoldMarkField), not an owner
		}
		n, err := r.parseCount("field "+strconv.Quote(f), v)
		if err != nil {
			return err
		}
		if owner, ok := strings.CutSuffix(f, ":write"); ok && o.Kind == ReadWriteLock {
			hold(owner).Writes = n
			continue
		}
		hold(f).Count = n
	}
	if o.Kind == ReadWriteLock && o.Mode == "" && len(byOwner) > 0 {
		return sentinel.Named(ErrWrongKind, o.Name, "has owners but no mode: not a "+string(ReadWriteLock))
	}
	for _, h := range byOwner {
		o.Holds = append(o.Holds, *h)
	}
	sort.Slice(o.Holds, func(i, j int) bool { return o.Holds[i].Owner < o.Holds[j].Owner })
	return nil
}

// readTTLs reads the key bounding each read hold,
// {name}:<owner>:rwlock_timeout:<n>, at most limit keys in all.
func (r *reader) readTTLs(ctx context.Context) error {
	o := r.o
	type ref struct{ hold, n int }
	var refs []ref
	var cmds []*redis.DurationCmd
	left := r.limit
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range o.Holds {
			for n := int64(1); n <= h.Count && left > 0; n, left = n+1, left-1 {
				key := scripts.RWTimeoutPrefix(o.Name, h.Owner) + ":" + strconv.FormatInt(n, 10)
				cmds = append(cmds, p.PTTL(ctx, key))
				refs = append(refs, ref{i, int(n)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k, c := range cmds {
		h := &o.Holds[refs[k].hold]
		h.ReadTTLs = append(h.ReadTTLs, ttl(c.Val()))
	}
	return nil
}

// deadlines reads the queued owners' deadlines; an owner whose deadline is
// gone left the queue since LRANGE and is not listed.
func (r *reader) deadlines(ctx context.Context, owners []string) error {
	o := r.o
	if len(owners) == 0 {
		return nil
	}
	scores, err := r.c.ZMScore(ctx, scripts.FairTimeoutKey(o.Name), owners...).Result()
	if err != nil {
		return r.wrongType(err)
	}
	// ZMSCORE answers 0 for a missing member through go-redis; a real
	// deadline is a timestamp in ms, never 0.
	for i, owner := range owners {
		if i >= len(scores) || scores[i] == 0 {
			continue
		}
		d := msTime(scores[i])
		o.Waiters = append(o.Waiters, Waiter{Owner: owner, Deadline: d, Remaining: d.Sub(o.Now)})
	}
	return nil
}

func sortPermits(ps []Permit) {
	never := time.Unix(1<<40, 0)
	key := func(p Permit) time.Time {
		if p.Expiry.IsZero() {
			return never
		}
		return p.Expiry
	}
	sort.SliceStable(ps, func(i, j int) bool { return key(ps[i]).Before(key(ps[j])) })
}
