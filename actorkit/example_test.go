package actorkit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// An actor locks by message: it sends an AcquireRequest to the runtime's PID
// (actorkit.NamedPID(rt) from another process), keeps the lock alive with a keeper
// child (needed when the owner is in another process than the runtime),
// and releases with the owner token of the response.
func ExampleKeeperProps() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	const name = "example:actor-lock"
	locks, done := actorkit.PID(rt), make(chan struct{})
	var keeper *actor.PID
	owner := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(locks, &messages.AcquireRequest{RequestId: "1", Name: name, Kind: messages.Kind_KIND_LOCK, WaitMs: 5000})
		case *messages.AcquireResponse:
			fmt.Println("acquired:", m.Acquired)
			keeper = c.Spawn(actorkit.KeeperProps()) // a child: it stops with the owner
			c.Send(keeper, &actorkit.Keep{Runtime: locks, Name: name, Kind: messages.Kind_KIND_LOCK,
				OwnerToken: m.OwnerToken, Lease: time.Duration(m.TtlMs) * time.Millisecond})
			// ... work ...
			c.Request(locks, &messages.ReleaseRequest{RequestId: "2", Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: m.OwnerToken})
			c.Send(keeper, &actorkit.Unkeep{Runtime: locks, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: m.OwnerToken})
		case *messages.ReleaseResponse:
			fmt.Println("released:", m.Released)
			close(done)
		}
	})
	pid := actorkit.System(rt).Root.Spawn(owner)
	<-done
	_ = actorkit.System(rt).Root.StopFuture(pid).Wait()
	// Output:
	// acquired: true
	// released: true
}
