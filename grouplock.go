package actorlock

import (
	"context"
	"fmt"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// Group is several locks acquired together as one: a MultiLock (held when
// all of its members are) or a RedLock (held while a majority of them is).
// See MultiLock and RedLock for how each acquires. Like a Lock it may be
// shared between goroutines: acquisitions exclude each other unless one's
// ctx descends from the GroupHeld.Context() of another, which it then
// re-enters.
type Group struct {
	by groupAcquirer // multi or red
}

// groupAcquirer is how a kind of group takes its members.
type groupAcquirer interface {
	acquire(ctx context.Context, try bool, opts []AcquireOption) (*GroupHeld, error)
}

// Acquire takes the group, waiting as MultiLock or RedLock says: until
// WaitTime is used up (ErrNotAcquired) or ctx ends. Nothing stays held when
// it fails.
func (g *Group) Acquire(ctx context.Context, opts ...AcquireOption) (*GroupHeld, error) {
	if g == nil || g.by == nil {
		return nil, errZeroGroup
	}
	return g.by.acquire(ctx, false, opts)
}

// TryAcquire makes one attempt (one round for a RedLock): ErrNotAcquired
// if it fails, with nothing left held.
func (g *Group) TryAcquire(ctx context.Context, opts ...AcquireOption) (*GroupHeld, error) {
	if g == nil || g.by == nil {
		return nil, errZeroGroup
	}
	return g.by.acquire(ctx, true, opts)
}

// errZeroGroup answers a nil Group, or one not made by MultiLock or RedLock.
var errZeroGroup = sentinel.Op("acquire", "", fmt.Errorf("%w: nil Group, or not made by MultiLock or RedLock", ErrInvalidArgument))
