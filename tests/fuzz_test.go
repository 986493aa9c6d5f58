package tests

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// fuzzKinds are the requests the runtime's PID serves; the first byte of a
// fuzz input picks one, the rest is its wire encoding.
var fuzzKinds = []func() proto.Message{
	func() proto.Message { return &messages.AcquireRequest{} },
	func() proto.Message { return &messages.ReleaseRequest{} },
	func() proto.Message { return &messages.CancelRequest{} },
	func() proto.Message { return &messages.RenewRequest{} },
	func() proto.Message { return &messages.OfferRequest{} },
	func() proto.Message { return &messages.TakeRequest{} },
	func() proto.Message { return &messages.SemaphoreAcquireRequest{} },
	func() proto.Message { return &messages.SemaphoreReleaseRequest{} },
	func() proto.Message { return &messages.CancelWaitRequest{} },
}

// bounded keeps a fuzzed request's waits short, so an iteration takes
// milliseconds; the values stay as fuzzed otherwise (negatives included).
func bounded(m proto.Message) {
	switch r := m.(type) {
	case *messages.AcquireRequest:
		r.WaitMs, r.WaitIndefinitely, r.LeaseMs = min(r.WaitMs, 300), false, min(r.LeaseMs, 5000)
	case *messages.TakeRequest:
		r.WaitMs, r.WaitIndefinitely = min(r.WaitMs, 300), false
	case *messages.SemaphoreAcquireRequest:
		r.WaitMs, r.WaitIndefinitely, r.LeaseMs = min(r.WaitMs, 300), false, min(r.LeaseMs, 5000)
	case *messages.OfferRequest:
		r.DelayMs = min(r.DelayMs, 1000)
	}
}

func fuzzSeed(kind byte, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return append([]byte{kind}, b...)
}

// FuzzRequests sends arbitrary protobuf requests to a runtime's PID, as a
// remote actor could: every one is answered (no panic, no hang), and a lock
// held by a Go caller meanwhile stays held by it, with hold count 1, and is
// never released by a fuzzed request. Seeds in testdata/fuzz/FuzzRequests;
// ./dev.sh test runs a short fuzzing pass.
func FuzzRequests(f *testing.F) {
	for _, s := range [][]byte{
		fuzzSeed(0, &messages.AcquireRequest{Name: "fuzz:victim", Kind: messages.Kind_KIND_LOCK, RequestId: "r1", WaitMs: 50}),
		fuzzSeed(0, &messages.AcquireRequest{Name: "fuzz:a", Kind: messages.Kind_KIND_FAIR, RequestId: "r2", LeaseMs: 1000}),
		fuzzSeed(0, &messages.AcquireRequest{Name: "", RequestId: "r3", WaitMs: -1}),
		fuzzSeed(1, &messages.ReleaseRequest{Name: "fuzz:victim", Kind: messages.Kind_KIND_LOCK, RequestId: "r4"}),
		fuzzSeed(2, &messages.CancelRequest{RequestId: "r1"}),
		fuzzSeed(3, &messages.RenewRequest{Name: "fuzz:victim", Kind: messages.Kind_KIND_LOCK}),
		fuzzSeed(4, &messages.OfferRequest{Name: "fuzz:q", Payload: []byte("x"), DelayMs: 10}),
		fuzzSeed(5, &messages.TakeRequest{Name: "fuzz:q", RequestId: "r5", WaitMs: 20}),
		fuzzSeed(6, &messages.SemaphoreAcquireRequest{Name: "fuzz:s", RequestId: "r6", Permits: 1}),
		fuzzSeed(7, &messages.SemaphoreReleaseRequest{Name: "fuzz:s", Permits: 1}),
		fuzzSeed(8, &messages.CancelWaitRequest{RequestId: "r5"}),
		{0, 0xff, 0xff, 0xff}, {9},
	} {
		f.Add(s)
	}
	srv := startRedis(f)
	rdb := client(f, srv.Addr)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	rt := newRuntime(f, rdb, actorkit.WithActorSystem(sys), actorlock.WithWatchdog(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	victim, err := rt.Lock("fuzz:victim").Acquire(ctx)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		m := fuzzKinds[int(in[0])%len(fuzzKinds)]()
		if proto.Unmarshal(in[1:], m) != nil {
			return // not a message the wire could carry
		}
		bounded(m)
		// A hang is a failure too: crash the fuzz worker so that the
		// engine reports the input.
		hang := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("FuzzRequests: no progress in 20 s on %T %v", m, m)) })
		defer hang.Stop()
		// A requester of its own each time, which the runtime may watch
		// (a future would take the watch for its answer).
		p := spawnProbe(t, sys)
		if _, ok := m.(*messages.CancelWaitRequest); ok {
			// Answered through the wait it cancels, if any: check the
			// runtime still answers instead.
			p.send(sys, actorkit.PID(rt), m)
			m = &messages.AcquireRequest{Name: "fuzz:alive", Kind: messages.Kind_KIND_LOCK, RequestId: "alive", LeaseMs: 1000}
		}
		p.send(sys, actorkit.PID(rt), m)
		select {
		case res := <-p.inbox:
			require.Equal(t, messages.File_lock_proto.Package(), res.ProtoReflect().Descriptor().ParentFile().Package(), "answered %v with %T", m, res)
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer to %v", m)
		}
		require.NoError(t, victim.Err(), "the Go caller's hold ended after %v", m)
		got, err := rdb.HGetAll(ctx, "fuzz:victim").Result()
		require.NoError(t, err)
		require.Equal(t, map[string]string{victim.Owner(): "1", scripts.HoldMarkField: strconv.FormatInt(victim.Token(), 10)}, got,
			"the victim lock changed after %v", m)
	})
}
