package actorlock

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

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
	// keeper renews every Lease/3. 0: 30 s, the default watchdog lease.
	Lease time.Duration
}

// Unkeep stops keeping a lock (after it was released).
type Unkeep struct {
	Runtime    *actor.PID
	Name       string
	Kind       messages.Kind
	OwnerToken string
}

// LogValue keeps the owner token out of logs (protoactor logs undelivered
// messages with slog).
func (k *Keep) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", k.Name), slog.String("kind", k.Kind.String()), slog.Duration("lease", k.Lease))
}

// LogValue keeps the owner token out of logs.
func (k *Unkeep) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", k.Name), slog.String("kind", k.Kind.String()))
}

type keptKey struct {
	runtime string // PID address/id
	name    string
	kind    messages.Kind
	token   string
}

type kept struct {
	keep    Keep
	stop    scheduler.CancelFunc
	pending string // request id of the renewal not answered yet
}

type keeperTick struct{ key keptKey }

// keeper is the actor of KeeperProps. Its timers send to it through the
// actor system's root context, and stop when it stops.
type keeper struct {
	kept   map[keptKey]*kept
	byReq  map[string]keptKey // unanswered renewals; one per kept lock at most
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
	case *actor.Stopping:
		for _, e := range k.kept {
			e.stop()
		}
		k.kept = nil
	case *Keep:
		if m.Runtime == nil || m.Name == "" || m.OwnerToken == "" || m.Lease < 0 {
			ctx.Logger().Warn("actorlock: keeper: invalid Keep (a runtime PID, a name and an owner token are needed)")
			return
		}
		key := keyOf(m.Runtime, m.Name, m.Kind, m.OwnerToken)
		k.forget(key)
		lease := m.Lease
		if lease == 0 {
			lease = 30 * time.Second
		}
		every := max(lease/3, time.Millisecond)
		k.kept[key] = &kept{keep: *m, stop: k.timers.SendRepeatedly(every, every, ctx.Self(), &keeperTick{key: key})}
	case *Unkeep:
		k.forget(keyOf(m.Runtime, m.Name, m.Kind, m.OwnerToken))
	case *keeperTick:
		e := k.kept[m.key]
		if e == nil {
			return
		}
		delete(k.byReq, e.pending)
		k.seq++
		e.pending = "actorlock-keeper-" + strconv.FormatUint(k.seq, 10)
		k.byReq[e.pending] = m.key
		ctx.Request(e.keep.Runtime, &messages.RenewRequest{
			RequestId: e.pending, Name: e.keep.Name, Kind: e.keep.Kind, OwnerToken: e.keep.OwnerToken,
		})
	case *messages.RenewResponse:
		key, ok := k.byReq[m.RequestId]
		if !ok {
			return
		}
		delete(k.byReq, m.RequestId)
		if e := k.kept[key]; e != nil {
			e.pending = ""
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

func (k *keeper) forget(key keptKey) {
	if e := k.kept[key]; e != nil {
		e.stop()
		delete(k.byReq, e.pending)
		delete(k.kept, key)
	}
}
