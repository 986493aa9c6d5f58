package sim

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlock/actorlock"
)

// Lock kinds of names: a name is used with one kind (a read-write name with
// both sides).
const (
	kLock = iota
	kFair
	kRW
)

var kindNames = [...]string{"lock", "fair", "rw"}

// hold is one Held the workload got back, as the model tracks it.
type hold struct {
	id    uint64
	h     *actorlock.Held
	name  string
	owner string
	field string // its field in the name's hash: owner, or owner:write
	write bool   // a write hold of a read-write lock
	slot  int    // the runtime's slot and generation
	gen   int
	lease time.Duration
	since time.Time
	group bool // a member of a MultiLock or RedLock

	// unlocking: an Unlock of it is in flight.
	unlocking int
	// released: Unlock returned nil or ErrUnlocked; toldLost: it returned
	// ErrLost; abandoned: its group was unlocked (its Done must follow).
	released, toldLost, abandoned time.Time
	// ctxUnlock: an Unlock returned its ctx's error (the release completes).
	ctxUnlock time.Time
	// failedUnlock: an Unlock of it failed (Redis, or its ctx).
	failedUnlock bool
	doneSeen     time.Time
	absentSince  time.Time

	// For the exact checks (checker_test.go):
	// unlockCalled: when an Unlock of it (or of its group) was first
	// called: from then on its release may let another owner in.
	unlockCalled time.Time
	// asked: when its acquisition was asked for (before the call; zero if
	// not known): its grant left no earlier. grantLease: the lease asked
	// for then (lease moves with Extend).
	asked      time.Time
	grantLease time.Duration
	// leased: acquired with LeaseTime, not renewed by the watchdog.
	leased bool
	// extendedTo: the validity the latest confirmed Extend gave it, as
	// counted from before its call.
	extendedTo time.Time
	// validLive: the latest Held.ValidUntil read while it lived.
	validLive time.Time
	// renews: its runtime's renewal calls (nil if its runtime had gone).
	renews *renewals
	// exclusionDone: its validity was compared with every conflicting
	// grant after it, once it had ended.
	exclusionDone bool
	// flagged: the exact checks flagged it already (SIM_KEEP_GOING).
	flagged bool
	// shape: the issue 31 defect whose shape the scenario that took it
	// drives (shapeOf).
	shape int
}

// granted is when h was granted: its fencing token is the Redis server's
// clock in µs at the grant (scripts/reentrant.lua, next_token), and that
// server runs on this machine, so this is the grant's moment on our clock.
func (h *hold) granted() time.Time { return time.UnixMicro(h.h.Token()) }

func (h *hold) live() bool { return h.doneSeen.IsZero() }

// event is one line of a name's history.
type event struct {
	t      time.Time
	worker int
	what   string
}

// nameState is the model of one lock name.
type nameState struct {
	name string
	kind int
	// scenario: kept for scenarios (scenario_test.go), which take it in
	// turn (busy); the random workload leaves it alone.
	scenario bool
	busy     atomic.Bool
	// spared: drawn faults spare its calls (faults.spares).
	spared atomic.Bool
	// shape: the issue 31 defect whose shape the scenario running on it
	// drives (shapeOf), 0 if none (m.mu).
	shape int
	// holds the model believes may be held (Done not seen yet).
	holds map[uint64]*hold
	// breaks: force-unlocks and DELs by another client (they end holds
	// without their owners, so another owner may get in while the victim's
	// Done has not closed yet: the watchdog notices within a lease).
	breaks []interval
	// lastFault: when a fault last touched a call on this name.
	lastFault time.Time
	// deletes: DELs by another client that Redis ran, from when each was
	// sent to when it returned (the last 16).
	deletes []interval
	hist    []event // ring
	histAt  int
	// inFlight ops per field (owner); anyAcquire: acquisitions in flight
	// whose owner is not known yet.
	inFlight map[string]int
	epoch    map[string]uint64
	taint    map[string]time.Time
	// reacquiring: per owner, acquisitions of it in flight; unsettled:
	// until when one that failed may still start a fresh hold of it (its
	// run's outcome being settled). After a DEL, the watchdog renews the
	// owner's Helds on such a fresh hold until the run is settled
	// (docs/guarantees.md, "A lost hold is given back").
	reacquiring map[string]int
	unsettled   map[string]time.Time
	// mismatchSince: per field, since when Redis's count differs from the
	// model's at every quiet look.
	mismatchSince map[string]time.Time
	// restarts: the model's, shared (for known2).
	restarts []interval
	// free: sweeps' samples of whether the name's key was absent.
	free []sample
	// ownerUnlocks: Unlocks in flight per owner; concurrentUnlock: when
	// an Unlock of the owner started while another was in flight.
	ownerUnlocks     map[string]int
	concurrentUnlock map[string]time.Time
	// unlockFailed: an Unlock of some hold of the field failed (Redis or
	// ctx) while the field may have had other holds (defect 3's shape).
	unlockFailed map[string]bool
	// rwReleased: per owner, when it last released a hold of this
	// read-write name: a read hold's validity then follows the read-hold
	// keys left, and may move back (docs/guarantees.md).
	rwReleased map[string]time.Time
	// shared: per WithOwner id, when the with-owner-pair op last tried
	// it through two runtimes at once (shape W, shapeOf).
	shared map[string]time.Time
	// prim: the history of a primitive's name (prim_test.go), not a lock.
	prim bool
}

type interval struct{ from, to time.Time }

type sample struct {
	t    time.Time
	free bool
}

// histLen is how many events of a name its ring keeps (more when every
// call is traced: simTrace).
var histLen = map[bool]int{false: 160, true: 800}[simTrace]

// historyLines is how many of its owners' events a violation's history
// shows (SIM_HISTORY, default 30; the ring keeps histLen).
var historyLines = func() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_HISTORY")); err == nil && n > 0 {
		return min(n, histLen)
	}
	return 30
}()

func (n *nameState) record(worker int, format string, args ...any) {
	e := event{t: time.Now(), worker: worker, what: fmt.Sprintf(format, args...)}
	if len(n.hist) < histLen {
		n.hist = append(n.hist, e)
		return
	}
	n.hist[n.histAt] = e
	n.histAt = (n.histAt + 1) % histLen
}

// history is the shortened history of the name for a violation: the
// events of owners (faults, breaks, restarts and closes always), the last
// 40 of them.
func (n *nameState) history(start time.Time, owners ...string) string {
	evs := append(append([]event(nil), n.hist[n.histAt:]...), n.hist[:n.histAt]...)
	// The owners' events (the last 30), and around them the faults,
	// breaks and closes of the name (the last 12).
	var mine, around []int
	for i, e := range evs {
		match := len(owners) == 0
		for _, o := range owners {
			match = match || strings.Contains(e.what, short(strings.TrimSuffix(o, ":write")))
		}
		switch {
		case match || simTrace:
			mine = append(mine, i)
		case e.worker < 0 && !strings.HasPrefix(e.what, "Done of") || strings.HasPrefix(e.what, "DEL") || strings.HasPrefix(e.what, "force-unlock"):
			around = append(around, i)
		}
	}
	if !simTrace {
		mine = mine[max(len(mine)-historyLines, 0):]
	}
	around = around[max(len(around)-12, 0):]
	var keep []event
	for i, j := 0, 0; i < len(mine) || j < len(around); {
		if j >= len(around) || i < len(mine) && mine[i] < around[j] {
			keep = append(keep, evs[mine[i]])
			i++
		} else {
			keep = append(keep, evs[around[j]])
			j++
		}
	}
	var b strings.Builder
	if len(keep) < len(evs) {
		fmt.Fprintf(&b, "    (%d of the last %d events: those of the owners above, faults, breaks, closes)\n", len(keep), len(evs))
	}
	for _, e := range keep {
		who := "-"
		if e.worker >= 0 {
			who = "w" + strconv.Itoa(e.worker)
		}
		fmt.Fprintf(&b, "    %9.3fs %-4s %s\n", e.t.Sub(start).Seconds(), who, e.what)
	}
	return b.String()
}

// violation is a broken invariant: which, where, who, and the history.
type violation struct {
	invariant string
	name      string
	owners    []string
	detail    string
	at        time.Duration
	history   string
}

func (v *violation) String() string {
	return fmt.Sprintf("VIOLATION %s after %.1fs on %q (owners %s): %s\n  history of %q (newest last):\n%s",
		v.invariant, v.at.Seconds(), v.name, strings.Join(v.owners, ", "), v.detail, v.name, v.history)
}

// model is what the workload knows: every hold it got back, every request
// in flight, the faults that hit each name.
type model struct {
	w  *world
	mu sync.Mutex
	// lastFault: when a fault last struck every name at once (a killed
	// connection, a pause, a restart).
	lastFault time.Time
	names     map[string]*nameState // fixed after setup
	// sparing: how many names are spared now (a fast path for the hook).
	sparing atomic.Int32
	// sparingDials: scenarios running now whose check a refused dial
	// would void (it fails an attempt for good, and no name can be told
	// on a dial): while any runs, the dial hook refuses nothing.
	sparingDials atomic.Int32
	list         []*nameState
	seq          uint64
	byTok        map[tokKey]*hold
	// restarts: intervals in which Redis restarted without persistence.
	restarts []interval
	// stalls: CLIENT PAUSE WRITE and restarts, each until a lease after.
	stalls []interval
	// pauses: when this process stood still (watchPauses): its runtimes'
	// timers and calls with it, as a paused holder process's would.
	pauses []interval
	// inFlight requests: id -> (what, started, bound)
	reqs   map[uint64]*request
	reqSeq uint64
	first  *violation
	// unlisted: entries of rt.Held() no caller got back, since when.
	unlisted map[tokKey]time.Time
	// knownSeen counts violations shaped like a known defect (SIM_KNOWN).
	knownSeen  map[int]int
	knownFirst map[int]*violation
	// SIM_KEEP_GOING: violations by invariant, the first of each.
	byInvariant map[string]int
	firstOf     map[string]*violation
	order       []string

	// The primitives (prim_test.go), fixed after setup, and how many times
	// Redis restarted without persistence (which wipes them).
	prims      map[string]*primState
	primList   []*primState
	restartSeq int
	// rounds: the MultiLock and RedLock rounds that failed, to judge
	// (checkRounds), and their owners (the generic checks leave them be).
	rounds       []*failedRound
	failedOwners map[string]bool
	// closing: when each runtime (slot, generation) closed mid-run began
	// closing.
	closing map[[2]int]time.Time
	// pending: a first violation of a check other than mutual exclusion,
	// reported once exclusionGrace is over unless a mutual-exclusion
	// violation comes first (failKnown).
	pending      *violation
	pendingUntil time.Time
	// ended: the run is over (settlePending); a violation found after,
	// in the drain or Close, has nothing left to wait for.
	ended bool
}

type tokKey struct {
	name, owner string
	token       int64
}

type request struct {
	what   string
	name   string
	worker int
	start  time.Time
	bound  time.Duration
}

func newModel(w *world) *model {
	return &model{w: w, names: map[string]*nameState{}, byTok: map[tokKey]*hold{}, reqs: map[uint64]*request{}, unlisted: map[tokKey]time.Time{}, knownSeen: map[int]int{}, knownFirst: map[int]*violation{}, byInvariant: map[string]int{}, firstOf: map[string]*violation{},
		closing: map[[2]int]time.Time{}}
}

func (m *model) addName(name string, kind int, scenario bool) {
	n := newNameState(name, kind, scenario)
	m.names[name] = n
	m.list = append(m.list, n)
}

func newNameState(name string, kind int, scenario bool) *nameState {
	return &nameState{name: name, kind: kind, scenario: scenario, holds: map[uint64]*hold{}, inFlight: map[string]int{}, epoch: map[string]uint64{}, reacquiring: map[string]int{}, unsettled: map[string]time.Time{},
		taint: map[string]time.Time{}, mismatchSince: map[string]time.Time{}, unlockFailed: map[string]bool{}, ownerUnlocks: map[string]int{}, concurrentUnlock: map[string]time.Time{}, rwReleased: map[string]time.Time{}, shared: map[string]time.Time{}}
}

// historyOf is the history of name: a lock's, a primitive's, or nil.
func (m *model) historyOf(name string) *nameState {
	if n := m.names[name]; n != nil {
		return n
	}
	if p := m.prims[name]; p != nil {
		return p.hist
	}
	return nil
}

// fail records the first violation and stops the run.
func (m *model) fail(invariant string, n *nameState, owners []string, format string, args ...any) {
	m.failKnown(0, invariant, n, owners, format, args...)
}

// failKnown is fail for a violation whose shape is that of issue 23's
// defect (0: none). With SIM_KNOWN naming it, it is counted (its first
// instance kept) and the run goes on, so that a run on a library with
// that defect can look for others.
func (m *model) failKnown(defect int, invariant string, n *nameState, owners []string, format string, args ...any) {
	if m.first != nil {
		return
	}
	if defect == 0 && n != nil && !n.prim {
		defect = max(m.sharedShape(n, owners), m.lateAcquireShape(n))
	}
	if defect > 0 && m.w.cfg.known[defect] {
		m.knownSeen[defect]++
		if m.knownSeen[defect] == 1 {
			v := &violation{invariant: invariant, owners: owners, detail: fmt.Sprintf(format, args...), at: time.Since(m.w.start)}
			if n != nil {
				v.name, v.history = n.name, n.history(m.w.start, owners...)
			}
			m.knownFirst[defect] = v
		}
		return
	}
	v := &violation{invariant: invariant, owners: owners, detail: fmt.Sprintf(format, args...), at: time.Since(m.w.start)}
	if n != nil {
		v.name = n.name
		v.history = n.history(m.w.start, owners...)
	}
	if !m.w.cfg.keepGoing && !m.ended && !strings.HasPrefix(invariant, "mutual exclusion") {
		// A lost hold, a count that does not match, ... is often where two
		// holders begin: the run goes on for exclusionGrace, and a
		// violation of mutual exclusion found meanwhile is reported
		// instead, being what a lock must never do.
		if m.pending == nil {
			m.pending, m.pendingUntil = v, time.Now().Add(m.exclusionGrace())
		}
		return
	}
	if m.w.cfg.keepGoing {
		// Count every violation by invariant, keep the first of each, and
		// say in a line where the next few were.
		if m.byInvariant[invariant]++; m.byInvariant[invariant] == 1 {
			m.firstOf[invariant] = v
			m.order = append(m.order, invariant)
		} else if m.byInvariant[invariant] <= 3 {
			m.firstOf[invariant].history += fmt.Sprintf("  then:\n%v", v)
		}
		return
	}
	m.first = v
	m.w.stop()
}

// exclusionGrace is how long a first violation of another check waits for
// one of mutual exclusion: a hold's lease and the tolerance, twice.
func (m *model) exclusionGrace() time.Duration {
	return 2 * (m.w.cfg.maxLease() + m.w.cfg.tol)
}

// promotePending makes a pending violation the run's first once its grace
// is over (m.mu held; now: at the run's end).
func (m *model) promotePending() {
	m.promotePendingAt(time.Now())
}

func (m *model) promotePendingAt(now time.Time) {
	if m.pending != nil && m.first == nil && !now.Before(m.pendingUntil) {
		m.first = m.pending
		m.w.stop()
	}
}

// settlePending makes a pending violation the run's first, its grace over
// or not (the run has ended).
func (m *model) settlePending() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = true
	if m.pending != nil && m.first == nil {
		m.first = m.pending
	}
}

// begin registers a request in flight that must be answered within bound.
func (m *model) begin(worker int, what, name string, bound time.Duration) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqSeq++
	m.reqs[m.reqSeq] = &request{what: what, name: name, worker: worker, start: time.Now(), bound: bound}
	return m.reqSeq
}

func (m *model) end(id uint64) {
	m.mu.Lock()
	delete(m.reqs, id)
	m.mu.Unlock()
}

// opStart / opEnd bracket an operation of a known owner (field) on a name.
func (m *model) opStart(n *nameState, field string) {
	if field == "" {
		return
	}
	m.mu.Lock()
	n.inFlight[field]++
	n.epoch[field]++
	m.mu.Unlock()
}

func (m *model) opEnd(n *nameState, field string) {
	if field == "" {
		return
	}
	m.mu.Lock()
	if n.inFlight[field]--; n.inFlight[field] <= 0 {
		delete(n.inFlight, field)
	}
	n.epoch[field]++
	m.mu.Unlock()
}

// addHold registers a Held the workload got back; asked: when its
// acquisition was asked for (zero if not known).
func (m *model) addHold(n *nameState, worker, slot, gen int, h *actorlock.Held, write, group bool, asked time.Time) *hold {
	field := h.Owner()
	if write {
		field += ":write"
	}
	var renews *renewals
	if s := m.w.slots[slot]; s != nil {
		s.mu.RLock()
		if s.gen == gen {
			renews = &s.f.renewals
		}
		s.mu.RUnlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	hd := &hold{id: m.seq, h: h, name: n.name, owner: h.Owner(), field: field, write: write, slot: slot, gen: gen, lease: h.Lease(), since: time.Now(), group: group,
		asked: asked, grantLease: h.Lease(), leased: h.Lease() != m.w.cfg.watchdog, validLive: h.ValidUntil(), renews: renews, shape: n.shape}
	n.holds[hd.id] = hd
	// The exact mutual-exclusion check, at the earliest moment the model
	// knows of the grant.
	m.checkExclusion(n, hd)
	m.byTok[tokKey{n.name, h.Owner(), h.Token()}] = hd
	what := "acquired"
	if write {
		what = "acquired write"
	} else if n.kind == kRW {
		what = "acquired read"
	}
	if group {
		what += " (group member)"
	}
	n.record(worker, "%s by %s token %d lease %v", what, short(hd.owner), h.Token(), hd.lease)
	return hd
}

func short(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i > 8 {
		return owner[:8] + "…" + owner[i:]
	}
	return owner
}

// writes reports whether owner has a write hold of n the model knows of
// (its Done may have closed since: then the library may refuse or grant).
func (m *model) writes(n *nameState, owner string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range n.holds {
		if h.owner == owner && h.write && h.released.IsZero() {
			return true
		}
	}
	return false
}

// brokenSince reports whether a force-unlock, DEL or restart may have hit
// name n after t.
func (m *model) brokenSince(n *nameState, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range append(append([]interval(nil), n.breaks...), m.restarts...) {
		if b.to.After(t) {
			return true
		}
	}
	return false
}

// breakName records a force-unlock or DEL of name over [from, to].
func (m *model) breakName(n *nameState, from, to time.Time) {
	m.keepLast(&n.breaks, interval{from, to})
}

// deleted records a DEL of n that Redis ran between from and to.
func (m *model) deleted(n *nameState, from, to time.Time) {
	m.keepLast(&n.deletes, interval{from, to})
}

// keepLast appends iv to list, keeping the last 16.
func (m *model) keepLast(list *[]interval, iv interval) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *list = append(*list, iv); len(*list) > 16 {
		*list = (*list)[len(*list)-16:]
	}
}

// unsafeDuring reports whether a fault docs/guarantees.md calls unsafe hit
// name n between from and to: a DEL or force-unlock by another client, a
// restart without persistence (there is no failover here, and no holder
// process is paused: the runtimes run in this one). Such a fault ends holds
// without their owners, who learn of it at their next renewal.
func (m *model) unsafeDuring(n *nameState, from, to time.Time) bool {
	for _, iv := range append(append([]interval(nil), n.breaks...), m.restarts...) {
		if iv.from.Before(to) && from.Before(iv.to) {
			return true
		}
	}
	return false
}

// conflict: two holds of name n that must not be live at once (readers of
// a read-write lock share it; an owner's holds never conflict).
func conflict(n *nameState, a, b *hold) bool {
	return a.owner != b.owner && (n.kind != kRW || a.write || b.write)
}

// errKind names an error for the history.
func errKind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, actorlock.ErrUpgrade):
		return "ErrUpgrade"
	case errors.Is(err, actorlock.ErrNotAcquired):
		return "ErrNotAcquired"
	case errors.Is(err, actorlock.ErrLost):
		return "ErrLost"
	case errors.Is(err, actorlock.ErrUnlocked):
		return "ErrUnlocked"
	case errors.Is(err, actorlock.ErrClosed):
		return "ErrClosed"
	case errors.Is(err, actorlock.ErrInvalidArgument):
		return "ErrInvalidArgument"
	}
	s := err.Error()
	if len(s) > 90 {
		s = s[:90] + "…"
	}
	return s
}

func sortedOwners(hs ...*hold) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.field)
	}
	sort.Strings(out)
	return out
}

// pausedDuring reports whether this process stood still for at least min
// between from and to (m.mu held).
func (m *model) pausedDuring(from, to time.Time, min time.Duration) bool {
	for _, iv := range m.pauses {
		if iv.from.Before(to) && from.Before(iv.to) && iv.to.Sub(iv.from) >= min {
			return true
		}
	}
	return false
}
