package actorlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/ext"
	"github.com/actorlock/actorlock/internal/mutant"
	"github.com/actorlock/actorlock/observe"
	"github.com/actorlock/actorlock/scripts"
)

// Option configures a Runtime.
type Option func(*config)

type config struct {
	watchdog    time.Duration
	system      *actor.ActorSystem
	logger      *slog.Logger
	idleAfter   time.Duration
	callTimeout time.Duration
	tokenTTL    time.Duration
	handoffs    int
	fairWait    time.Duration
	replicaSync actors.ReplicaSync
	server      *ext.Server // remoting.WithRemote
	name        string
	keyPrefix   string
	serverName  string // WithServerName
	noRecord    bool   // WithRuntimeRecord(false)
	// shardedPubSub: nil asks the cluster.
	shardedPubSub *bool
	// telemetry.go, events.go
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	events         func(observe.Event)
	err            error
}

func defaultConfig() config {
	return config{
		watchdog:    30 * time.Second,
		idleAfter:   10 * time.Second,
		callTimeout: 10 * time.Second,
		handoffs:    8,
		fairWait:    5 * time.Minute,
		tokenTTL:    defaultTokenTTL,
		replicaSync: actors.ReplicaSync{Attempts: 3},
	}
}

func (c *config) invalid(format string, args ...any) {
	c.fail(fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
}

// fail keeps the first error of the options, which New returns.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithWatchdog sets the lease of locks acquired without LeaseTime. While such
// a lock is held, the watchdog extends it every lease/3; if it cannot for a
// whole lease, the Held is lost. A holder that dies is overtaken at most one
// lease later. Default 30 s (Redisson's lockWatchdogTimeout); at least 10 ms.
func WithWatchdog(lease time.Duration) Option {
	return func(c *config) {
		if lease < actors.MinLease {
			c.invalid("watchdog lease %v is under %v", lease, actors.MinLease)
		}
		c.watchdog = lease
	}
}

// WithLogger sets where the runtime (and the actor system it creates, unless
// actorkit.WithActorSystem is given) logs; that system's INFO records (its
// start and stops) come at DEBUG. Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.invalid("nil logger")
		}
		c.logger = l
	}
}

// WithIdleTimeout sets how long the per-name state of a lock with nothing
// held or waiting is kept, so hot names do not rebuild it on every use.
// Default 10 s.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.invalid("idle timeout %v is not positive", d)
		}
		c.idleAfter = d
	}
}

// WithCallTimeout bounds one Redis call of the runtime, its internal retries
// included, to within a twentieth of d (50 ms at most) more: calls starting
// together share one deadline. Default 10 s; go-redis's own dial, read and
// write timeouts may end a call earlier.
//
// It holds with any client. A call Redis does not answer in time fails
// with an error that says so ("Redis did not answer within the call
// timeout of 1.5s") and matches context.DeadlineExceeded; whether its
// command ran is then unknown, and a lock it may have taken is given back.
// go-redis ends a command with its context only when the client has
// ContextTimeoutEnabled; with a client without it (go-redis's default), the
// runtime stops waiting at the deadline itself and leaves the command to
// finish on a goroutine of its own, until the client's read timeout ends
// it: set ContextTimeoutEnabled to save that goroutine per call. A Poll
// makes two calls (the pop, and the ending of the pop's hold, which keeps
// the item from being lost), so it may take two call timeouts.
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.invalid("call timeout %v is not positive", d)
		}
		c.callTimeout = d
	}
}

// WithFencingCounterTTL makes a lock name's fencing counter
// (redisson_lock_token:{name}) expire d after the name's last acquisition
// (or when that acquisition's lease ends, if later), or, with d = 0, never
// expire: the counter Redisson's RFencedLock keeps.
//
// Default: 1 minute (never less than the call timeout), so that a released
// name leaves no key without an expiry and Redis memory follows the names
// in use, not every name ever locked (a permanent counter is one string key,
// about 150 bytes, per name for ever: 1.5 GB per 10 million names).
//
// Why a short TTL is safe: each token is max(counter + 1, the Redis server's
// clock in microseconds), so tokens rise whether the counter is there or
// not, as long as that clock does not step back; the counter only carries
// the tokens of acquisitions faster than one per microsecond, which the
// clock passes within microseconds. The one reader that needs it longer is
// an unlock's retry, which tells a re-entry after its own earlier attempt by
// the counter: it comes within the call timeout, hence the floor. A TTL
// shorter than the call timeout is raised to it. Nor does the counter
// expire while a hold of ours lives: every script that lengthens a lock's
// life (an acquisition, a re-entry, a renewal, Extend) makes the counter
// live at least as long as the lock, since a give-back of a lost hold tells by the counter whether a
// newer grant of its owner id came since (through another runtime).
//
// Why choose 0 (a permanent counter): for names that Redisson's
// RFencedLock also locks. RFencedLock takes its token by INCR of the same
// counter. Kept, the counter carries our clock-based value, so Java's tokens
// follow ours in one rising sequence. Expired, RFencedLock starts again at
// 1: its tokens then fall below ours and a resource fenced by both refuses
// its writes. The cost is one key per name ever locked.
func WithFencingCounterTTL(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid("fencing counter TTL %v is negative", d)
		}
		c.tokenTTL = d
	}
}

// defaultTokenTTL is WithFencingCounterTTL's default (see its doc).
const defaultTokenTTL = time.Minute

// fencingCounterTTL is the TTL the scripts set on fencing counters: 0 for a
// permanent counter, else at least the call timeout, which bounds the
// retries of an unlock that read the counter.
func (c *config) fencingCounterTTL() time.Duration {
	if c.tokenTTL == 0 {
		return 0
	}
	return max(c.tokenTTL, c.callTimeout)
}

// WithMaxHandoffs sets how many times in a row a lock released by a local
// holder may go straight to the next local waiter (one Redis call, nobody
// else woken) before it is released publicly so that waiters in other
// processes get their turn. 0 disables hand-offs. Default 8.
func WithMaxHandoffs(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.invalid("max hand-offs %d is negative", n)
		}
		c.handoffs = n
	}
}

// WithFairWaitTimeout sets how long the place of a fair-lock waiter without
// a wait time lasts after the one ahead of it when it joins the queue
// (Redisson's threadWaitTime; a waiter with WaitTime uses that, as Redisson's
// tryLock does). Such deadlines add up: dead waiters ahead of a live one
// would keep a free lock from it for the sum of theirs. So while a runtime
// lives it keeps its waiters' places about one watchdog lease ahead (see
// WithWatchdog), refreshed every third of a lease: the place of a waiter
// whose process died goes about a lease after the death, whatever this
// timeout. Waiters of Redisson clients keep Redisson's deadlines; `actorlock
// fair-drop` removes dead ones by hand. Default 5 min.
func WithFairWaitTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.invalid("fair wait timeout %v is not positive", d)
		}
		c.fairWait = d
	}
}

// WithReplicaSync makes every lock acquisition wait (Redis WAIT) until at
// least replicas replicas have it, for up to timeout: Redis replicates
// asynchronously, so without it a failover right after an acquisition can
// promote a replica that never saw the lock and let a second owner in. An
// acquisition fewer replicas confirm is undone and tried again (see
// WithReplicaSyncAttempts), then fails with ErrReplicaSync. Releases wait
// too, without failing. Use it with a client of one master (single node or
// Sentinel failover); keep timeout below the client's read timeout. Default:
// off.
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		if replicas <= 0 || timeout <= 0 {
			c.invalid("replica sync needs replicas and a timeout above 0, got %d and %v", replicas, timeout)
		}
		c.replicaSync.Replicas, c.replicaSync.Timeout = int64(replicas), timeout
	}
}

// WithReplicaSyncAttempts sets how many times an acquisition too few
// replicas confirmed is undone and tried again (after 20, 40, 80... ms)
// before it fails with ErrReplicaSync. Default 3.
func WithReplicaSyncAttempts(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.invalid("replica sync attempts %d is not positive", n)
		}
		c.replicaSync.Attempts = n
	}
}

// WithServerName names the Redis deployment the runtime uses, for the one
// global order in which MultiLocks and RedLocks take their members, and for
// RedLock's check that its members are on distinct servers. Every process
// must give a deployment the same name, and distinct deployments distinct
// names. Default: the address of a single-server client (so every process
// must spell it alike), the sorted seed addresses of a Cluster or Ring
// client. A Sentinel (failover) client has no default: go-redis does not
// tell its master name, and the master's address and run id change with a
// failover. Name it after the master, or a MultiLock or RedLock mixing its
// locks with another runtime's is refused with ErrInvalidArgument.
func WithServerName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.invalid("empty server name")
		}
		c.serverName = name
	}
}

// WithShardedPubSub says whether, with a cluster client, lock channels use
// sharded pub/sub (SPUBLISH in the scripts, SSUBSCRIBE with one connection
// per shard that has waiters), as Redisson does on Redis 7: a message then
// travels only within its shard instead of to every node of the cluster.
// Default: New asks the cluster whether it has it (Redis 7 or later). Plain
// pub/sub works on any cluster. Every process sharing locks must agree.
func WithShardedPubSub(on bool) Option {
	return func(c *config) { c.shardedPubSub = &on }
}

// WithMeterProvider records the runtime's metrics (see
// docs/observability.md: actorlock.acquire.duration, actorlock.held, ...) with
// meters of mp. Default: none recorded (a no-op provider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp == nil {
			c.invalid("nil meter provider")
		}
		c.meterProvider = mp
	}
}

// WithTracerProvider traces every Acquire, Unlock and queue Take and Offer
// with a span of tp's tracer, child of the caller's span. Whether or not it
// is given, the Redis calls made for a caller carry the caller's span (or
// Acquire's) in their context, so a go-redis tracing hook on the client
// nests its spans under it. Default: no spans.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp == nil {
			c.invalid("nil tracer provider")
		}
		c.tracerProvider = tp
	}
}

// WithEvents calls fn with every observe.Event of the runtime's locks: acquired,
// released, lost (with the reason), renewal failed (with the error), handed
// off, given up. Best effort: fn runs on one goroutine of the runtime, in
// order, never holding up a lock operation; events that find 1024 others
// waiting for fn are dropped (Stats.DroppedEvents counts them). Close delivers
// those still waiting before it returns. Default: none.
func WithEvents(fn func(observe.Event)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("nil events callback")
		}
		c.events = fn
	}
}

// LockOption configures a lock handle.
type LockOption func(*lockConfig)

type lockConfig struct {
	owner string
	err   error
}

// WithOwner makes every acquisition through the handle act as owner id,
// instead of an owner of its own: they re-enter each other, whatever their
// contexts, and so do those of other handles with the same owner (hold
// counts add up, each acquisition is released once), like one Redisson
// thread. An id of Redisson's form "<clientUUID>:<threadId>" acts as that
// Redisson thread. An owner id must be used by one runtime at a time.
func WithOwner(id string) LockOption {
	return func(c *lockConfig) {
		switch {
		case id == "":
			c.err = fmt.Errorf("%w: empty owner", ErrInvalidArgument)
		case len(id) > maxOwnerBytes:
			c.err = fmt.Errorf("%w: owner of %d bytes exceeds %d", ErrInvalidArgument, len(id), maxOwnerBytes)
		case id == scripts.HoldMarkField || id == "mode":
			c.err = fmt.Errorf("%w: owner %q is a field name the lock keeps for itself", ErrInvalidArgument, id)
		}
		c.owner = id
	}
}

// AcquireOption configures one acquisition.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	wait    time.Duration
	waitSet bool
	lease   time.Duration
	err     error
}

func acquireOptions(opts []AcquireOption) (acquireConfig, error) {
	var ac acquireConfig
	for _, o := range opts {
		if o == nil {
			ac.err = fmt.Errorf("%w: nil acquire option", ErrInvalidArgument)
			continue
		}
		o(&ac)
	}
	return ac, ac.err
}

// WaitTime bounds how long Acquire waits: when it is over, Acquire returns
// ErrNotAcquired. WaitTime(0) makes a single attempt. Default: wait until the
// context ends.
func WaitTime(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		if d < 0 {
			c.err = fmt.Errorf("%w: negative wait time %v", ErrInvalidArgument, d)
		}
		c.wait, c.waitSet = d, true
	}
}

// LeaseTime holds the lock for at most d, without the watchdog: if not
// unlocked by then, it expires in Redis and the Held is lost. d under 10 ms
// is refused with ErrInvalidArgument (it would expire before its grant
// could reach the caller). Default: the
// watchdog lease, renewed while held.
func LeaseTime(d time.Duration) AcquireOption {
	return func(c *acquireConfig) {
		switch {
		case d <= 0:
			c.err = fmt.Errorf("%w: lease time %v is not positive", ErrInvalidArgument, d)
		case d < actors.MinLease && !mutant.On(7):
			c.err = fmt.Errorf("%w: lease time %v is under %v: it would expire before a grant could reach the caller", ErrInvalidArgument, d, actors.MinLease)
		}
		c.lease = d
	}
}
