package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// A held name whose lock actor has nothing but Go callers' holds (nobody
// waits, nothing runs, no owner actor to watch) needs no live actor: after
// the idle timeout the actor hands its holds to the manager as a dormant
// record and stops (lockActor.sleep), the way an idle actor stops. The
// record is the holds themselves (owners, counts, grants with their tokens,
// leases and Held contexts, renewal registrations), the renewal generation
// and the hand-off count: a few hundred bytes instead of an actor, its
// mailbox and protoactor's share (~1.3 KiB).
//
// The manager serves a dormant name as the actor would:
//   - the watchdog reports every renewal to the manager (renewReport),
//     which moves the record's validity;
//   - the records' validity deadlines are entries of the runtime's wakeups
//     (one heap, one timer): when one passes, the actor is woken, and finds
//     the hold lost as it would have;
//   - any other message for the name (Acquire, Release, Extend, Cancel,
//     ForceUnlock, RenewGone, the protocol's requests) wakes the actor with
//     the record, then reaches it;
//   - Close wakes every dormant name to drain it; a manager that stops ends
//     the records' holds as a stopping lock actor would.
type dormant struct {
	wake     wakeup // at the earliest validity deadline of the holds
	key      LockKey
	holds    holdSet
	handoffs int32
}

// lockAsleep is a lock actor's offer of its holds (sleep).
type lockAsleep struct {
	childIdle[LockKey]
	rec *dormant
}

// sleepTaken tells a lock actor that the manager took the holds it
// offered: it forgets them and stops.
type sleepTaken struct{}

// wakeLock wakes a dormant name's actor (a validity deadline passed, or
// Close): counted like any routed message, and nothing more to do.
type wakeLock struct{ key LockKey }

func (m *wakeLock) lockKey() LockKey { return m.key }

// asleep takes the holds a lock actor offers, and stops it, unless more was
// routed to it since.
func (m *manager) asleep(ctx actor.Context, msg *lockAsleep) {
	if m.draining {
		return // the actor drains its holds itself (drainLock wakes it)
	}
	pid := m.locks.idle(msg.key, msg.pid, msg.routed)
	if pid == nil {
		return
	}
	rec := msg.rec
	rec.wake.rec = rec
	m.sleeping[rec.key] = rec
	m.env.wakeups.set(&rec.wake, ctx.Self(), rec.holds.earliest())
	ctx.Send(pid, &sleepTaken{})
}

// renewReport passes a chunk of the watchdog's outcomes on: a renewal of a
// dormant name moves its record's validity, anything else goes to the lock
// actor (a hold gone wakes a dormant name, which finds it lost).
func (m *manager) renewReport(ctx actor.Context, rep *renewReport) {
	if m.draining {
		return // every hold is being released
	}
	for i, e := range rep.renewed {
		key := LockKey{Kind: e.kind, Name: e.name}
		if rec := m.sleeping[key]; rec != nil {
			if renewed(m.env, &rec.holds, e.owner, e.gen, rep.sentAt, rep.reads[i]) {
				m.env.wakeups.set(&rec.wake, ctx.Self(), rec.holds.earliest())
			}
			continue
		}
		m.deliver(ctx, key, &renewConfirmed{Key: key, Owner: e.owner, Gen: e.gen, SentAt: rep.sentAt, Reads: rep.reads[i]})
	}
	for _, e := range rep.gone {
		key := LockKey{Kind: e.kind, Name: e.name}
		m.deliver(ctx, key, &renewGone{Key: key, Owner: e.owner, Gen: e.gen})
	}
}

// deliver sends msg, counted as routed, to the lock actor of key, waking
// the name if it is dormant; with neither, nobody holds anything of it here
// and msg is dropped.
func (m *manager) deliver(ctx actor.Context, key LockKey, msg routed) {
	if m.locks.get(key) == nil && m.sleeping[key] == nil {
		return
	}
	c := m.locks.route(key, func() *actor.PID { return m.spawn(ctx, key) })
	ctx.Send(c.pid, msg)
}

// waking takes the dormant record of key, if there is one, for the lock
// actor about to be spawned for key (newManager's producer).
func (m *manager) waking(key LockKey) *dormant {
	rec := m.sleeping[key]
	if rec == nil {
		return nil
	}
	delete(m.sleeping, key)
	m.env.wakeups.cancel(&rec.wake)
	rec.wake.rec = nil
	return rec
}

// validityDue wakes the name whose record's validity deadline passed.
func (m *manager) validityDue(ctx actor.Context, msg *wakeupDue) {
	rec := msg.w.rec
	if rec == nil || m.sleeping[rec.key] != rec || !rec.wake.due(msg) {
		return
	}
	m.wakeUp(ctx, rec.key)
}

// wakeUp spawns the actor of a dormant name with its record.
func (m *manager) wakeUp(ctx actor.Context, key LockKey) {
	m.deliver(ctx, key, &wakeLock{key: key})
}

// wakeAll wakes every dormant name: Close drains them.
func (m *manager) wakeAll(ctx actor.Context) {
	for key := range m.sleeping {
		m.wakeUp(ctx, key)
	}
}

// dropDormant runs when the manager stops (Close, or a failure): the
// dormant holds end as a stopping lock actor's do, released best effort.
func (m *manager) dropDormant() {
	for key := range m.sleeping {
		a := newLockActor(m.env, key)
		a.restore(m.waking(key))
		a.stop(nil)
	}
}

// restore gives a lock actor being spawned the holds of a dormant record.
func (a *lockActor) restore(rec *dormant) {
	a.holds, a.handoffs = rec.holds, rec.handoffs
}
