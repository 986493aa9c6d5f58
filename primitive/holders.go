package primitive

import (
	"context"
	"time"

	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/internal/inspect"
)

// PermitHolder is a taken permit of a permit-expirable semaphore. Permits
// have ids, not owners: whoever has the id holds it.
type PermitHolder struct {
	ID string // 32 hex digits, as Acquire returns them
	// Expiry is when the permit returns to the pool by itself, by the
	// Redis server's clock; zero when it has no lease.
	Expiry time.Time
	// Remaining is Expiry less the Redis server's time when read (0
	// without lease); negative: it has expired and returns to the pool at
	// the semaphore's next call.
	Remaining time.Duration
}

// Holders lists the taken permits, soonest expiry first (at most 100),
// expired ones not yet returned included. What it shows may have changed
// by the time it returns.
func (s *PermitExpirableSemaphore) Holders(ctx context.Context) (_ []PermitHolder, err error) {
	o := s.p()
	defer o.wrap("holders", &err)
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.rt.Actors.CallTimeout())
	defer cancel()
	read, err := core.WrongKind(inspect.Read(ctx, o.rt.Redis, o.name, inspect.ExpirableSemaphore, 0))
	if err != nil {
		return nil, err
	}
	out := make([]PermitHolder, len(read.Permits))
	for i, p := range read.Permits {
		out[i] = PermitHolder{ID: p.ID, Expiry: p.Expiry, Remaining: p.Remaining}
	}
	return out, nil
}
