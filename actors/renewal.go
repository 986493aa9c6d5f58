package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// renewRegister asks the watchdog to renew Owner's hold of lock Name until
// RenewCancel with the same Gen. The lock manager is told about every
// renewal (renewReport), and tells the lock actor, or applies it to the
// name's dormant record (dormant.go). Sent again with the same Gen, it
// updates the registration (a read-write lock's read count, whose
// read-hold keys are renewed too).
type renewRegister struct {
	Name  string
	Kind  messages.Kind // the lock actor's key: see familyKey
	Owner string
	Gen   uint64
	RW    bool  // a read-write lock
	Reads int64 // its read holds
}

// renewCancel stops renewing registration Gen.
type renewCancel struct {
	Name  string
	Kind  messages.Kind
	Owner string
	Gen   uint64
}

// renewConfirmed tells a lock actor that registration Gen was renewed by a call sent
// at SentAt (monotonic): its hold is valid until SentAt + lease. The
// manager routes it, or applies it to a dormant name's record.
type renewConfirmed struct {
	Key    LockKey
	Owner  string
	Gen    uint64
	SentAt time.Time
	Reads  int64 // the read-hold keys it found and renewed, bit n-1 for key n (read-write lock)
}

// renewGone tells a lock actor that Redis no longer has registration Gen's
// hold (deleted, expired or taken): the hold is lost.
type renewGone struct {
	Key   LockKey
	Owner string
	Gen   uint64
}

func (m *renewConfirmed) lockKey() LockKey { return m.Key }
func (m *renewGone) lockKey() LockKey      { return m.Key }

// renewReport is what became of the holds of one chunk of a round, for the
// lock manager: one message per chunk (up to renewChunk scripts of holds),
// not one per hold, so that 100k holds do not queue 100k messages at the
// manager ahead of the requests it routes. The entries' fields it reads
// (name, kind, owner, gen) never change.
type renewReport struct {
	sentAt        time.Time
	renewed, gone []*renewEntry
	// reads: the read-hold keys the call found and renewed of each renewed
	// entry, bit n-1 for key n (a read-write lock's; 0 for others).
	reads []int64
}

type renewTick struct{}

// renewDone reports one chunk of a round.
type renewDone struct {
	sentAt  time.Time
	batches [][]*renewEntry
	held    [][]int64 // per batch (RenewResult); nil when the call failed
	err     error
	last    bool        // the part's last chunk
	round   *renewRound // the round it belongs to
}

// renewRound is one round of renewals: done when its parts are.
type renewRound struct{ parts int }

// maxRenewRounds is how many rounds may be in flight at once. A round held
// up (a lost reply waits for the read timeout, which may be longer than a
// lease) must not hold up the renewal of every hold behind it, nor of those
// registered since, which it does not carry: a new round starts each tick
// while fewer are out. More help nobody when Redis itself is slow: the lock
// actors' validity timers bound what that costs.
const maxRenewRounds = 3

// renewChunk is how many renewal scripts (of up to scripts.MaxRenewBatch
// locks each) one pipelined round trip carries. Each chunk is reported as
// soon as it returns, its holds valid from when it left: a round over 100k
// holds never keeps the first ones waiting for the last (their validity
// would run from the round's start), and the lock actors take their
// Renewed messages while the next chunk is in Redis.
const renewChunk = 10

// renewParts is how many goroutines share a round's chunks: while one
// reports what came back (a message to each lock actor), the other's next
// chunk is in Redis.
const renewParts = 2

// renewKey is a hold's registration: one per owner of a lock actor's key
// (the kind too: an owner id may hold a name under two kinds, WithOwner).
type renewKey struct {
	name, owner string
	kind        messages.Kind
}

type renewEntry struct {
	renewKey
	gen   uint64
	rw    bool
	reads int64
	// In renewal.order.
	prev, next *renewEntry
}

// renewOrder lists the entries least recently renewed first (registered
// counts as renewed: the hold was just acquired). A round takes them in
// this order, so each hold waits one round between renewals, wherever it
// fell in the one before (a map's order would make that up to two).
type renewOrder struct{ head, tail *renewEntry }

func (o *renewOrder) pushBack(e *renewEntry) {
	e.prev, e.next = o.tail, nil
	if o.tail != nil {
		o.tail.next = e
	} else {
		o.head = e
	}
	o.tail = e
}

func (o *renewOrder) remove(e *renewEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		o.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		o.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// renewal is the watchdog: one ticker for every watchdog-held lock of the
// runtime (not a timer per lock), renewing them every lease/3 in batched
// scripts of at most scripts.MaxRenewBatch locks, grouped per hash slot on a
// cluster. Registration and cancellation are messages to this one actor, so
// a renewal can never outlive the unlock that cancelled it.
type renewal struct {
	env      *runtimeEnv
	entries  map[renewKey]*renewEntry
	order    renewOrder
	stopTick scheduler.CancelFunc
	rounds   int  // rounds in flight (maxRenewRounds at most)
	missed   bool // a tick came while maxRenewRounds were in flight
}

func newRenewal(env *runtimeEnv) *renewal {
	return &renewal{env: env, entries: map[renewKey]*renewEntry{}}
}

func (r *renewal) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.rounds = 0
		r.syncTicker(ctx)
	case *actor.Stopping, *actor.Restarting:
		r.stopTicker()
	case *renewRegister:
		k := renewKey{m.Name, m.Owner, m.Kind}
		if old := r.entries[k]; old != nil {
			r.order.remove(old)
		}
		e := &renewEntry{renewKey: k, gen: m.Gen, rw: m.RW, reads: m.Reads}
		r.entries[k] = e
		r.order.pushBack(e)
		r.syncTicker(ctx)
	case *renewCancel:
		k := renewKey{m.Name, m.Owner, m.Kind}
		if e := r.entries[k]; e != nil && e.gen == m.Gen {
			delete(r.entries, k)
			r.order.remove(e)
		}
		r.syncTicker(ctx)
	case *renewTick:
		if len(r.entries) == 0 {
			r.stopTicker()
			return
		}
		r.renewAll(ctx)
	case *statsQuery:
		m.reply <- len(r.entries)
	case *renewDone:
		if m.last {
			if m.round.parts--; m.round.parts == 0 {
				r.rounds--
			}
		}
		r.report(m)
		if r.rounds < maxRenewRounds && r.missed {
			// Rounds took longer than their ticks: the next one starts
			// now, not a tick later, so no hold waits two ticks for its
			// turn.
			r.renewAll(ctx)
		}
		r.syncTicker(ctx)
	}
}

// syncTicker starts the ticker when something is registered. A tick that
// finds nothing registered stops it, not the last cancel: a lock taken and
// released back to back would otherwise start and stop a ticker per pair.
func (r *renewal) syncTicker(ctx actor.Context) {
	if len(r.entries) > 0 && r.stopTick == nil {
		every := r.env.Watchdog / 3
		r.stopTick = r.env.timers.SendRepeatedly(every, every, ctx.Self(), &renewTick{})
	}
}

func (r *renewal) stopTicker() {
	if r.stopTick != nil {
		r.stopTick()
		r.stopTick = nil
	}
}

func (r *renewal) renewAll(ctx actor.Context) {
	if r.rounds >= maxRenewRounds || len(r.entries) == 0 {
		r.missed = r.rounds >= maxRenewRounds
		return
	}
	r.missed = false
	batches := r.batches()
	env, self := r.env, ctx.Self()
	round := &renewRound{}
	r.rounds++
	for part := range renewParts {
		// Part i takes chunks i, i+renewParts, ...
		var chunks [][][]*renewEntry
		for i := part * renewChunk; i < len(batches); i += renewParts * renewChunk {
			chunks = append(chunks, batches[i:min(i+renewChunk, len(batches))])
		}
		if len(chunks) == 0 {
			break
		}
		round.parts++
		env.goCall(self, func(ctx context.Context) any {
			for _, c := range chunks[:len(chunks)-1] {
				env.deliver(self, runRenewals(ctx, env.Redis, env.Watchdog, c))
			}
			d := runRenewals(ctx, env.Redis, env.Watchdog, chunks[len(chunks)-1])
			d.last, d.round = true, round
			return d
		})
	}
	if round.parts == 0 {
		r.rounds--
	}
}

// batches splits the entries into script calls: one script per call (the
// read-write lock's renews read-hold keys too), and all keys of one call in
// one hash slot on a cluster.
func (r *renewal) batches() [][]*renewEntry {
	type group struct {
		rw   bool
		slot uint16
	}
	groups := map[group][]*renewEntry{}
	for e := r.order.head; e != nil; e = e.next {
		g := group{rw: e.rw}
		if r.env.Cluster != nil {
			g.slot = hashSlot(e.name)
		}
		groups[g] = append(groups[g], e)
	}
	var out [][]*renewEntry
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), scripts.MaxRenewBatch)
			out = append(out, g[:n])
			g = g[n:]
		}
	}
	return out
}

func runRenewals(ctx context.Context, rdb redis.UniversalClient, lease time.Duration, batches [][]*renewEntry) *renewDone {
	done := &renewDone{batches: batches, held: make([][]int64, len(batches))}
	// calls[i] queues batch i on a pipeline, or runs it alone (pipe nil)
	// after the server answered NOSCRIPT.
	calls := make([]func(pipe redis.Pipeliner) *redis.Cmd, len(batches))
	for i, b := range batches {
		if b[0].rw {
			batch := make([]scripts.RWRenewal, len(b))
			for j, e := range b {
				batch[j] = scripts.RWRenewal{Name: e.name, Owner: e.owner, Reads: e.reads}
			}
			calls[i] = func(pipe redis.Pipeliner) *redis.Cmd {
				if pipe == nil {
					return scripts.RetryRenewRW(ctx, rdb, lease, batch)
				}
				return scripts.RenewRW(ctx, pipe, lease, batch)
			}
			continue
		}
		batch := make([]scripts.Renewal, len(b))
		for j, e := range b {
			batch[j] = scripts.Renewal{Name: e.name, Owner: e.owner}
		}
		calls[i] = func(pipe redis.Pipeliner) *redis.Cmd {
			if pipe == nil {
				return scripts.RetryRenewLocks(ctx, rdb, lease, batch)
			}
			return scripts.RenewLocks(ctx, pipe, lease, batch)
		}
	}
	// The validity of every renewed hold counts from before the call left.
	done.sentAt = time.Now()
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batches))
	for i, call := range calls {
		cmds[i] = call(pipe)
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmd = calls[i](nil)
		}
		held, err := scripts.RenewResult(cmd, len(batches[i]))
		if err != nil {
			done.err = err
			continue
		}
		done.held[i] = held
	}
	return done
}

// report tells each lock actor what became of its holds, one message per
// hold. Entries re-registered or cancelled meanwhile are skipped by gen.
func (r *renewal) report(d *renewDone) {
	if d.err != nil {
		r.env.Log.Warn("actorlock: lock renewal failed", slog.Any("error", d.err))
	}
	rep := &renewReport{sentAt: d.sentAt}
	for i, batch := range d.batches {
		if d.held[i] == nil {
			r.renewalFailed(batch, d.err)
			continue
		}
		for j, e := range batch {
			cur := r.entries[e.renewKey]
			if cur == nil || cur.gen != e.gen {
				continue
			}
			if d.held[i][j] > 0 {
				r.order.remove(cur)
				r.order.pushBack(cur)
				rep.renewed = append(rep.renewed, e)
				rep.reads = append(rep.reads, d.held[i][j]-1)
				continue
			}
			delete(r.entries, e.renewKey)
			r.order.remove(cur)
			rep.gone = append(rep.gone, e)
		}
	}
	if len(rep.renewed)+len(rep.gone) > 0 {
		r.env.System.Root.Send(r.env.locks, rep)
	}
}
