package actorkit

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/messages"
)

// KeeperProps returns the props of a keeper, the heartbeat of an owner
// actor in another process than the runtime it locks with: a runtime keeps
// a remote owner's watchdog locks only while RenewRequests for them come in
// (at least every lease/3), and a keeper sends them. Spawn it as a child of
// the owner actor (ctx.Spawn), so that it stops with the owner: then, as
// when the owner's process dies or is cut off, the runtime releases the
// owner's locks within a lease. Tell it what to keep with Keep once a lock
// is acquired, and Unkeep once it is released. When a runtime refuses a
// renewal (the lock was lost, the runtime closed), the keeper stops keeping
// that lock and forwards the RenewResponse to its parent, which also gets
// a LockLost from the runtime when it can be reached.
//
// The keeper holds the owner to the same rule as a Held: when no renewal
// has been confirmed for a lease (less the drift allowance, see Held.Done),
// the runtime may already have released the lock, so the keeper stops
// keeping it and sends its parent a LockLost itself, before the runtime
// can let another owner in: an owner cut off from the runtime learns it
// there too. (The runtime's own LockLost may follow when it can be
// reached.)
func KeeperProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &keeper{kept: map[keptKey]*kept{}} })
}

// Keep asks a keeper to keep one lock alive. Its fields come from the
// AcquireRequest and its AcquireResponse.
type Keep struct {
	Runtime    *actor.PID // where the lock was acquired (its NamedPID)
	Name       string
	Kind       messages.Kind
	OwnerToken string
	// Lease is the lease the runtime granted (AcquireResponse.ttl_ms); the
	// keeper renews every Lease/3. 0: learnt from the first RenewResponse
	// (the keeper renews at once, then every 100 ms until one comes, and
	// can tell no loss before). Each RenewResponse's lease_ms (what is
	// left of the hold's validity: a fixed lease is never renewed) bounds
	// how long its renewal keeps the lock counted as held, never beyond
	// Lease.
	Lease time.Duration
	// Since is when the AcquireRequest was sent: the lease counts from
	// there. Zero: from when the Keep arrives, a little after the grant.
	Since time.Time
}

// Unkeep stops keeping a lock (after it was released).
type Unkeep struct {
	Runtime    *actor.PID
	Name       string
	Kind       messages.Kind
	OwnerToken string
}

// LogValue keeps the owner token out of logs (protoactor logs undelivered
// messages with slog). A nil Keep logs as an empty group.
func (k *Keep) LogValue() slog.Value {
	if k == nil {
		return slog.GroupValue()
	}
	return slog.GroupValue(slog.String("name", k.Name), slog.String("kind", k.Kind.String()), slog.Duration("lease", k.Lease))
}

// LogValue keeps the owner token out of logs. A nil Unkeep logs as an
// empty group.
func (k *Unkeep) LogValue() slog.Value {
	if k == nil {
		return slog.GroupValue()
	}
	return slog.GroupValue(slog.String("name", k.Name), slog.String("kind", k.Kind.String()))
}

type keptKey struct {
	runtime string // PID address/id
	name    string
	kind    messages.Kind
	token   string
}

type kept struct {
	keep  Keep
	lease time.Duration // 0: not known yet
	stop  scheduler.CancelFunc
	// pending: renewals not answered yet, by request id, with when each was
	// sent. Any of them may come back (a slow answer still proves the
	// runtime kept the lock from when it was sent), so none is forgotten
	// before a lease has passed.
	pending    map[string]time.Time
	validUntil time.Time // the lock counts as held until then; zero: not known yet
	expiry     scheduler.CancelFunc
}

type (
	keeperTick    struct{ key keptKey }
	keeperExpired struct {
		key keptKey
		at  time.Time
	}
)

// unknownLeaseRenewal is how often a keeper renews until it learns the
// lease: a first answer normally comes within a round trip.
const unknownLeaseRenewal = 100 * time.Millisecond

// keeper is the actor of KeeperProps. Its timers send to it through the
// actor system's root context, and stop when it stops.
type keeper struct {
	kept  map[keptKey]*kept
	byReq map[string]keptKey // unanswered renewals (a few per kept lock)
	// ids: the request ids of its renewals, "actorlock-keeper-<random>-<n>":
	// a RenewResponse extends the owner's belief, so a peer must not be
	// able to guess one it could forge.
	ids    string
	seq    uint64
	timers *scheduler.TimerScheduler
}

func keyOf(runtime *actor.PID, name string, kind messages.Kind, token string) keptKey {
	return keptKey{runtime: runtime.GetAddress() + "/" + runtime.GetId(), name: name, kind: kind, token: token}
}

func (k *keeper) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		k.timers = scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
		k.byReq = map[string]keptKey{}
		k.ids = "actorlock-keeper-" + actors.NewOwnerToken() + "-"
	case *actor.Stopping:
		for key := range k.kept {
			k.forget(key)
		}
		k.kept = nil
	case *Keep:
		if m.Runtime == nil || m.Name == "" || m.OwnerToken == "" || m.Lease < 0 {
			ctx.Logger().Warn("actorlock: keeper: invalid Keep (a runtime PID, a name and an owner token are needed)")
			return
		}
		key := keyOf(m.Runtime, m.Name, m.Kind, m.OwnerToken)
		k.forget(key)
		e := &kept{keep: *m}
		k.kept[key] = e
		if m.Lease > 0 {
			since := m.Since
			if since.IsZero() {
				since = time.Now()
			}
			k.setLease(ctx, key, e, m.Lease)
			k.confirmed(ctx, key, e, since, m.Lease)
		} else {
			k.renew(ctx, key, e)
			e.stop = k.timers.SendRepeatedly(unknownLeaseRenewal, unknownLeaseRenewal, ctx.Self(), &keeperTick{key: key})
		}
	case *Unkeep:
		k.forget(keyOf(m.Runtime, m.Name, m.Kind, m.OwnerToken))
	case *keeperTick:
		if e := k.kept[m.key]; e != nil {
			k.renew(ctx, m.key, e)
		}
	case *keeperExpired:
		e := k.kept[m.key]
		if e == nil || !e.validUntil.Equal(m.at) {
			return // renewed since
		}
		k.forget(m.key)
		if ctx.Parent() != nil {
			ctx.Send(ctx.Parent(), &messages.LockLost{Name: e.keep.Name, Kind: e.keep.Kind,
				Reason: "the keeper had no renewal confirmed for a lease: the runtime may have released the lock"})
		}
	case *messages.RenewResponse:
		key, ok := k.byReq[m.RequestId]
		if !ok {
			return
		}
		delete(k.byReq, m.RequestId)
		e := k.kept[key]
		if e != nil {
			sentAt := e.pending[m.RequestId]
			delete(e.pending, m.RequestId)
			if lease := time.Duration(m.LeaseMs) * time.Millisecond; m.Error == nil && m.Renewed && lease > 0 {
				if e.lease == 0 {
					k.setLease(ctx, key, e, lease)
				}
				k.confirmed(ctx, key, e, sentAt, lease)
			}
		}
		if m.Error != nil {
			// Renewing it further is pointless: tell the owner.
			k.forget(key)
			if ctx.Parent() != nil {
				ctx.Send(ctx.Parent(), m)
			}
		}
	}
}

// renew sends a RenewRequest for e, and forgets those unanswered for more
// than a lease (their answer could no longer extend anything).
func (k *keeper) renew(ctx actor.Context, key keptKey, e *kept) {
	now := time.Now()
	for id, sent := range e.pending {
		if now.Sub(sent) > max(e.lease, time.Second) {
			delete(e.pending, id)
			delete(k.byReq, id)
		}
	}
	if e.pending == nil {
		e.pending = map[string]time.Time{}
	}
	k.seq++
	id := k.ids + strconv.FormatUint(k.seq, 10)
	e.pending[id] = now
	k.byReq[id] = key
	ctx.Request(e.keep.Runtime, &messages.RenewRequest{
		RequestId: id, Name: e.keep.Name, Kind: e.keep.Kind, OwnerToken: e.keep.OwnerToken,
	})
}

// setLease renews every lease/3 from now on.
func (k *keeper) setLease(ctx actor.Context, key keptKey, e *kept, lease time.Duration) {
	e.lease = lease
	if e.stop != nil {
		e.stop()
	}
	every := max(lease/3, time.Millisecond)
	e.stop = k.timers.SendRepeatedly(every, every, ctx.Self(), &keeperTick{key: key})
}

// confirmed moves e's validity to valid (at most its lease) after sentAt,
// when a renewal sent then (or the acquisition) was confirmed for that
// long, and arms its expiry.
func (k *keeper) confirmed(ctx actor.Context, key keptKey, e *kept, sentAt time.Time, valid time.Duration) {
	valid = min(valid, e.lease)
	if valid <= 0 {
		return
	}
	until := sentAt.Add(valid - actors.Drift(valid))
	if !until.After(e.validUntil) {
		return
	}
	e.validUntil = until
	if e.expiry != nil {
		e.expiry()
	}
	e.expiry = k.timers.SendOnce(time.Until(until), ctx.Self(), &keeperExpired{key: key, at: until})
}

func (k *keeper) forget(key keptKey) {
	if e := k.kept[key]; e != nil {
		if e.stop != nil {
			e.stop()
		}
		if e.expiry != nil {
			e.expiry()
		}
		for id := range e.pending {
			delete(k.byReq, id)
		}
		delete(k.kept, key)
	}
}
