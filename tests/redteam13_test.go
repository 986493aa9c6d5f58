package tests

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The thirteenth red-team pass, over f63959e (outlived, hold.uncut and
// hold.deadline; ReleaseRequest.fencing_token; admit's replay).

// keeperParent spawns a keeper as its child and hands what the keeper
// tells it (LockLost, a refused RenewResponse) to a channel, stamped.
type told struct {
	at  time.Time
	msg proto.Message
}

func spawnKeeperParent(t *testing.T, sys *actor.ActorSystem) (keeper *actor.PID, out chan told) {
	t.Helper()
	out = make(chan told, 16)
	ready := make(chan *actor.PID, 1)
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ready <- ctx.Spawn(actorkit.KeeperProps())
		case *messages.LockLost:
			out <- told{time.Now(), m}
		case *messages.RenewResponse:
			out <- told{time.Now(), m}
		}
	}))
	t.Cleanup(func() { sys.Root.Stop(parent) })
	return await(t, ready, 2*time.Second, "the keeper"), out
}

// RT13-1. A remote owner writes and reads (a downgrade by message, the read
// with a short lease_ms) and releases its write; the release is on its way
// (held back) when the read's key runs out, so outlived ends the read. The
// owner's keeper of that read goes on renewing it: renewMessage ignores the
// kind, knows() counts the ended read, and lease_ms is the hold's
// deadline(), the write's uncut validity, so every renewal of the ended
// read is answered Renewed with a positive lease. Once the write release
// runs, the hold is given back and another writer gets the lock while the
// keeper, whose last renewal was confirmed, still counts the read valid:
// an owner whose LockLost from the runtime did not reach it (a cut network,
// or one marked unreachable, which tellLost skips; here the keeper's parent
// stands for it) keeps a read it lost, against "The keeper's own deadline"
// (docs/actors.md) and "Loss is reported" (docs/guarantees.md: a remote
// owner's keeper ... before the runtime can let another owner in).
func TestRedTeam13KeeperOfAnOutlivedReadIsRenewed(t *testing.T) {
	t.Parallel()
	const watchdog, readLease, delay = 3 * time.Second, 300 * time.Millisecond, 1200 * time.Millisecond
	px, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "rt13-keeper-of-an-outlived-read"

	p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "w", Name: name, Kind: messages.Kind_KIND_WRITE})
	w := receive[*messages.AcquireResponse](t, p, 3*time.Second)
	require.True(t, w.Acquired)
	token := w.OwnerToken
	owner := ownerOf(t, rt, token)
	asked := time.Now()
	p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "r", Name: name, Kind: messages.Kind_KIND_READ, OwnerToken: token, LeaseMs: readLease.Milliseconds()})
	r := receive[*messages.AcquireResponse](t, p, 3*time.Second)
	require.True(t, r.Acquired)

	late := px.on(1, holdCommand, delay, func(c respCommand) bool { return isRelease(c, name, owner+":write", false) })
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "rw", Name: name, Kind: messages.Kind_KIND_WRITE, OwnerToken: token, FencingToken: w.FencingToken})
	await(t, late.hits, 3*time.Second, "the write's release")

	// The read's keeper starts once the read's key has run out (the
	// owner's AcquireResponse came late), learning the lease from the
	// runtime (Keep.Lease 0).
	time.Sleep(time.Until(asked.Add(readLease + 150*time.Millisecond)))
	p.send(sys, actorkit.PID(rt), &messages.RenewRequest{RequestId: "renew", Name: name, Kind: messages.Kind_KIND_READ, OwnerToken: token})
	renew := receive[*messages.RenewResponse](t, p, 3*time.Second)
	t.Logf("at +%v a renewal of the read, whose key ran out at +%v: %v", time.Since(asked), readLease, renew)
	keeper, out := spawnKeeperParent(t, sys)
	sys.Root.Send(keeper, &actorkit.Keep{Runtime: actorkit.PID(rt), Name: name, Kind: messages.Kind_KIND_READ,
		OwnerToken: token, Since: asked})

	// Another owner waits for the write side; it gets it once the write's
	// release has run and the owner's read is given back.
	other := make(chan time.Time, 1)
	go func() {
		h, err := rt.ReadWriteLock(name).WriteLocker().Acquire(ctx)
		if err == nil {
			other <- time.Now()
			_ = h.Unlock(ctx)
		}
	}()
	granted := await(t, other, 6*time.Second, "the other writer")
	t.Logf("the read asked at 0, its key ran out at ~+%v; the write's release reached Redis at ~+%v; another writer granted at +%v", readLease, delay, granted.Sub(asked))
	select {
	case m := <-out:
		t.Logf("keeper told at +%v: %v", m.at.Sub(asked), m.msg)
	default:
		t.Logf("the read's keeper told nothing; it counted the read valid when another writer got the lock")
	}
	require.False(t, renew.Renewed && renew.LeaseMs > 0,
		"a renewal of the read, ended (its key gone, LockLost sent to the owner actor), was answered Renewed for %d ms; another writer got the lock %v after that answer, while a keeper confirmed by it counts the read valid",
		renew.LeaseMs, granted.Sub(asked.Add(readLease+150*time.Millisecond)))
	_ = direct
}
