package actors

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// Unit tests of the lock actor's state machine without Redis: a scripted
// family hands every script call to the test, which answers it when it
// chooses, so outcomes and messages arrive in the order a test sets up.
// The real-server tests in ./tests cover the same behaviour against Redis.

// fakeCall is one script call the lock actor made: an attempt or a
// release (undo) with its arguments; the test answers on out.
type fakeCall struct {
	acquire *attemptArgs
	release *releaseArgs
	out     chan fakeOutcome
}

type fakeOutcome struct {
	grant  scripts.Grant
	unlock scripts.Unlock
	err    error
}

// scriptedFamily is the reentrant lock's policy with scripts the test runs.
type scriptedFamily struct {
	reentrant
	calls chan *fakeCall
}

func (f *scriptedFamily) call(ctx context.Context, c *fakeCall) (fakeOutcome, error) {
	c.out = make(chan fakeOutcome, 1)
	select {
	case f.calls <- c:
	case <-ctx.Done():
		return fakeOutcome{}, ctx.Err()
	}
	select {
	case o := <-c.out:
		return o, o.err
	case <-ctx.Done():
		return fakeOutcome{}, ctx.Err()
	}
}

func (f *scriptedFamily) acquire(ctx context.Context, _ scripts.Client, args attemptArgs, _ scripts.Guard) (scripts.Grant, error) {
	o, err := f.call(ctx, &fakeCall{acquire: &args})
	return o.grant, err
}

func (f *scriptedFamily) release(ctx context.Context, _ scripts.Client, args releaseArgs, _ scripts.Guard) (scripts.Unlock, scripts.Grant, error) {
	o, err := f.call(ctx, &fakeCall{release: &args})
	return o.unlock, o.grant, err
}

type machine struct {
	t     *testing.T
	env   *runtimeEnv
	sys   *actor.ActorSystem
	pid   *actor.PID
	calls chan *fakeCall
}

// holderTTL is what a refused attempt reports: long enough that a retry
// within a few seconds can only come from a wake-up.
const holderTTL = time.Minute

func newMachine(t *testing.T) *machine {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	sink := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})) // router and watchdog
	// No Redis behind the scripted family: what the actor sends Redis
	// directly (deleting spent guards when it stops) finds nobody there.
	nowhere := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = nowhere.Close() })
	env := newEnv(Config{
		System: sys, Redis: nowhere, RuntimeID: "rt", Watchdog: 30 * time.Second, IdleAfter: time.Hour,
		CallTimeout: 10 * time.Second, MaxHandoffs: 10,
	})
	env.router, env.renewal = sink, sink
	calls := make(chan *fakeCall, 8)
	a := newLockActor(env, LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"})
	a.fam = &scriptedFamily{calls: calls}
	pid := sys.Root.Spawn(props(func() actor.Actor { return a }))
	t.Cleanup(func() {
		_ = sys.Root.PoisonFuture(pid).Wait()
		env.cancelCall()
		env.calls.Wait()
		sys.Shutdown()
	})
	return &machine{t: t, env: env, sys: sys, pid: pid, calls: calls}
}

// acquire sends an Acquire of owner that waits without a deadline.
func (m *machine) acquire(id uint64, owner string) chan AcquireResult {
	reply := make(chan AcquireResult, 2) // room for a second answer, which would be a bug
	m.sys.Root.Send(m.pid, &Acquire{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, Owner: owner, ID: id, Reply: reply})
	return reply
}

// next is the next script call, which must come within wait.
func (m *machine) next(wait time.Duration) *fakeCall {
	m.t.Helper()
	select {
	case c := <-m.calls:
		return c
	case <-time.After(wait):
		require.FailNow(m.t, "no script call", "within %v", wait)
		return nil
	}
}

// none checks that no script call comes within wait.
func (m *machine) none(wait time.Duration, why string) {
	m.t.Helper()
	select {
	case c := <-m.calls:
		require.Failf(m.t, "unexpected script call", "%s: acquire %+v release %+v", why, c.acquire, c.release)
	case <-time.After(wait):
	}
}

func one(t *testing.T, reply chan AcquireResult) AcquireResult {
	t.Helper()
	select {
	case res := <-reply:
		return res
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no answer")
		return AcquireResult{}
	}
}

// An unlock message heard while the head's attempt is in flight may tell of
// an unlock that attempt ran before: the head must try again at once, not
// wait out the holder's TTL for a free lock.
func TestLockMachineWakeDuringAttempt(t *testing.T) {
	m := newMachine(t)
	reply := m.acquire(1, "o1")
	c := m.next(5 * time.Second)
	require.NotNil(t, c.acquire)
	assert.Equal(t, "o1", c.acquire.Owner)

	// Control: a refusal with no message meanwhile waits for a wake-up.
	c.out <- fakeOutcome{grant: scripts.Grant{HolderTTL: holderTTL}}
	m.none(time.Second, "refused and nothing heard: the head waits")

	// The unlock message arrives while the next attempt is in flight.
	m.sys.Root.Send(m.pid, &published{Topic: topic(scripts.LockChannel("n"))})
	c = m.next(5 * time.Second) // woken by the message
	require.NotNil(t, c.acquire)
	// Sent before the outcome is, so the actor handles it first.
	m.sys.Root.Send(m.pid, &published{Topic: topic(scripts.LockChannel("n"))})
	c.out <- fakeOutcome{grant: scripts.Grant{HolderTTL: holderTTL}}

	c = m.next(5 * time.Second) // the message heard in flight is not lost
	require.NotNil(t, c.acquire, "another attempt follows the refusal")
	assert.Equal(t, "o1", c.acquire.Owner)
	c.out <- fakeOutcome{grant: scripts.Grant{Acquired: true, HoldCount: 1, Token: 7}}
	res := one(t, reply)
	require.NoError(t, res.Err)
	assert.Equal(t, int64(7), res.Token)
	assert.Empty(t, reply, "one answer")
}

// A grant that comes back after its caller cancelled is undone exactly
// once (only while the owner's count is the granted one), and the caller
// gets exactly one answer: ErrCanceled.
func TestLockMachineGrantAfterCancel(t *testing.T) {
	m := newMachine(t)
	reply := m.acquire(1, "o1")
	c := m.next(5 * time.Second)
	require.NotNil(t, c.acquire)

	m.sys.Root.Send(m.pid, &Cancel{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, ID: 1})
	res := one(t, reply)
	require.ErrorIs(t, res.Err, ErrCanceled)

	c.out <- fakeOutcome{grant: scripts.Grant{Acquired: true, HoldCount: 1, Token: 3}}
	undo := m.next(5 * time.Second)
	require.NotNil(t, undo.release, "the late grant is given back")
	assert.Equal(t, "o1", undo.release.Owner)
	assert.Equal(t, int64(1), undo.release.IfCount, "only while the count is the granted one")
	assert.Equal(t, int64(1), undo.release.Holds)
	undo.out <- fakeOutcome{unlock: scripts.Unlock{State: scripts.Released}}
	m.none(time.Second, "undone once")
	assert.Empty(t, reply, "one answer")

	// Nothing of o1 is held here: another owner's single attempt goes to
	// Redis instead of being refused locally.
	try := make(chan AcquireResult, 2)
	m.sys.Root.Send(m.pid, &Acquire{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, Owner: "o2", ID: 2, TryOnce: true, Reply: try})
	c = m.next(5 * time.Second)
	require.NotNil(t, c.acquire)
	assert.Equal(t, "o2", c.acquire.Owner)
	c.out <- fakeOutcome{grant: scripts.Grant{HolderTTL: holderTTL}}
	assert.ErrorIs(t, one(t, try).Err, ErrNotAcquired)
}

// A cancel that comes after the grant was answered changes nothing: the
// caller has exactly one answer, the grant, and nothing is undone (giving
// back a grant the caller received is the caller's side, Held.Unlock).
func TestLockMachineCancelAfterGrant(t *testing.T) {
	m := newMachine(t)
	reply := m.acquire(1, "o1")
	c := m.next(5 * time.Second)
	c.out <- fakeOutcome{grant: scripts.Grant{Acquired: true, HoldCount: 1, Token: 4}}
	res := one(t, reply)
	require.NoError(t, res.Err)
	assert.Equal(t, int64(4), res.Token)

	m.sys.Root.Send(m.pid, &Cancel{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, ID: 1})
	m.none(time.Second, "nothing to undo")
	assert.Empty(t, reply, "one answer")

	// The hold is there: the release runs with the grant's owner.
	done := make(chan ReleaseResult, 1)
	m.sys.Root.Send(m.pid, &Release{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, Owner: "o1", ID: 1, RequestID: "r1", Reply: done})
	rel := m.next(5 * time.Second)
	require.NotNil(t, rel.release)
	assert.Equal(t, "o1", rel.release.Owner)
	assert.Equal(t, int64(-1), rel.release.IfCount, "an unconditional release")
	rel.out <- fakeOutcome{unlock: scripts.Unlock{State: scripts.Released}}
	select {
	case r := <-done:
		assert.NoError(t, r.Err)
		assert.True(t, r.Released)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no release answer")
	}
}

// A release that hands the lock to the local head in the same script,
// while that head cancels: the releaser's unlock succeeds, the head gets
// exactly one answer (ErrCanceled), and the grant the script made for it
// is undone once.
func TestLockMachineHandoffAfterCancel(t *testing.T) {
	m := newMachine(t)
	held := m.acquire(1, "o1")
	c := m.next(5 * time.Second)
	c.out <- fakeOutcome{grant: scripts.Grant{Acquired: true, HoldCount: 1, Token: 1}}
	require.NoError(t, one(t, held).Err)

	waiter := m.acquire(2, "o2")
	m.none(time.Second, "a local holder rules the waiter out: no attempt")

	done := make(chan ReleaseResult, 1)
	m.sys.Root.Send(m.pid, &Release{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, Owner: "o1", ID: 1, RequestID: "r1", Reply: done})
	rel := m.next(5 * time.Second)
	require.NotNil(t, rel.release)
	assert.Equal(t, "o1", rel.release.Owner)
	assert.Equal(t, "o2", rel.release.next.Owner, "the release hands the lock to the local head")

	m.sys.Root.Send(m.pid, &Cancel{Key: LockKey{Kind: messages.Kind_KIND_LOCK, Name: "n"}, ID: 2})
	assert.ErrorIs(t, one(t, waiter).Err, ErrCanceled)
	rel.out <- fakeOutcome{unlock: scripts.Unlock{State: scripts.Released}, grant: scripts.Grant{Acquired: true, HoldCount: 1, Token: 2}}
	select {
	case r := <-done:
		require.NoError(t, r.Err)
		assert.True(t, r.Released)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no release answer")
	}

	undo := m.next(5 * time.Second)
	require.NotNil(t, undo.release, "the hand-off's grant is given back")
	assert.Equal(t, "o2", undo.release.Owner)
	assert.Equal(t, int64(1), undo.release.IfCount)
	assert.Empty(t, undo.release.next.Owner)
	undo.out <- fakeOutcome{unlock: scripts.Unlock{State: scripts.Released}}
	m.none(time.Second, "undone once")
	assert.Empty(t, waiter, "one answer")
}

// Give-backs of one owner's side run newest first: each expects the count
// the newer ones leave (giveback.go). Refused for a while (BUSY, a paused
// Redis), each waits on a timer of its own to run again, and on a loaded
// machine the older one's timer may fire first: it met the newer one's
// hold still counted, was refused by count, and was dropped, leaving the
// hold it gave back in Redis for its whole lease (seen in CI as
// TestRedTeam16LostReadUnderAnUnknownReentryStaysForItsLease). The older
// one now waits while a newer one is still to run or to be settled,
// wherever that waits.
func TestLockMachineOlderGiveBackWaitsForTheNewer(t *testing.T) {
	a := newMachine(t).unspawned()
	older := a.giveBack("o", false, 1, 1, 7, time.Minute)
	newer := a.giveBack("o", false, 1, 2, 0, time.Minute)
	other := a.giveBack("p", false, 1, 1, 0, time.Minute)
	a.steps = nil
	for _, s := range []step{older, newer, other} {
		a.runLater(time.Hour, s) // refused once, each waits to run again
	}
	// The older one's timer fired first.
	delete(a.later, step(older))
	require.Nil(t, older.start(a, nil), "the older give-back runs while the newer one waits to run again")
	require.NotNil(t, other.start(a, nil), "another owner's give-back is not held up")
	delete(a.later, step(newer))
	a.steps = []step{newer}
	require.Nil(t, older.start(a, nil), "nor while the newer one is queued")
	// Its run's outcome unknown, the newer one is being settled.
	a.steps = []step{&settleStep{done: &stepDone{step: newer}}}
	require.Nil(t, older.start(a, nil), "nor while the newer one is being settled")
	a.steps = nil
	delete(a.later, step(older))
	require.NotNil(t, older.start(a, nil), "once the newer one ran, the older one runs")
}

// When the actor stops (Close, or a failure) with give-backs still to run,
// they run best effort as they would have: newest first, one after the
// other. Run by start, an older one waited for the newer one (undoBefore)
// on a timer of a stopped actor, and was dropped.
func TestLockMachineStopRunsGiveBacksNewestFirst(t *testing.T) {
	m := newMachine(t)
	a := m.unspawned()
	a.fam = &scriptedFamily{calls: m.calls}
	a.giveBack("o", false, 1, 1, 7, time.Minute)
	a.giveBack("o", false, 1, 2, 0, time.Minute)
	a.steps = []step{a.steps[1], a.steps[0]} // the older one first: a retry's timer fired first
	a.stop(nil)
	for _, want := range []int64{2, 1} {
		c := m.next(5 * time.Second)
		require.NotNil(t, c.release)
		require.Equal(t, want, c.release.IfCount, "newest first")
		c.out <- fakeOutcome{unlock: scripts.Unlock{State: scripts.StillHeld}}
	}
}

// A write's give-back expects the fencing counter to read what the newest
// sight of it read: the counter does not go back, so one queued later
// hands its token to the older ones (giveBack). An older one waiting to be
// retried, parked or being settled missed it, and was refused once the
// newer ran: the hold it gave back stayed in Redis for its lease.
func TestLockMachineNewerGiveBackHandsItsTokenToARetryingOne(t *testing.T) {
	a := newMachine(t).unspawnedOf(messages.Kind_KIND_WRITE)
	retrying := a.giveBack("o", true, 1, 1, 7, time.Minute)
	settling := a.giveBack("o", true, 1, 1, 8, time.Minute)
	retrying.validTo, settling.validTo = time.Now().Add(time.Minute), time.Now().Add(time.Minute)
	a.steps = []step{&settleStep{done: &stepDone{step: settling}}}
	a.runLater(time.Hour, retrying)
	a.env.Clock.Observe(time.Now().UnixMicro(), time.Now(), time.Now())
	newer := time.Now().UnixMicro() // a grant that ran now, while their holds are valid
	a.giveBack("o", true, 1, 2, newer, time.Minute)
	require.EqualValues(t, newer, retrying.token, "a give-back waiting to be retried")
	require.EqualValues(t, newer, settling.token, "a give-back being settled")
}

// A reentrant or fair lock's give-backs check the mark of the holds they
// undo, which the holds' re-entries keep: a newer give-back's mark is
// either theirs already, or that of a fresh run of holds of the owner id
// (taken once theirs were gone, through another runtime or by a Redisson
// thread), which they must not touch (RT29-2, RT36-1). So they keep their
// own, whoever queues after them and whenever its grant ran.
func TestLockMachineExclusiveGiveBacksKeepTheirHoldsMark(t *testing.T) {
	for _, kind := range []messages.Kind{messages.Kind_KIND_LOCK, messages.Kind_KIND_FAIR} {
		a := newMachine(t).unspawnedOf(kind)
		a.env.Clock.Observe(time.Now().UnixMicro(), time.Now(), time.Now())
		for _, owner := range []string{"withowner", a.env.RuntimeID + ":1"} {
			older := a.giveBack(owner, false, 1, 1, 7, time.Minute)
			older.validTo = time.Now().Add(time.Minute)
			a.giveBack(owner, false, 1, 2, time.Now().UnixMicro(), time.Minute)
			a.giveBack(owner, false, 1, 3, 0, time.Minute) // a grant of unknown outcome
			require.EqualValues(t, 7, older.token, "%s: %s", kind, owner)
		}
	}
}

// A newer grant of a WithOwner id that ran after an older give-back's
// holds' validity (its token, the server's clock at the grant, says when)
// may be of a fresh hold of the id that another runtime took once they
// expired (RT29-2): its token is not the older one's, which would then
// release that hold. One that ran before re-entered them: left without its
// token, the older one is refused and strands them (RT30-1). An id the
// runtime made has no other holder.
func TestLockMachineNewerGiveBackKeepsItsTokenFromExpiredHolds(t *testing.T) {
	a := newMachine(t).unspawnedOf(messages.Kind_KIND_WRITE)
	a.env.Clock.Observe(time.Now().UnixMicro(), time.Now(), time.Now())
	older := func(owner string, validTo time.Time) *undoStep {
		u := a.giveBack(owner, true, 1, 1, time.Now().Add(-time.Minute).UnixMicro(), time.Minute)
		u.validTo = validTo
		return u
	}
	expired := older("e", time.Now().Add(-time.Millisecond))
	unknown := older("u", time.Time{})
	inTime := older("i", time.Now().Add(time.Minute))
	ranAfter := older("a", time.Now().Add(time.Minute))
	was := map[*undoStep]int64{expired: expired.token, unknown: unknown.token, ranAfter: ranAfter.token}
	now := time.Now().UnixMicro() // the newer grant ran now
	for _, o := range []string{"e", "u", "i"} {
		a.giveBack(o, true, 1, 2, now, time.Minute)
	}
	a.giveBack("a", true, 1, 2, time.Now().Add(time.Hour).UnixMicro(), time.Minute)
	require.Equal(t, was[expired], expired.token, "holds past their validity")
	require.Equal(t, was[unknown], unknown.token, "holds of unknown validity")
	require.Equal(t, now, inTime.token, "holds still valid when the newer grant ran (RT30-1)")
	require.Equal(t, was[ranAfter], ranAfter.token, "a newer grant that ran after their validity (RT29-2)")

	own := a.env.RuntimeID + ":1"
	ownOlder := a.giveBack(own, true, 1, 1, 7, time.Minute)
	a.giveBack(own, true, 1, 2, 9, time.Minute)
	require.EqualValues(t, 9, ownOlder.token, "an id of the runtime's own")
}

// A give-back out when a newer one was queued finds the newer one's hold
// still counted: refused by count, it runs again after the newer one
// instead of being dropped.
func TestLockMachineGiveBackRefusedByANewerOnesHoldRunsAgain(t *testing.T) {
	a := newMachine(t).unspawned()
	older := a.giveBack("o", false, 1, 1, 7, time.Minute)
	a.steps, a.inflight = nil, older
	a.giveBack("o", false, 1, 2, 9, time.Minute)
	a.inflight = nil
	older.unlock = scripts.Unlock{State: scripts.CountChanged}
	older.apply(a, nil, &stepDone{step: older})
	require.Contains(t, a.later, step(older), "it runs again")
	require.Equal(t, 2, a.settling["o"], "its owner's work is still unsettled")
}

// unspawned is a lock actor of the machine's environment that no mailbox
// runs: a test calls its methods directly. What its timers send goes to
// an actor that drops it.
func (m *machine) unspawned() *lockActor { return m.unspawnedOf(messages.Kind_KIND_LOCK) }

// unspawnedOf is unspawned for a lock of kind.
func (m *machine) unspawnedOf(kind messages.Kind) *lockActor {
	a := newLockActor(m.env, LockKey{Kind: kind, Name: "n"})
	a.self = m.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	return a
}
