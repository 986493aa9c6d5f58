package tests

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// Worker modes of the remote tests of the queue and semaphore waits, the
// runtime's internal actors and the keeper: a peer that waits, and a peer
// that sends what it should not.
func init() {
	workerModes["remote-waiter"] = workerRemoteWaiter
	workerModes["remote-forger"] = workerRemoteForger
	workerModes["remote-keeper"] = workerRemoteKeeper
}

// workerRemoteWaiter runs an actor that waits, without a deadline, for an
// item of queue QUEUE_NAME and a permit of semaphore SEM_NAME of the test's
// runtime. With RESEND=1 it asks again when a wait is answered without
// what it waited for (as a client should). It prints:
//
//	NODE <address>
//	WAITER <pid address> <pid id>
//	TAKE <request id> <taken> <code> <payload>
//	SEM <request id> <acquired> <code>
func workerRemoteWaiter(*actorlock.Runtime, redis.UniversalClient) int {
	sys, server, err := remoteNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "remote waiter:", err)
		return 1
	}
	say("NODE %s", sys.Address())
	queue, sem, resend := os.Getenv("QUEUE_NAME"), os.Getenv("SEM_NAME"), os.Getenv("RESEND") == "1"
	takes, acquires := 0, 0
	take := func(ctx actor.Context) {
		takes++
		ctx.Request(server, &messages.TakeRequest{RequestId: fmt.Sprintf("t%d", takes), Name: queue, WaitIndefinitely: true})
	}
	acquire := func(ctx actor.Context) {
		acquires++
		ctx.Request(server, &messages.SemaphoreAcquireRequest{RequestId: fmt.Sprintf("s%d", acquires), Name: sem, Permits: 1, WaitIndefinitely: true})
	}
	sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			say("WAITER %s %s", ctx.Self().Address, ctx.Self().Id)
			if queue != "" {
				take(ctx)
			}
			if sem != "" {
				acquire(ctx)
			}
		case *messages.TakeResponse:
			say("TAKE %s %v %v %s", m.RequestId, m.Taken, errorCode(m), m.Payload)
			if resend && !m.Taken {
				take(ctx)
			}
		case *messages.SemaphoreAcquireResponse:
			say("SEM %s %v %v", m.RequestId, m.Acquired, errorCode(m))
			if resend && !m.Acquired {
				acquire(ctx)
			}
		}
	}))
	say("READY")
	select {}
}

// workerRemoteForger sends the test's runtime (at SERVER_ADDR) what a peer
// should not, as FORGE says:
//
//	terminated      a Terminated naming VICTIM_ADDR/VICTIM_ID, to each actor
//	                id of TARGET_IDS (comma-separated)
//	direct          protocol requests straight to each id of TARGET_IDS,
//	                naming objects outside the runtime's key prefix, over the
//	                payload bound, under the minimum lease (LOCK_NAME); prints
//	                "REPLY <type> <request id> <code>" for each answer
//	renew-response  RenewResponses with the keeper's old predictable request
//	                ids and a 10-minute lease, to KEEPER_ADDR/KEEPER_ID
//
// and prints "DONE".
func workerRemoteForger(*actorlock.Runtime, redis.UniversalClient) int {
	sys, server, err := remoteNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "remote forger:", err)
		return 1
	}
	var targets []*actor.PID
	for _, id := range strings.Split(os.Getenv("TARGET_IDS"), ",") {
		if id != "" {
			targets = append(targets, actor.NewPID(server.Address, id))
		}
	}
	switch os.Getenv("FORGE") {
	case "terminated":
		victim := actor.NewPID(os.Getenv("VICTIM_ADDR"), os.Getenv("VICTIM_ID"))
		for _, to := range targets {
			sys.Root.Send(to, &actor.Terminated{Who: victim, Why: actor.TerminatedReason_AddressTerminated})
		}
		say("SENT %d", len(targets))
	case "direct":
		a := spawnAsker(sys)
		go func() {
			for r := range a.replies {
				fd := r.ProtoReflect().Descriptor().Fields().ByName("request_id")
				if fd == nil {
					continue // protoactor's own (a dead letter's)
				}
				say("REPLY %s %s %v", r.ProtoReflect().Descriptor().Name(), r.ProtoReflect().Get(fd).String(), errorCode(r))
			}
		}()
		for i, to := range targets {
			for _, msg := range directRequests(os.Getenv("LOCK_NAME"), i) {
				sys.Root.Send(a.pid, &askMsg{to: to, msg: msg})
			}
			// One large payload per batch protoactor sends: gRPC refuses
			// messages over 4 MiB.
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(3 * time.Second) // the answers come back
		say("SENT %d", len(targets))
	case "renew-response":
		keeper := actor.NewPID(os.Getenv("KEEPER_ADDR"), os.Getenv("KEEPER_ID"))
		for range 20 {
			for i := 1; i <= 50; i++ {
				sys.Root.Send(keeper, &messages.RenewResponse{RequestId: fmt.Sprintf("actorlock-keeper-%d", i), Renewed: true, LeaseMs: 600_000})
			}
			time.Sleep(100 * time.Millisecond)
		}
		say("SENT 1000")
	}
	say("DONE")
	select {}
}

// directRequests are what the forger sends each internal actor (the i-th):
// requests the runtime's PID would map into its key prefix, or refuse.
func directRequests(lock string, i int) []proto.Message {
	id := func(what string) string { return fmt.Sprintf("%s@%d", what, i) }
	return []proto.Message{
		&messages.OfferRequest{RequestId: id("offer-big"), Name: "other:items", Payload: make([]byte, 1<<20+1<<19)},
		&messages.OfferRequest{RequestId: id("offer-delayed"), Name: "other:later", Payload: []byte("x"), DelayMs: 60_000},
		&messages.SemaphoreReleaseRequest{RequestId: id("release"), Name: "other:sem", Permits: 5},
		&messages.TakeRequest{RequestId: id("take"), Name: "other:secret"},
		&messages.AcquireRequest{RequestId: id("acquire-tiny-lease"), Name: lock, Kind: messages.Kind_KIND_LOCK, LeaseMs: 1},
	}
}

// workerRemoteKeeper runs an owner actor whose keeper keeps a lock of a
// runtime that never answers (KEEP_RUNTIME_ADDR/KEEP_RUNTIME_ID) with a 2 s
// lease, and prints:
//
//	KEEPER <pid address> <pid id>
//	KEPT                        when the Keep was sent
//	LOST <reason>               a LockLost came
func workerRemoteKeeper(*actorlock.Runtime, redis.UniversalClient) int {
	sys, _, err := remoteNode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "remote keeper:", err)
		return 1
	}
	runtime := actor.NewPID(os.Getenv("KEEP_RUNTIME_ADDR"), os.Getenv("KEEP_RUNTIME_ID"))
	sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			keeper := ctx.Spawn(actorkit.KeeperProps())
			say("KEEPER %s %s", keeper.Address, keeper.Id)
			ctx.Send(keeper, &actorkit.Keep{Runtime: runtime, Name: "kept", Kind: messages.Kind_KIND_LOCK,
				OwnerToken: actorkit.NewOwnerToken(), Lease: 2 * time.Second, Since: time.Now()})
			say("KEPT")
		case *messages.LockLost:
			say("LOST %s", m.Reason)
		}
	}))
	say("READY")
	select {}
}
