package actors

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/scripts"
)

// Config is what one runtime's actors share. It is read-only once the
// supervisor has started.
type Config struct {
	System *actor.ActorSystem
	Redis  redis.UniversalClient
	Log    *slog.Logger
	// RuntimeID prefixes the owner ids of actor owners, as Redisson's
	// client UUID prefixes its thread ids.
	RuntimeID string
	// Watchdog is the lease of locks acquired without a lease time; the
	// renewal actor extends them every Watchdog/3.
	Watchdog time.Duration
	// IdleAfter is how long a lock actor with nothing held, queued or in
	// flight lives on, so hot names keep their actor between uses.
	IdleAfter time.Duration
	// CallTimeout bounds one Redis call (retries included).
	CallTimeout time.Duration
	// ClientEndsCalls says that Redis ends a command when its context does
	// (go-redis's ContextTimeoutEnabled). Otherwise a script call returns
	// at its deadline while the command goes on, on a worker goroutine of
	// its own (scripts.WithCallBound), so that CallTimeout holds for any
	// client.
	ClientEndsCalls bool
	// TokenTTL is how long a fencing counter lives after the name's last
	// acquisition; 0 sets no expiry (tokens rise either way).
	TokenTTL time.Duration
	// MaxHandoffs caps consecutive local hand-offs of one lock before it is
	// released publicly, so waiters in other processes get their turn.
	MaxHandoffs int
	// FairWait is how long the place of a fair-lock waiter without a wait
	// time lasts after the one ahead when it joins (Redisson's
	// threadWaitTime); a live waiter's place is then kept a Watchdog ahead
	// (refreshStep), so a dead one is dropped about a Watchdog after it died.
	FairWait time.Duration
	// ReplicaSync, if Replicas > 0, has every lock script followed by WAIT:
	// an acquisition that too few replicas confirm is undone and tried
	// again, up to Attempts times.
	ReplicaSync ReplicaSync
	// Cluster is Redis as a cluster client, nil for any other client:
	// batched renewals are then grouped per hash slot.
	Cluster *redis.ClusterClient
	// ShardedPubSub subscribes with SSUBSCRIBE, one connection per shard
	// (Cluster must be set); Redis must then be a scripts.Sharded client,
	// so that the scripts publish with SPUBLISH.
	ShardedPubSub bool
	// KeyPrefix (WithKeyPrefix) is put before the name of every protocol
	// request, as the root package does for its handles, so that a name
	// means the same lock whether a Go caller or an actor asks for it.
	KeyPrefix string
	// Observe receives what the actors see for metrics and events
	// (observe.go); its zero value reports nothing.
	Observe Observer
	// Record is the runtime's record (record.go); no key: none kept.
	Record RuntimeRecord
}

// ReplicaSync configures WAIT after lock scripts (see Config.ReplicaSync).
type ReplicaSync struct {
	Replicas int64
	Timeout  time.Duration
	Attempts int
}

// runtimeEnv is Config plus the PIDs and the goroutine accounting that the actors of
// one runtime share.
type runtimeEnv struct {
	Config
	router  *actor.PID
	renewal *actor.PID
	// primitives serves the protocol messages that are not about locks (the
	// delayed queue, semaphores, latches); nil until it exists.
	primitives *actor.PID
	// locks is the lock manager.
	locks *actor.PID
	// timers sends every actor's timer messages (it keeps no state: one for
	// all, not one per actor).
	timers *scheduler.TimerScheduler
	// wakeups times the validity deadlines of every lock actor's holds.
	wakeups *wakeups
	// GuardTTL is how long a request's duplicate guard lives at least
	// (scripts.Guard): three call timeouts. An attempt acts at most a call
	// timeout and a half after its request's first one was sent (Clock: the
	// call's deadline plus Slack), and a run whose outcome is unknown is
	// settled within two call timeouts of it (settleStep), so a guard
	// outlives both; a lock's guards live a lease longer (guardTTL).
	GuardTTL time.Duration
	// Clock is the runtime's estimate of the Redis server's clock, which
	// refuses an attempt that arrives after its call's deadline.
	Clock *scripts.Clock
	// batched pipelines the lock scripts of concurrent calls.
	batched *scripts.Batched
	reqSeq  atomic.Uint64
	// renewGens numbers renewal registrations across every lock actor and
	// its later incarnations (after an idle stop), so that a renewal result
	// still in flight for a registration that ended can never be taken for
	// a newer one's.
	renewGens atomic.Uint64
	// sharedCall is the context calls starting now share (callCtx).
	sharedCall atomic.Pointer[sharedCall]
	// idle hands a call to a worker goroutine waiting for one (unbuffered:
	// a send succeeds only if a worker is idle).
	idle chan func()

	// calls owns every goroutine that talks to Redis on an actor's behalf,
	// and the pub/sub connection's goroutines; Close waits for it. callsCtx
	// is cancelled last, after the actors have released what they hold, to
	// abort whatever is still in flight.
	calls      sync.WaitGroup
	callsCtx   context.Context
	cancelCall context.CancelFunc
}

// props is how every actor of the runtime is spawned. Messages are
// processed on the goroutine that posts them when the mailbox is idle (the
// mailbox still runs one message at a time): a request goes from the
// caller's goroutine through the manager to the lock actor, and a Redis
// reply from the call's goroutine into the lock actor, without a goroutine
// hand-off at each step. This is safe because no Receive ever blocks: Redis
// calls run on goroutines of their own, replies go to buffered channels, and
// nothing waits for a goroutine inside Receive (which could be its own).
//
// opts come after that dispatcher, so they may replace it.
func props(produce func() actor.Actor, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(produce, append([]actor.PropsOption{actor.WithDispatcher(actor.NewSynchronizedDispatcher(300))}, opts...)...)
}

func newEnv(cfg Config) *runtimeEnv {
	e := &runtimeEnv{Config: cfg, idle: make(chan func()), GuardTTL: 3 * cfg.CallTimeout, Clock: &scripts.Clock{Slack: cfg.CallTimeout / 2},
		timers: scheduler.NewTimerScheduler(localSender{cfg.System.Root}), wakeups: newWakeups(localSender{cfg.System.Root}),
		batched: &scripts.Batched{UniversalClient: cfg.Redis, Flights: pipelineFlights}}
	ctx := scripts.WithCallObserver(context.Background(), cfg.Observe.ScriptCall)
	if !cfg.ClientEndsCalls {
		ctx = scripts.WithCallBound(ctx, e.goRun)
	}
	e.callsCtx, e.cancelCall = context.WithCancel(ctx)
	return e
}

// CallTimeoutError is the cause of a Redis call's context ending at the
// runtime's call timeout: Redis did not answer in time (a frozen or
// overloaded server, a network partition). It is a
// context.DeadlineExceeded for errors.Is.
type CallTimeoutError struct{ After time.Duration }

func (e CallTimeoutError) Error() string {
	return "Redis did not answer within the call timeout of " + e.After.String()
}

// Is makes it match context.DeadlineExceeded.
func (CallTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout reports true, as net errors that time out do.
func (CallTimeoutError) Timeout() bool { return true }

// pipelineFlights is how many pipelines of lock scripts may be on the wire
// at once (scripts.Batched).
//
// Measured with tests/bench a32 (32 goroutines, 32 names, 2 CPUs): 1
// flight 39k pairs/s, 2 42k, 4 43k, 64 (no batching left) 28k.
const pipelineFlights = 4

// callCtx bounds a call that starts now by CallTimeout, give or take a
// twentieth of it (50 ms at most): calls starting within that window share
// one context, so a busy runtime pays for one deadline timer per window
// instead of one per call. Nobody cancels a shared context early: its own
// deadline ends it (and releases its timer), or Close, through callsCtx.
func (e *runtimeEnv) callCtx() context.Context {
	now := time.Now()
	if c := e.sharedCall.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	window := min(e.CallTimeout/20, 50*time.Millisecond)
	ctx, cancel := context.WithDeadlineCause(e.callsCtx, now.Add(e.CallTimeout+window), CallTimeoutError{e.CallTimeout})
	e.sharedCall.Store(&sharedCall{ctx: ctx, until: now.Add(window), cancel: cancel})
	return ctx
}

// directCtx bounds a call made on a Go caller's goroutine (not goCall's)
// by the call timeout, as callCtx bounds the others: CallTimeoutError is
// its cause, and with a client that does not end calls with their context,
// its script calls run on goroutines of their own (scripts.WithCallBound),
// so that the caller returns at the deadline. Those are not the workers:
// a Go caller may call during Close, after which no worker may start; one
// outlives its caller only while the client still waits on Redis.
func (e *runtimeEnv) directCtx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(parent, e.CallTimeout, CallTimeoutError{e.CallTimeout})
	if !e.ClientEndsCalls {
		ctx = scripts.WithCallBound(ctx, func(fn func()) { go fn() })
	}
	return ctx, cancel
}

// sharedCall is a call context handed out until until. cancel is kept,
// not called: calls still running under ctx would see it end early.
type sharedCall struct {
	ctx    context.Context
	until  time.Time
	cancel context.CancelFunc
}

// workerIdle is how long a call goroutine waits for more work before it ends.
const workerIdle = time.Second

// scriptClient is the client one lock script call runs on, and how to read
// how many replicas confirmed its writes (-1: not asked). With replica sync
// it is a scripts.Synced of its own, so calls never share a count.
func (e *runtimeEnv) scriptClient() (scripts.Client, func() int64) {
	if e.ReplicaSync.Replicas <= 0 {
		return e.batched, func() int64 { return -1 }
	}
	s := &scripts.Synced{UniversalClient: e.Redis, Replicas: e.ReplicaSync.Replicas, Timeout: e.ReplicaSync.Timeout}
	return s, func() int64 { return s.Acked }
}

// unsynced reports whether acked (from scriptClient) falls short of the
// replicas required.
func (e *runtimeEnv) unsynced(acked int64) bool {
	return e.ReplicaSync.Replicas > 0 && acked < e.ReplicaSync.Replicas
}

// NewRequestID returns an id unique among this runtime's requests, for the
// unlock latch (which is per lock name, so runtime-unique is enough).
func (e *runtimeEnv) NewRequestID() string {
	return e.RuntimeID + ":" + strconv.FormatUint(e.reqSeq.Add(1), 10)
}

// goCall runs fn off the actor, bounded by CallTimeout, and sends what it
// returns to pid (nil: to nobody): actors never wait on Redis inside
// Receive. An idle worker goroutine takes the call, or a new one starts:
// never waiting for one, so an actor is never held up. Workers outlive a
// call (they end after workerIdle, or at Close), which keeps the stack a
// go-redis call grows to instead of growing a fresh one each time.
//
// The Redis call never runs on the goroutine of the Go caller waiting for
// it, although that would save two goroutine hand-offs per call: go-redis
// cannot abort a read when a context is cancelled, so a frozen Redis would
// then hold a caller past its wait time or cancellation.
func (e *runtimeEnv) goCall(pid *actor.PID, fn func(ctx context.Context) any) {
	call := func() {
		msg := fn(e.callCtx())
		if pid != nil {
			e.deliver(pid, msg)
		}
	}
	e.goRun(call)
}

// deliver hands a call's result to the actor that made the call (see
// localSender).
func (e *runtimeEnv) deliver(pid *actor.PID, msg any) { localSender{e.System.Root}.Send(pid, msg) }

// localSender sends the messages the runtime gives its own actors from
// outside them (timers, the results of their Redis calls) straight to the
// actor's mailbox. Close stops actors whose calls are still out (a mover's
// move, a reader's GET) and whose timers may be firing: a message that
// comes after its actor stopped is awaited by nobody and is dropped here,
// where sending it to the PID would make a dead letter, which protoactor
// logs as if something were lost. A mailbox of an actor that stops
// meanwhile drops it the same way.
type localSender struct{ *actor.RootContext }

func (s localSender) Send(pid *actor.PID, msg any) {
	if p, ok := s.ActorSystem().ProcessRegistry.GetLocal(pid.Id); ok {
		p.SendUserMessage(pid, msg)
	}
}

// goRun runs fn on an idle worker goroutine, or a new one, never waiting.
func (e *runtimeEnv) goRun(fn func()) {
	select {
	case e.idle <- fn:
	default:
		e.calls.Add(1)
		go e.work(fn)
	}
}

// work runs calls until none came for a whole workerIdle period (so it
// ends between one and two periods after its last call). The timer is
// re-armed once per period, not once per call: a busy worker's calls then
// cost no timer operation.
func (e *runtimeEnv) work(call func()) {
	defer e.calls.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		call()
		used := true
	wait:
		select {
		case call = <-e.idle:
		case <-idle.C:
			if !used {
				return
			}
			used = false
			idle.Reset(workerIdle)
			goto wait
		case <-e.callsCtx.Done():
			return
		}
	}
}

// retryUnknown runs a lock-mutating call, re-attempting while its outcome is
// unknown (the connection broke: up to 3 more times) or Redis answered that
// it cannot run it now (a failover or a cluster converging: as long as ctx,
// bounded by CallTimeout, lasts). attempt is 0 first; later attempts must be
// safe if an earlier one took effect, which the scripts ensure when told it
// is a re-attempt. A failure it returns may have taken effect when any
// attempt's might have (earlierTry), whatever the last one's error says.
func retryUnknown(ctx context.Context, call func(ctx context.Context, attempt int) error) error {
	backoff := 10 * time.Millisecond
	var unknown error // the first failure that may have taken effect
	for attempt := 0; ; attempt++ {
		err := call(ctx, attempt)
		if unknown == nil && err != nil && mayHaveRun(err) && !isReply(err) {
			unknown = err
		}
		if err == nil || ctx.Err() != nil || !(refusedForNow(err) || outcomeUnknown(err) && attempt < 3) {
			return triedEarlier(err, unknown)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return triedEarlier(err, unknown)
		case <-t.C:
		}
		backoff = min(4*backoff, 250*time.Millisecond)
	}
}

// earlierTry is the failure of a call's last attempt, which did not act
// (its connection could not be set up, or Redis answered it with an error),
// after an earlier attempt that may have: the call as a whole may have
// taken effect.
type earlierTry struct {
	err     error // the last attempt's
	earlier error // the earlier attempt's, whose outcome is unknown
}

func (e *earlierTry) Error() string {
	return fmt.Sprintf("%v (an earlier try may have run: %v)", e.err, e.earlier)
}

func (e *earlierTry) Unwrap() error { return e.err }

func triedEarlier(err, earlier error) error {
	if err == nil || earlier == nil || (mayHaveRun(err) && !isReply(err)) {
		return err
	}
	return &earlierTry{err: err, earlier: earlier}
}

// isReply reports whether err is Redis's answer to the command (an error
// reply: BUSY, READONLY, LOADING, a script's refusal): the command did
// not act, whatever an earlier attempt of the same call did.
func isReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) || errors.Is(err, scripts.ErrWrongKind) || errors.Is(err, scripts.ErrNotRun)
}

// busyOrFull reports whether Redis refused a command because another
// script runs too long (BUSY) or memory is full (OOM): both pass.
func busyOrFull(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && (strings.HasPrefix(rerr.Error(), "BUSY") || strings.HasPrefix(rerr.Error(), "OOM"))
}

// outcomeUnknown reports whether a failed call may have taken effect, or
// not, unbeknownst to us: a transport failure after the command may have
// left. A failed dial is final here: the command never left, and go-redis
// has already retried the dial.
func outcomeUnknown(err error) bool {
	var rerr redis.Error
	return mayHaveRun(err) && !errors.As(err, &rerr) && !errors.Is(err, context.Canceled)
}

// refusedForNow reports whether Redis refused to run a call for a reason
// that passes: it did not run, and may be tried again.
func refusedForNow(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "NOREPLICAS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// mayHaveRun reports whether a failed call may have taken effect in Redis:
// anything but a connection that could not be set up, over which the
// command never left: a failed dial, or a TLS handshake that failed on our
// side because the server's certificate is not trusted (verified only in
// the handshake) or the server does not speak TLS at all. go-redis dials
// and handshakes in one step, before it writes anything.
func mayHaveRun(err error) bool {
	var earlier *earlierTry
	if errors.As(err, &earlier) {
		return true
	}
	var operr *net.OpError
	var verr *tls.CertificateVerificationError
	var herr tls.RecordHeaderError
	return !(errors.As(err, &operr) && operr.Op == "dial") && !errors.As(err, &verr) && !errors.As(err, &herr) &&
		!errors.Is(err, scripts.ErrWrongKind) && // refused before writing anything
		!errors.Is(err, scripts.ErrNotRun) // settled as not run, or too late to run
}

// Drift is the safety margin taken off a lease when computing how long a
// hold is valid locally (and a RedLock's validity): Done() must close before
// Redis can let another owner in, although clocks run at slightly different
// rates and the holder's process may be slow to act on its timer. It is 1 %
// of the lease plus 2 ms for clock rates, and at least 25 ms, so that a
// scheduling stall of the holder of a few ms (measured: a 12 ms margin at a
// 1 s lease was nearly used up under load) does not break that order; never
// more than a quarter of the lease, so that tiny leases stay usable.
func Drift(lease time.Duration) time.Duration {
	return min(max(lease/100+2*time.Millisecond, minDrift), lease/4)
}

const minDrift = 25 * time.Millisecond

var _ scripts.Client = redis.UniversalClient(nil)
