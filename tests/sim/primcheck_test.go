package sim

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

// The primitives' checks. Each name has a warden that, every few seconds,
// closes its gate to the workers (quiesce): once no call of the workload is
// on the name, no command on it is in flight in a runtime's client or on
// its way as a late duplicate, and none was for quietFor, what the library
// does in the background (give-backs of items and permits, settling) has
// run too, and every call's outcome is final in Redis. The warden then reads
// the name's keys in one transaction and holds them to the ledger, exactly:
// a call that may have acted counts once or not at all, never twice, and
// nothing else is excused. A state that does not fit is read again for a
// call timeout (a background call may have been slower still) before it is
// a violation. A state that fits settles the ledger: the calls that may have
// acted are resolved by what Redis shows, and the next quiet point counts
// from there.
//
// The invariants, as violations name them:
const (
	invItems      = "queue items are conserved: each item offered is delivered once or is still in Redis, never twice"
	invDelivered  = "a queue item is delivered at most once, and only if offered"
	invHold       = "no item stays in a pop's hold"
	invDelayed    = "a delayed queue's list and its zset hold the same items"
	invPermits    = "a semaphore's permits are conserved: available + held = set + added - drained"
	invRecorded   = "every permit recorded in Redis is held by a caller"
	invHeld       = "a permit is held until it is released or its lease ends"
	invLatch      = "a latch never counts one CountDown twice"
	invLatchLost  = "a latch counts every CountDown that returned nil"
	invAwaitEarly = "Await returns only once the count is zero"
	invAwaitLate  = "Await returns once the count is zero"
	invRound      = "a MultiLock or RedLock round that fails leaves nothing held"
)

// quietFor is how long a quiet name must have had no Redis call on it: the
// longest pause between the background calls of one of the library's
// chains (settling retries at least every second). A permit-expirable
// semaphore's acquisition whose outcome is unknown waits, silent, until no
// attempt of it can act (its call's deadline by the server's clock, with a
// slack of half a call timeout) before it asks Redis again: up to a call
// timeout and a half after its last call. A call of a chain may also wait,
// unseen by the hooks, in the runtime's batching client while every
// flight is on the wire: at most a read timeout (a flight's pipeline ends
// then at the latest, say when CLIENT PAUSE WRITE holds it).
func (c *config) quietFor(kind int) time.Duration {
	base := 1500 * time.Millisecond
	if raceEnabled {
		base = 2500 * time.Millisecond
	}
	base += slices.Max(c.readTimeouts)
	if kind == pExpirable {
		return max(base, 2*c.callTimeout)
	}
	return base
}

// warden runs p's quiet points, and a latch's cycles, until the run ends.
func (w *world) warden(p *primState, idx int) {
	r := rand.New(rand.NewPCG(w.cfg.seed, 0x9a1d+uint64(idx)))
	for w.ctx.Err() == nil {
		if p.kind == pLatch && !w.latchStart(p, r) {
			return
		}
		p.closed.Store(false)
		active := time.Now().Add(time.Duration(1500+r.IntN(2500)) * time.Millisecond)
		for time.Now().Before(active) {
			if !w.pause(200 * time.Millisecond) {
				return
			}
			if p.kind == pLatch {
				w.latchWatch(p)
			}
		}
		if !w.quiesce(p) {
			return
		}
		w.judge(p, false)
		// A latch's next cycle starts once what its end started (messages,
		// reads) is over: a "0" of this cycle is this cycle's.
		if p.kind == pLatch && (!w.latchEnd(p, r) || !w.quiesce(p)) {
			return
		}
	}
}

// quiesce closes p's gate and waits until p is quiet (see above); false if
// the run ended first.
func (w *world) quiesce(p *primState) bool {
	p.closed.Store(true)
	for {
		if w.ctx.Err() != nil {
			return false
		}
		if p.ops.Load() == 0 && p.calls.Load() == 0 && p.dups.Load() == 0 && time.Since(time.Unix(0, p.lastCall.Load())) >= w.cfg.quietFor(p.kind) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// primsQuiet waits, up to bound, until every primitive is quiet (the run
// has ended: no worker calls on them any more).
func (w *world) primsQuiet(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for _, p := range w.model.primList {
		for time.Now().Before(deadline) && (p.calls.Load() > 0 || p.dups.Load() > 0 || time.Since(time.Unix(0, p.lastCall.Load())) < w.cfg.quietFor(p.kind)) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// primSnap is what one transaction read of a primitive's keys.
type primSnap struct {
	list, delayList, delayZset []string
	holds                      map[string][]string
	count                      int64 // a semaphore's available permits, a latch's count
	permits                    []redis.Z
	legacy                     int64
	now                        time.Time // the server's clock
}

// snapshot reads p's keys in one MULTI/EXEC.
func (w *world) snapshot(ctx context.Context, p *primState, holds []string) (*primSnap, error) {
	s := &primSnap{holds: map[string][]string{}}
	var list, dlist, holdCmds []*redis.StringSliceCmd
	var zset *redis.StringSliceCmd
	var count *redis.StringCmd
	var permits *redis.ZSliceCmd
	var legacy *redis.IntCmd
	var now *redis.TimeCmd
	_, err := w.admin.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		switch p.kind {
		case pQueue:
			list = append(list, pipe.LRange(ctx, p.name, 0, -1))
			dlist = append(dlist, pipe.LRange(ctx, scripts.DelayQueueKey(p.name), 0, -1))
			zset = pipe.ZRange(ctx, scripts.DelayTimeoutKey(p.name), 0, -1)
			for _, h := range holds {
				holdCmds = append(holdCmds, pipe.LRange(ctx, h, 0, -1))
			}
		case pExpirable:
			permits = pipe.ZRangeWithScores(ctx, scripts.PermitTimeoutKey(p.name), 0, -1)
			legacy = pipe.ZCard(ctx, scripts.LegacyPermitTimeoutKey(p.name))
			fallthrough
		default:
			count = pipe.Get(ctx, p.name)
		}
		now = pipe.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	s.now = now.Val()
	switch p.kind {
	case pQueue:
		s.list, s.delayList, s.delayZset = list[0].Val(), dlist[0].Val(), zset.Val()
		for i, h := range holds {
			// A guard of the same prefix is a string: no hold.
			if v, err := holdCmds[i].Result(); err == nil && len(v) > 0 {
				s.holds[h] = v
			}
		}
	case pExpirable:
		s.permits, s.legacy = permits.Val(), legacy.Val()
		fallthrough
	default:
		if v, err := count.Result(); err == nil {
			if s.count, err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, fmt.Errorf("%s holds %q", p.name, v)
			}
		} else if !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	return s, nil
}

// issue is a state that does not fit the ledger.
type issue struct {
	invariant, detail string
}

func mismatch(invariant, format string, args ...any) *issue {
	return &issue{invariant, fmt.Sprintf(format, args...)}
}

// judge reads p and holds it to its ledger, again for up to a call timeout
// and the tolerance while it does not fit; final: the run's last look,
// after every runtime closed.
func (w *world) judge(p *primState, final bool) {
	m := w.model
	deadline := time.Now().Add(w.cfg.callTimeout + w.cfg.tol)
	for {
		m.mu.Lock()
		restarts := m.restartSeq
		var holds []string
		if p.q != nil {
			for h := range p.q.holds {
				holds = append(holds, h)
			}
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		snap, err := w.snapshot(ctx, p, holds)
		cancel()
		if err == nil {
			m.mu.Lock()
			if m.restartSeq != restarts {
				m.mu.Unlock()
				continue // Redis restarted while it was read
			}
			wiped := p.restarts != restarts
			p.restarts = restarts
			is := m.checkPrim(p, snap, wiped)
			if is == nil {
				p.quiets++
				m.mu.Unlock()
				return
			}
			if time.Now().After(deadline) {
				m.failPrim(is.invariant, p, "%s (quiet point %d; the same for %v)", is.detail, p.quiets+1, w.cfg.callTimeout+w.cfg.tol)
				m.mu.Unlock()
				return
			}
			m.mu.Unlock()
		} else if time.Now().After(deadline) {
			return
		}
		if !final && w.ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkPrim holds snap to p's ledger and, when it fits, settles the ledger
// (m.mu held). wiped: Redis restarted without persistence since p's last
// quiet point (unsafe: it forgets items and permits), so the ledger only
// starts again from what Redis holds.
func (m *model) checkPrim(p *primState, s *primSnap, wiped bool) *issue {
	switch p.kind {
	case pQueue:
		return m.checkQueue(p, s, wiped)
	case pSemaphore:
		return m.checkSemaphore(p, s, wiped)
	case pExpirable:
		return m.checkExpirable(p, s, wiped)
	case pLatch:
		return m.checkLatch(p, s, wiped)
	}
	return nil
}

// delayedValue is the value of a delayed queue's member (scripts.DelayMember).
func delayedValue(member string) string {
	if len(member) >= 17 && member[0] == 8 {
		n := binary.LittleEndian.Uint64([]byte(member[9:17]))
		if uint64(len(member)-17) >= n {
			return member[17 : 17+n]
		}
	}
	return member
}

func (m *model) checkQueue(p *primState, s *primSnap, wiped bool) *issue {
	q := p.q
	present := map[string]int{}
	where := map[string][]string{} // for the details
	var order []string
	add := func(v, at string) {
		if present[v] == 0 {
			order = append(order, v)
		}
		present[v]++
		where[v] = append(where[v], at)
	}
	for _, v := range s.list {
		add(v, "the list")
	}
	listed := map[string]int{}
	for _, mem := range s.delayList {
		listed[mem]++
		add(delayedValue(mem), "the delayed queue")
	}
	var inHolds []string
	for h, items := range s.holds {
		story := fmt.Sprintf("%s (what reached it: %s)", h, strings.Join(q.holds[h], "; "))
		since, seen := q.holdsSince[h]
		for _, v := range items {
			add(v, story)
			if seen && since != m.restartSeq {
				p.record(-1, "%s stays in %s: its pop was sent before a restart without persistence wiped what ended the hold", v, story)
				continue
			}
			inHolds = append(inHolds, v+" in "+story)
		}
	}
	resolve := func() {
		m.settleQueue(p, present, wiped)
		for h := range q.holds {
			if _, ok := s.holds[h]; !ok {
				delete(q.holds, h)
				delete(q.holdsSince, h)
			}
		}
	}
	if wiped {
		p.record(-1, "quiet point after a restart: the ledger starts again from Redis")
		resolve()
		return nil
	}
	if !equalMembers(listed, s.delayZset) {
		return mismatch(invDelayed, "the list holds %d members (%s), the zset %d (%s)", len(s.delayList), values(s.delayList), len(s.delayZset), values(s.delayZset))
	}
	for _, v := range order {
		it := q.items[v]
		switch {
		case it == nil && q.ended[v] != "":
			return mismatch(invItems, "%s is in %s after it had %s", v, strings.Join(where[v], ", "), q.ended[v])
		case it == nil:
			return mismatch(invItems, "%q is in %s and was never offered", v, strings.Join(where[v], ", "))
		case present[v] > 1:
			return mismatch(invItems, "%s is in Redis %d times, in %s (its Offer %s)", v, present[v], strings.Join(where[v], ", "), offerWord(it))
		case it.delivered+present[v] > 1 || it.removed == removeDone:
			return mismatch(invItems, "%s is in %s after it was delivered %d times (removed: %v)", v, strings.Join(where[v], ", "), it.delivered, it.removed == removeDone)
		}
	}
	var missing []string
	lossable := 0
	for v, it := range q.items {
		if it.offer == offerDone && it.removed == removeNone && it.delivered == 0 && present[v] == 0 {
			missing = append(missing, v)
			if it.delayed {
				lossable++
			}
		}
	}
	if len(missing) > 0 && (lossable < len(missing) || len(missing) > q.lossBudget) {
		sort.Strings(missing)
		return mismatch(invItems, "%d items whose Offer returned nil are neither delivered nor in Redis: %s (the delayed queue's Polls that may have lost one: %d)",
			len(missing), strings.Join(missing[:min(len(missing), 6)], ", "), q.lossBudget)
	}
	if len(inHolds) > 0 {
		sort.Strings(inHolds)
		return mismatch(invHold, "%d items sit in pops' holds, where no taker gets them: %s", len(inHolds), strings.Join(inHolds[:min(len(inHolds), 3)], " | "))
	}
	resolve()
	return nil
}

func offerWord(it *queueItem) string {
	return map[int]string{offerPending: "had not returned", offerDone: "returned nil", offerMaybe: "failed"}[it.offer]
}

// settleQueue: every call on the queue returned and its outcome is in
// Redis: items found go on, the others end.
func (m *model) settleQueue(p *primState, present map[string]int, wiped bool) {
	q := p.q
	for v, it := range q.items {
		switch {
		case present[v] > 0:
			it.offer, it.removed = offerDone, removeNone
		case it.delivered > 0:
			q.ended[v] = "been delivered"
			delete(q.items, v)
		case it.removed == removeDone:
			q.ended[v] = "been removed"
			delete(q.items, v)
		case wiped:
			q.ended[v] = "been lost to a restart without persistence"
			delete(q.items, v)
		case it.offer == offerMaybe:
			q.ended[v] = "never been stored (its Offer failed)"
			delete(q.items, v)
		case it.removed == removeMaybe:
			q.ended[v] = "been removed (by a Remove that failed)"
			delete(q.items, v)
		case it.offer == offerDone:
			q.ended[v] = "been lost to a delayed queue's Poll whose reply was lost"
			delete(q.items, v)
		}
	}
	q.lossBudget = 0
}

// equalMembers reports whether the list's members (counted) are the zset's.
func equalMembers(listed map[string]int, zset []string) bool {
	n := 0
	for _, k := range listed {
		n += k
	}
	if n != len(zset) {
		return false
	}
	for _, z := range zset {
		if listed[z] != 1 {
			return false
		}
	}
	return true
}

func values(members []string) string {
	var out []string
	for _, mem := range members[:min(len(members), 6)] {
		out = append(out, delayedValue(mem))
	}
	return strings.Join(out, ", ")
}

// sums is every sum of a subset of deltas.
func sums(deltas []int64) map[int64]bool {
	out := map[int64]bool{0: true}
	for _, d := range deltas {
		next := make(map[int64]bool, 2*len(out))
		for s := range out {
			next[s] = true
			next[s+d] = true
		}
		out = next
	}
	return out
}

func (m *model) checkSemaphore(p *primState, s *primSnap, wiped bool) *issue {
	l := p.s
	settle := func() {
		l.expected, l.unknown, l.drainMaybe = s.count, nil, false
	}
	if wiped || l.drainMaybe {
		p.record(-1, "quiet point after a restart or a Drain that failed: the count starts again from Redis (%d)", s.count)
		settle()
		return nil
	}
	if !sums(l.unknown)[s.count-l.expected] {
		return mismatch(invPermits, "Redis has %d available; the calls that returned account for %d (held %d, set %d, added %d, drained %d), and those that may have acted for any sum of %v more",
			s.count, l.expected, l.held, l.set, l.added, l.drained, l.unknown)
	}
	settle()
	return nil
}

func (m *model) checkExpirable(p *primState, s *primSnap, wiped bool) *issue {
	x := p.x
	recorded := map[string]float64{}
	for _, z := range s.permits {
		recorded[hex.EncodeToString([]byte(fmt.Sprint(z.Member)))] = z.Score
	}
	total := s.count + int64(len(s.permits)) + s.legacy
	settle := func() { x.total, x.unknown = total, nil }
	if wiped {
		settle()
		return nil
	}
	if !sums(x.unknown)[total-x.total] {
		return mismatch(invPermits, "Redis has %d available and %d permits recorded (%d legacy): %d; the calls that returned account for %d, and those that may have acted for any sum of %v more",
			s.count, len(s.permits), s.legacy, total, x.total, x.unknown)
	}
	nowMs := float64(s.now.UnixMilli())
	for id, expiry := range recorded {
		if x.permits[id] == nil && expiry > nowMs {
			return mismatch(invRecorded, "permit %s is recorded until %s, and no caller holds it (what reached it: %s)", id, expiryString(expiry), strings.Join(x.stories[id], "; "))
		}
	}
	for id, pm := range x.permits {
		if _, ok := recorded[id]; !ok && !pm.releaseMaybe && (pm.lease == 0 || s.now.Before(pm.asked.Add(pm.lease))) {
			return mismatch(invHeld, "permit %s of worker %d (asked %s, lease %v) is not recorded in Redis at %s",
				id, pm.worker, pm.asked.Format("15:04:05.000"), pm.lease, s.now.Format("15:04:05.000"))
		}
	}
	settle()
	return nil
}

func (m *model) checkLatch(p *primState, s *primSnap, wiped bool) *issue {
	l := p.l
	if wiped || !l.active || l.restarts != m.restartSeq {
		return nil
	}
	lo, hi := l.n-l.ok-l.maybe, l.n-l.ok
	switch {
	case s.count < lo:
		return mismatch(invLatch, "the count is %d; set to %d, %d CountDowns returned nil and %d may have counted: at least %d", s.count, l.n, l.ok, l.maybe, lo)
	case s.count > hi:
		return mismatch(invLatchLost, "the count is %d; set to %d, %d CountDowns returned nil: at most %d", s.count, l.n, l.ok, hi)
	}
	l.ok, l.maybe = l.n-s.count, 0
	return nil
}

// latchWatch: while a cycle runs, the count is never below what the
// CountDowns started so far can have made it.
func (w *world) latchWatch(p *primState) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := w.admin.Get(ctx, p.name).Int64()
	if errors.Is(err, redis.Nil) {
		c, err = 0, nil
	}
	if err != nil {
		return
	}
	m := w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	l := p.l
	if l.active && l.restarts == m.restartSeq && c < l.n-l.tickets {
		m.failPrim(invLatch, p, "the count is %d; set to %d, with %d CountDowns started so far (cycle %d)", c, l.n, l.tickets, l.cycle)
	}
}

// latchStart starts a cycle: the count set by TrySetCount through some
// runtime (a call like any other, faults included). false if the run ended.
func (w *world) latchStart(p *primState, r *rand.Rand) bool {
	m := w.model
	n := int64(6 + r.IntN(14))
	for w.ctx.Err() == nil {
		s := w.slots[r.IntN(len(w.slots))]
		s.mu.RLock()
		rt := s.rt
		s.mu.RUnlock()
		ctx, cancel := context.WithTimeout(w.ctx, w.cfg.callTimeout)
		id := m.begin(-1, "latch try set count "+p.name, p.name, w.cfg.callTimeout+w.cfg.tol)
		ok, err := rt.CountDownLatch(p.name).TrySetCount(ctx, n)
		m.end(id)
		cancel()
		m.mu.Lock()
		p.record(-1, "warden: try set count %d -> %v %s", n, ok, errKind(err))
		m.mu.Unlock()
		if err != nil || !ok {
			// Set or not: once no attempt of it can act, Redis says.
			if !w.quiesce(p) {
				return false
			}
			c, err := w.admin.Get(w.ctx, p.name).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				continue
			}
			if ok = c == n; !ok && c != 0 {
				m.mu.Lock()
				p.record(-1, "warden: the count is %d, not %d: counting it down", c, n)
				m.mu.Unlock()
				w.countToZero(p, r)
				continue
			}
		}
		if ok {
			m.mu.Lock()
			*p.l = latchLedger{cycle: p.l.cycle + 1, active: true, n: n, restarts: m.restartSeq}
			m.mu.Unlock()
			return true
		}
	}
	return false
}

// countToZero counts p down through the runtimes until Redis shows zero.
func (w *world) countToZero(p *primState, r *rand.Rand) {
	for w.ctx.Err() == nil {
		c, err := w.admin.Get(w.ctx, p.name).Int64()
		if errors.Is(err, redis.Nil) || err == nil && c <= 0 {
			return
		}
		s := w.slots[r.IntN(len(w.slots))]
		s.mu.RLock()
		rt := s.rt
		s.mu.RUnlock()
		ctx, cancel := context.WithTimeout(w.ctx, w.cfg.callTimeout)
		err = rt.CountDownLatch(p.name).CountDown(ctx)
		cancel()
		w.primOps.Add(1)
		m := w.model
		m.mu.Lock()
		p.record(-1, "warden: count down from %d -> %s", c, errKind(err))
		m.mu.Unlock()
	}
}

// latchEnd ends a cycle: awaiters start, the warden counts the latch down
// to zero, and every awaiter returns nil, not before the last CountDown
// began and within a recheck, a call timeout and the tolerance after zero.
// false if the run ended.
func (w *world) latchEnd(p *primState, r *rand.Rand) bool {
	m, c := w.model, w.cfg
	m.mu.Lock()
	restarts := p.l.restarts
	p.l.active = false
	cycle := p.l.cycle
	m.mu.Unlock()
	type awaited struct {
		err error
		at  time.Time
	}
	const awaiters = 2
	out := make(chan awaited, awaiters)
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	for range awaiters {
		s := w.slots[r.IntN(len(w.slots))]
		s.mu.RLock()
		rt := s.rt
		s.mu.RUnlock()
		go func() {
			id := m.begin(-1, "latch await (cycle end) "+p.name, p.name, 30*time.Second+c.tol)
			err := rt.CountDownLatch(p.name).Await(ctx)
			m.end(id)
			out <- awaited{err, time.Now()}
		}()
	}
	// Let the awaiters reach their actors before the count reaches zero.
	if !w.pause(100 * time.Millisecond) {
		return false
	}
	first := time.Now()
	w.countToZero(p, r)
	zero := time.Now()
	bound := time.Second + c.callTimeout + c.tol
	for range awaiters {
		var a awaited
		select {
		case a = <-out:
		case <-time.After(time.Until(zero.Add(bound))):
			a = awaited{err: fmt.Errorf("no answer %v after zero", bound), at: time.Now()}
		}
		m.mu.Lock()
		p.record(-1, "warden: await (cycle %d end) -> %s", cycle, errKind(a.err))
		unsafe := restarts != m.restartSeq
		switch {
		case unsafe || errors.Is(a.err, actorlock.ErrClosed) || w.ctx.Err() != nil:
		case a.err == nil && a.at.Before(first):
			m.failPrim(invAwaitEarly, p, "an Await of cycle %d returned nil %v before the first of its last CountDowns began", cycle, first.Sub(a.at))
		case a.err != nil || a.at.After(zero.Add(bound)):
			m.failPrim(invAwaitLate, p, "an Await of cycle %d got %v, %v after Redis showed zero (bound %v)", cycle, errKind(a.err), a.at.Sub(zero), bound)
		}
		m.mu.Unlock()
	}
	cancel()
	return w.ctx.Err() == nil
}

// finalPrims is the last look at every primitive, once every runtime has
// closed: the same checks, and any hold a pop left anywhere; then their
// keys go.
func (w *world) finalPrims(ctx context.Context) {
	m := w.model
	for _, p := range m.primList {
		if p.q != nil {
			var cursor uint64
			for {
				keys, next, err := w.admin.Scan(ctx, cursor, scripts.RequestKey(p.name, "*"), 500).Result()
				if err != nil {
					break
				}
				for _, k := range keys {
					if t, _ := w.admin.Type(ctx, k).Result(); t == "list" {
						m.mu.Lock()
						if _, ok := p.q.holds[k]; !ok {
							p.q.holds[k] = []string{"(found by a scan at the end)"}
						}
						m.mu.Unlock()
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		w.judge(p, true)
	}
	var keys []string
	for _, p := range m.primList {
		keys = append(keys, p.name, scripts.DelayQueueKey(p.name), scripts.DelayTimeoutKey(p.name), scripts.PermitTimeoutKey(p.name), scripts.LegacyPermitTimeoutKey(p.name))
		if p.q != nil {
			m.mu.Lock()
			for h := range p.q.holds {
				keys = append(keys, h)
			}
			m.mu.Unlock()
		}
	}
	slices.Sort(keys)
	_ = w.admin.Del(ctx, slices.Compact(keys)...).Err()
}

// setPermits gives each semaphore its permits before the workload starts
// (an admin SET of the count, as TrySetPermits would).
func (w *world) setPermits(ctx context.Context, r *rand.Rand) error {
	m := w.model
	for _, p := range m.primList {
		if p.kind != pSemaphore && p.kind != pExpirable {
			continue
		}
		n := int64(3 + r.IntN(4))
		if err := w.admin.Set(ctx, p.name, n, 0).Err(); err != nil {
			return err
		}
		if p.s != nil {
			p.s.expected, p.s.set = n, n
		} else {
			p.x.total = n
		}
		p.record(-1, "set %d permits", n)
	}
	return nil
}

// expiryString is a permit's expiry as a violation shows it.
func expiryString(ms float64) string {
	if int64(ms) >= scripts.PermitNever {
		return "never (no lease)"
	}
	return time.UnixMilli(int64(ms)).Format("15:04:05.000")
}
