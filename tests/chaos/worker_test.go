package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// The workers are this test binary run again with workerEnv set; their
// parameters come in env vars and their history goes to a file.
const workerEnv = "ACTORLOCK_CHAOS_WORKER"

// holdAPI is what a worker uses of a hold: *actorlock.Held, or the checker's
// self-test's fake.
type holdAPI interface {
	Token() int64
	Done() <-chan struct{}
	Err() error
	Context() context.Context
	Unlock(ctx context.Context) error
}

type locker interface {
	acquire(ctx context.Context, name string, wait time.Duration) (holdAPI, error)
}

type realLocker struct{ rt *actorlock.Runtime }

func (l realLocker) acquire(ctx context.Context, name string, wait time.Duration) (holdAPI, error) {
	h, err := l.rt.Lock(name).Acquire(ctx, actorlock.WaitTime(wait))
	if err != nil {
		return nil, err
	}
	return h, nil
}

// resource is the fenced register a critical section reads and writes: a
// hash per lock name on a Redis that no fault touches. Both operations
// carry the token and raise the fence, so a stale holder can neither read
// nor write once a newer one has read.
type resource struct{ rdb *redis.Client }

var fencedRead = redis.NewScript(`
-- KEYS[1] the resource hash; ARGV[1] the token. Returns {accepted, value}.
local fence = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < fence then return {0, 0} end
redis.call('hset', KEYS[1], 'fence', ARGV[1])
return {1, tonumber(redis.call('hget', KEYS[1], 'value') or '0')}
`)

var fencedWrite = redis.NewScript(`
-- KEYS[1] the resource hash; ARGV[1] the token; ARGV[2] the value. Returns 1 if accepted.
local fence = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < fence then return 0 end
redis.call('hset', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1
`)

func (r resource) read(ctx context.Context, name string, tok int64) (bool, int64, error) {
	res, err := fencedRead.Run(ctx, r.rdb, []string{"chaos:res:" + name}, tok).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	return res[0] == 1, res[1], nil
}

func (r resource) write(ctx context.Context, name string, tok, val int64) (bool, error) {
	n, err := fencedWrite.Run(ctx, r.rdb, []string{"chaos:res:" + name}, tok, val).Int64()
	return n == 1, err
}

// client is one goroutine of a worker: it acquires a random name, reads the
// resource, waits a little, writes the value plus one, and unlocks,
// recording every step.
type client struct {
	id, proc int
	names    []string
	wait     time.Duration
	lease    time.Duration
	lk       locker
	res      resource
	log      *eventLog
	rng      *rand.Rand
	// pauseArmed: stop this process (SIGSTOP to itself) between the next
	// read and write; the parent continues it.
	pauseArmed *atomic.Bool
}

func (c *client) emit(e event) {
	e.C, e.P = c.id, c.proc
	if e.T == 0 {
		e.T = now()
	}
	c.log.emit(e)
}

func (c *client) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c.once()
		time.Sleep(time.Duration(c.rng.IntN(10)) * time.Millisecond)
	}
}

func (c *client) once() {
	name := c.names[c.rng.IntN(len(c.names))]
	ctx, cancel := context.WithTimeout(context.Background(), c.wait+20*time.Second)
	defer cancel()
	c.emit(event{K: "acq", N: name, Wait: int64(c.wait)})
	h, err := c.lk.acquire(ctx, name, c.wait)
	if err != nil {
		c.emit(event{K: "nogot", N: name, Err: err.Error()})
		if !errors.Is(err, actorlock.ErrNotAcquired) {
			time.Sleep(50 * time.Millisecond) // Redis is down: do not spin
		}
		return
	}
	tok := h.Token()
	c.emit(event{K: "got", N: name, Tok: tok})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		<-h.Done()
		t := now()
		if errors.Is(h.Err(), actorlock.ErrLost) {
			c.emit(event{K: "lost", N: name, Tok: tok, T: t, Err: h.Err().Error()})
		}
	}()
	c.section(ctx, name, tok, h)
	if h.Context().Err() != nil {
		<-watched // record the loss before the Unlock that follows it
	}
	c.emit(event{K: "unl", N: name, Tok: tok})
	for {
		uctx, ucancel := context.WithTimeout(ctx, 5*time.Second)
		err = h.Unlock(uctx)
		ucancel()
		if err == nil || errors.Is(err, actorlock.ErrLost) || errors.Is(err, actorlock.ErrUnlocked) || ctx.Err() != nil {
			break
		}
		c.emit(event{K: "unle", N: name, Tok: tok, Err: err.Error()})
		time.Sleep(100 * time.Millisecond)
	}
	// Ok: the hold is over (released, or found lost).
	e := event{K: "unlr", N: name, Tok: tok, Ok: err == nil || errors.Is(err, actorlock.ErrLost) || errors.Is(err, actorlock.ErrUnlocked)}
	if err != nil {
		e.Err = err.Error()
	}
	c.emit(e)
	if e.Ok {
		<-watched
	}
}

// section is the critical section: read, think, write. Like a careful
// application it checks the hold before each step; the pause, when armed,
// lands after the check and before the write, the worst place.
func (c *client) section(ctx context.Context, name string, tok int64, h holdAPI) {
	if h.Context().Err() != nil {
		return
	}
	c.emit(event{K: "rd", N: name, Tok: tok})
	ok, val, err := c.res.read(ctx, name, tok)
	if err != nil {
		panic(fmt.Sprintf("chaos: the resource server failed: %v", err)) // never faulted
	}
	c.emit(event{K: "rdr", N: name, Tok: tok, Ok: ok, Val: val})
	if !ok {
		return
	}
	// Mostly a short think; one section in 24 holds on for up to three
	// leases (ending early if the lock is lost), so that renewals run and
	// faults longer than a lease land in holds that outlast them.
	think := time.Duration(5+c.rng.IntN(20)) * time.Millisecond
	if c.rng.IntN(24) == 0 {
		think = 3 * c.lease
		c.emit(event{K: "long", N: name, Tok: tok, Val: now() + int64(think)})
	}
	select {
	case <-time.After(think):
	case <-h.Done():
		return
	}
	if c.pauseArmed != nil && c.pauseArmed.CompareAndSwap(true, false) {
		// The thread that raises SIGSTOP can run on for a moment before
		// the whole process stops: wait for the parent's SIGCONT.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		c.emit(event{K: "stop", N: name, Tok: tok})
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		select {
		case <-cont:
		case <-time.After(time.Minute): // the parent is gone
		}
		signal.Stop(cont)
		c.emit(event{K: "cont", N: name, Tok: tok})
	}
	c.emit(event{K: "wr", N: name, Tok: tok, Val: val + 1})
	ok, err = c.res.write(ctx, name, tok, val+1)
	if err != nil {
		panic(fmt.Sprintf("chaos: the resource server failed: %v", err))
	}
	c.emit(event{K: "wrr", N: name, Tok: tok, Ok: ok})
}

// runWorker is a worker process's main: CHAOS_REDIS (through its proxy),
// CHAOS_RESOURCE, CHAOS_LOG, CHAOS_PROC, CHAOS_CLIENTS, CHAOS_NAMES,
// CHAOS_LEASE, CHAOS_WAIT, CHAOS_SEED. SIGUSR1 arms a pause between a read
// and a write, SIGUSR2 disarms it, SIGTERM ends the run.
func runWorker() int {
	env := func(k string) string { return os.Getenv(k) }
	atoi := func(k string) int { n, _ := strconv.Atoi(env(k)); return n }
	dur := func(k string) time.Duration { d, _ := time.ParseDuration(env(k)); return d }
	log, err := openLog(env("CHAOS_LOG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker:", err)
		return 2
	}
	defer log.close()
	rdb := redis.NewClient(&redis.Options{Addr: env("CHAOS_REDIS"), MaxRetries: -1})
	defer rdb.Close()
	res := redis.NewClient(&redis.Options{Addr: env("CHAOS_RESOURCE")})
	defer res.Close()
	rt, err := actorlock.New(rdb, actorlock.WithWatchdog(dur("CHAOS_LEASE")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker:", err)
		return 2
	}
	var armed atomic.Bool
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM)
	stop := make(chan struct{})
	go func() {
		for s := range sigs {
			switch s {
			case syscall.SIGUSR1:
				armed.Store(true)
			case syscall.SIGUSR2:
				armed.Store(false)
			default:
				close(stop)
				return
			}
		}
	}()
	proc, n, seed := atoi("CHAOS_PROC"), atoi("CHAOS_CLIENTS"), uint64(atoi("CHAOS_SEED"))
	// For the soak: live heap and goroutines every 2 s.
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				log.emit(event{K: "mem", P: proc, T: now(), Val: int64(m.HeapAlloc), Tok: int64(runtime.NumGoroutine())})
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		c := &client{id: proc*100 + i, proc: proc, names: strings.Split(env("CHAOS_NAMES"), ","), wait: dur("CHAOS_WAIT"), lease: dur("CHAOS_LEASE"),
			lk: realLocker{rt}, res: resource{res}, log: log, rng: rand.New(rand.NewPCG(seed, uint64(proc*100+i))), pauseArmed: &armed}
		wg.Add(1)
		go func() { defer wg.Done(); c.run(stop) }()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rt.Close(ctx)
	return 0
}
