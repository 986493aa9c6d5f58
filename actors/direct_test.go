package actors

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// permitFaults fails the client's semaphore_add scripts: the first one
// runs and loses its reply (lose), and every one is refused before it is
// sent (a dial error) until refuseUntil.
type permitFaults struct {
	mu          sync.Mutex
	lose        bool
	refuseUntil time.Time
}

func (f *permitFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *permitFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return f.process([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (f *permitFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return f.process(cmds, func() error { return next(ctx, cmds) })
	}
}

func (f *permitFaults) process(cmds []redis.Cmder, run func() error) error {
	adds := slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
		args := c.Args()
		return len(args) > 3 && (args[0] == "evalsha" || args[0] == "eval") && slices.Contains(args, any("sem-give-back"))
	})
	if !adds {
		return run()
	}
	f.mu.Lock()
	lose, refuse := f.lose, time.Now().Before(f.refuseUntil)
	f.lose = false
	f.mu.Unlock()
	var err error
	switch {
	case lose:
		_ = run()
		err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	case refuse:
		err = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	default:
		return run()
	}
	for _, c := range cmds {
		c.SetErr(err)
	}
	return err
}

// The permits a cancelled Acquire won go back once, whatever Redis does
// meanwhile: when the give-back cannot reach Redis within the call timeout,
// it goes on in the background until it can (it was only logged, the
// permits lost), and when its first attempt ran but its reply was lost, it
// is settled, not run again.
func TestGiveBackPermitsIsCarriedThroughOnce(t *testing.T) {
	srv, err := redisserver.Start()
	if err != nil {
		t.Skip("needs redis-server:", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	for _, lose := range []bool{false, true} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		faults := &permitFaults{}
		rdb.AddHook(faults)
		sys := actor.NewActorSystem()
		const callTimeout = 300 * time.Millisecond
		h := &Handle{env: newEnv(Config{System: sys, Redis: rdb, Log: slog.New(slog.DiscardHandler), RuntimeID: "test", CallTimeout: callTimeout})}
		ctx := context.Background()
		const name = "sem-give-back"
		require.NoError(t, rdb.Set(ctx, name, 5, 0).Err())
		faults.mu.Lock()
		faults.lose, faults.refuseUntil = lose, time.Now().Add(3*callTimeout)
		faults.mu.Unlock()

		h.GiveBackPermits(ctx, name, false, 2, nil)
		require.Eventually(t, func() bool { return rdb.Get(ctx, name).Val() == "7" }, 5*time.Second, 10*time.Millisecond,
			"the 2 permits are back (lost reply first: %v)", lose)
		time.Sleep(3 * callTimeout) // a second give-back would land by now
		assert.Equal(t, "7", rdb.Get(ctx, name).Val(), "given back once (lost reply first: %v)", lose)

		// No actor was started: end what the give-back started, as Stop does.
		h.env.cancelCall()
		h.env.stopGivingBack()
		h.env.calls.Wait()
		sys.Shutdown()
		_ = rdb.Close()
	}
}
