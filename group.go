package actorlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/mutant"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// GroupHeld is a MultiLock or RedLock acquisition: several member locks
// held together. Like Held, watch Done (or use Context) to learn that the
// group was lost: a MultiLock is lost when any member is, a RedLock when
// fewer than a majority of its members remain held. A nil GroupHeld, or one
// no acquisition returned, holds nothing, as a nil Held.
type GroupHeld struct {
	members []*Held
	ctx     context.Context
	end     context.CancelCauseFunc
	stops   []func() bool // member watches, stopped at Unlock
	lost    atomic.Int32

	what string // "MultiLock" or "RedLock", for its errors

	mu       sync.Mutex
	unlocked bool
}

// newGroupHeld watches members: the group is lost once more than
// len(members)-quorum of them are; validUntil (if not zero) also ends it.
// Its context keeps the values of acquireCtx and names each member's owner,
// so that acquiring the group (or a member) with it re-enters.
func newGroupHeld(acquireCtx context.Context, members []*Held, quorum int, validUntil time.Time, what string) *GroupHeld {
	base := context.WithoutCancel(acquireCtx)
	for _, m := range members {
		base = context.WithValue(base, m.lock.holdKey(), m.owner)
	}
	ctx, end := context.WithCancelCause(base)
	g := &GroupHeld{members: members, ctx: ctx, end: end, what: what}
	if !validUntil.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, validUntil, fmt.Errorf("%w: its validity time ran out", ErrLost))
		g.ctx = ctx
		g.stops = append(g.stops, func() bool { cancel(); return true })
	}
	spare := int32(len(members) - quorum)
	for _, m := range members {
		// context.AfterFunc starts no goroutine until the member ends.
		g.stops = append(g.stops, context.AfterFunc(m.Context(), func() {
			if g.lost.Add(1) > spare {
				g.end(sentinel.With(ErrLost, sentinel.Member(m.Name(), context.Cause(m.Context()))))
			}
		}))
	}
	return g
}

// Members are the member acquisitions (a RedLock: those that succeeded).
func (g *GroupHeld) Members() []*Held {
	if g == nil {
		return nil
	}
	return slices.Clone(g.members)
}

// Done is closed when the group's hold ends: Unlock, or loss.
func (g *GroupHeld) Done() <-chan struct{} { return g.Context().Done() }

// Err is nil while held; then why it ended (ErrUnlocked, an error wrapping
// ErrLost).
func (g *GroupHeld) Err() error { return context.Cause(g.Context()) }

// Context is cancelled, with Err as its cause, when the hold ends. Acquiring
// the group, or any of its members, with this context (or one derived from
// it) re-enters the members' holds.
func (g *GroupHeld) Context() context.Context {
	if g == nil || g.ctx == nil {
		return notHeld
	}
	return g.ctx
}

// Unlock releases every member (concurrently), and reports every member's
// error, joined, never stopping at the first. The group's hold ends with the
// first call (Done closes). If a member's release failed, call Unlock again:
// it waits for the members not released yet (the runtime keeps trying
// each failed release until Redis answers) and reports how they ended. Once
// every member is released, a further call returns ErrUnlocked.
func (g *GroupHeld) Unlock(ctx context.Context) (err error) {
	if g == nil || g.ctx == nil {
		return sentinel.Op("unlock", "", errNilHandle("GroupHeld"))
	}
	defer failed("unlock "+g.what, "", &err)
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unlocked {
		return ErrUnlocked
	}
	if mutant.On(4) {
		g.unlocked = true
	}
	for _, stop := range g.stops {
		stop()
	}
	errs := unlockAll(ctx, g.members)
	g.end(ErrUnlocked)
	if errs == nil {
		g.unlocked = true
	}
	return errs
}

// unlockAll releases every held (concurrently) and joins their errors.
func unlockAll(ctx context.Context, helds []*Held) error {
	errs := make([]error, len(helds))
	var wg sync.WaitGroup
	for i, h := range helds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// ErrUnlocked: released already, by an earlier call of ours.
			if err := h.Unlock(ctx); err != nil && !errors.Is(err, ErrUnlocked) {
				errs[i] = sentinel.Member(h.Name(), err)
			}
		}()
	}
	wg.Wait()
	return joinCauses(errs...)
}

// deployment is how every process names the Redis deployment rdb reaches,
// for the one global order of group members (orderMembers) and RedLock's
// check that its members are on distinct servers: WithServerName's name, else
// the address of a single server, the sorted seed addresses of a cluster or
// ring, and the database number. A Sentinel (failover) client has no name
// that every process computes alike: go-redis keeps the master name to itself,
// and the master's address and run id change with a failover, so processes
// that computed them on either side of one would order members differently.
// Its name is then "", and orderMembers refuses it in a group with another
// runtime's members.
func deployment(rdb redis.UniversalClient, given string) (name string, db int) {
	switch c := rdb.(type) {
	case *redis.Client:
		name, db = c.Options().Addr, c.Options().DB
		if name == "FailoverClient" {
			name = ""
		}
	case *redis.ClusterClient:
		addrs := slices.Clone(c.Options().Addrs)
		sort.Strings(addrs)
		name = strings.Join(addrs, ",")
	case *redis.Ring:
		var addrs []string
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		name, db = strings.Join(addrs, ","), c.Options().DB
	}
	if given != "" {
		name = given
	}
	return name, db
}

// groupOptions checks what makes a group acquisition impossible before
// anything is tried: bad members (membersErr), options or context.
func groupOptions(ctx context.Context, membersErr error, try bool, opts []AcquireOption) (acquireConfig, error) {
	ac, err := acquireOptions(opts)
	switch {
	case membersErr != nil:
		return ac, membersErr
	case err != nil:
		return ac, err
	case ctx == nil:
		return ac, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case try && ac.waitSet:
		return ac, fmt.Errorf("%w: TryAcquire makes one attempt; use Acquire with WaitTime to wait", ErrInvalidArgument)
	}
	return ac, nil
}

// groupMember is a member lock with its place in the global order: its
// runtime's deployment (see deployment) and database.
type groupMember struct {
	lock   *Lock
	server string
	db     int
}

// orderMembers validates a group's members and sorts them by deployment,
// database, name, then kind: every process acquires them in this order, so
// two groups sharing locks never wait for each other in a cycle. Members
// are the same lock when they name one Redis key on one deployment, whatever
// their runtimes (two runtimes may share a server) or kinds (a lock and a
// fair lock share their key, and so do the sides of a read-write lock):
// acquired by two owners, such a group would wait for itself.
func orderMembers(locks []*Lock, what string) ([]groupMember, error) {
	if len(locks) == 0 {
		return nil, fmt.Errorf("%w: no locks", ErrInvalidArgument)
	}
	members := make([]groupMember, len(locks))
	for i, l := range locks {
		if l == nil {
			return nil, fmt.Errorf("%w: member %d is nil", ErrInvalidArgument, i)
		}
		if l.err != nil {
			return nil, l.err
		}
		members[i] = groupMember{lock: l, server: l.rt.server, db: l.rt.db}
	}
	mixed := slices.ContainsFunc(members, func(m groupMember) bool { return m.lock.rt != members[0].lock.rt })
	for _, m := range members {
		if mixed && m.server == "" {
			return nil, fmt.Errorf("%w: %s member %q: its runtime's Redis client (Sentinel) has no name that every process gives it alike, which the members' order across runtimes needs: name the deployment with WithServerName (the master name)",
				ErrInvalidArgument, what, m.lock.key.Name)
		}
	}
	slices.SortFunc(members, func(a, b groupMember) int {
		return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.db, b.db),
			cmp.Compare(a.lock.key.Name, b.lock.key.Name), cmp.Compare(a.lock.key.Kind, b.lock.key.Kind))
	})
	for i := 1; i < len(members); i++ {
		a, b := members[i-1], members[i]
		if a.server == b.server && a.db == b.db && a.lock.key.Name == b.lock.key.Name {
			return nil, fmt.Errorf("%w: lock %s given twice", ErrInvalidArgument, sentinel.Quote(a.lock.key.Name))
		}
	}
	return members, nil
}
