package actorlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/observe"
)

// maxOwnerBytes bounds the owner id of a Go handle (WithOwner).
const maxOwnerBytes = 1 << 10

// Runtime is one process's access to one Redis deployment: it owns the
// actors that serve every lock of the process. It is safe for concurrent use.
// Close it to release what it holds and stop everything it runs. A nil
// Runtime, or one New did not make, refuses every call with
// ErrInvalidArgument, and so do the handles it gives (its ID is "", Held
// lists nothing).
type Runtime struct {
	rdb       redis.UniversalClient
	sys       *actor.ActorSystem
	ownSystem bool
	actors    *actors.Handle
	id        string
	watchdog  time.Duration
	// stopServer stops what remoting.WithRemote started; Close calls it.
	stopServer func(context.Context) error
	gateway    *actor.PID // the runtime's PID under its name (actorkit.NamedPID)
	keyPrefix  string     // WithKeyPrefix
	server     string     // the deployment's name in the order of group members (group.go); "": none
	named      bool       // server is WithServerName's
	db         int        // the database number, beside server
	noRecord   bool       // WithRuntimeRecord(false)
	tel        *telemetry // metrics, spans, events, Held (telemetry.go)
	// core is the runtime as package primitive's handles see it.
	core *core.Runtime

	owners  atomic.Uint64 // owner ids of handles
	acquire atomic.Uint64 // ids of acquisitions

	closed    atomic.Bool
	done      chan struct{} // closed once the actors have stopped
	closeOnce sync.Once
	closeErr  error
}

// New starts a runtime on rdb, which it uses but never closes. rdb may be any
// go-redis client: single node, failover (Sentinel) or cluster.
func New(rdb redis.UniversalClient, opts ...Option) (_ *Runtime, err error) {
	defer failed("new", "", &err)
	cfg, err := newConfig(rdb, opts)
	if err != nil {
		return nil, err
	}
	cluster, err := setupCluster(rdb, &cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tel, err := newTelemetry(&cfg)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{rdb: rdb, sys: cfg.system, id: newUUID(), watchdog: cfg.watchdog, keyPrefix: cfg.keyPrefix, noRecord: cfg.noRecord, done: make(chan struct{}), tel: tel}
	rt.server, rt.db = deployment(rdb, cfg.serverName)
	rt.named = cfg.serverName != ""
	if rt.sys == nil {
		rt.sys, rt.ownSystem = newSystem(logger), true
	}
	name := cfg.name
	if cfg.server != nil {
		// Before the actors, so that their PIDs carry the node's address.
		if err := rt.startServer(cfg.server); err != nil {
			rt.sys.Shutdown()
			return nil, err
		}
		if name == "" {
			name = cfg.server.Name
		}
	}
	tel.startEvents(cfg.events)
	rt.actors = actors.Start(actorsConfig(rt, &cfg, cluster, logger))
	rt.core = core.New(rt.actors, rdb, primitiveObs{tel}, &rt.closed, rt.done, &rt.acquire)
	if err := tel.observeSubscriptions(cfg.meterProvider, rt); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return nil, joinCauses(err, rt.Close(ctx))
	}
	if name != "" {
		if err := rt.spawnGateway(name); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// newConfig checks New's arguments and applies its options.
func newConfig(rdb redis.UniversalClient, opts []Option) (config, error) {
	cfg := defaultConfig()
	if rdb == nil || (reflect.ValueOf(rdb).Kind() == reflect.Pointer && reflect.ValueOf(rdb).IsNil()) {
		return cfg, fmt.Errorf("%w: nil Redis client", ErrInvalidArgument)
	}
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: nil option", ErrInvalidArgument)
		}
		o(&cfg)
	}
	if cfg.err != nil {
		return cfg, cfg.err
	}
	if cfg.server != nil && cfg.system != nil {
		return cfg, fmt.Errorf("%w: remoting.WithRemote starts remote on the runtime's own actor system; with actorkit.WithActorSystem, start remote on yours (remoting.Options) and name the runtime's PID with actorkit.WithName", ErrInvalidArgument)
	}
	return cfg, nil
}

// newSystem is the runtime's own actor system, when the user gives none.
func newSystem(logger *slog.Logger) *actor.ActorSystem {
	quiet := slog.New(infoAsDebug{logger.Handler()})
	return actor.NewActorSystem(
		// protoactor logs at INFO to stderr by default; a library must not,
		// nor tell a service's INFO log of its start-up ("actor system
		// started", on every New): its INFO is our DEBUG.
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		// Each dead letter (a message to an actor that has stopped) opens
		// a throttling period served by a goroutine; keep it short so
		// none outlives Close by more than a few milliseconds.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
}

// infoAsDebug logs protoactor's INFO records (its start, its stops) at
// DEBUG; warnings and errors keep their level.
type infoAsDebug struct{ slog.Handler }

func (h infoAsDebug) Enabled(ctx context.Context, level slog.Level) bool {
	return h.Handler.Enabled(ctx, demoted(level))
}

func (h infoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demoted(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h infoAsDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return infoAsDebug{h.Handler.WithAttrs(attrs)}
}

func (h infoAsDebug) WithGroup(name string) slog.Handler {
	return infoAsDebug{h.Handler.WithGroup(name)}
}

func demoted(l slog.Level) slog.Level {
	if l >= slog.LevelInfo && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func actorsConfig(rt *Runtime, cfg *config, cluster clusterSetup, logger *slog.Logger) actors.Config {
	return actors.Config{
		System:      rt.sys,
		Redis:       cluster.scripts,
		Log:         logger,
		RuntimeID:   rt.id,
		Watchdog:    cfg.watchdog,
		IdleAfter:   cfg.idleAfter,
		CallTimeout: cfg.callTimeout,
		// Without it, each lock script call costs a goroutine, so that the
		// call timeout still holds.
		ClientEndsCalls: endsCallsWithContext(rt.rdb),
		TokenTTL:        cfg.fencingCounterTTL(),
		MaxHandoffs:     cfg.handoffs,
		FairWait:        cfg.fairWait,
		ReplicaSync:     cfg.replicaSync,
		Cluster:         cluster.cc,
		ShardedPubSub:   cluster.sharded,
		KeyPrefix:       cfg.keyPrefix,
		Observe:         rt.tel.observer(),
		Record:          runtimeRecord(rt.id, cfg),
	}
}

// spawnGateway registers the runtime's PID under name; on failure the
// runtime is closed.
func (rt *Runtime) spawnGateway(name string) error {
	gw, err := actors.SpawnGateway(rt.sys, name, rt.actors.Manager())
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return joinCauses(err, rt.Close(ctx))
	}
	rt.gateway = gw
	return nil
}

// valid reports whether rt is a runtime New made: a nil or zero Runtime
// is refused by every method with ErrInvalidArgument, and so are the
// handles it gives.
func (rt *Runtime) valid() bool { return rt != nil && rt.actors != nil }

// errNoRuntime refuses the calls of a nil Runtime, or one New did not make.
var errNoRuntime error = fmt.Errorf("%w: nil Runtime, or one not made by New", ErrInvalidArgument)

// errNilHandle refuses the calls of a nil handle of type what, or one no
// Runtime made.
func errNilHandle(what string) error {
	return fmt.Errorf("%w: nil %s, or one not made by a Runtime", ErrInvalidArgument, what)
}

// ID is the runtime's random UUID: owner ids of its lock handles are
// "<ID>:<n>", as Redisson's are "<client UUID>:<thread id>". "" for a nil
// Runtime.
func (rt *Runtime) ID() string {
	if rt == nil {
		return ""
	}
	return rt.id
}

// Close releases every lock the runtime holds (its Helds end with ErrClosed),
// fails every pending request with ErrClosed, stops every actor, timer and
// goroutine of the runtime and waits for them, up to ctx, and stops the
// remote that remoting.WithRemote started. Items and permits that calls
// still out took for callers who will not have them go back first: Close
// waits for that too, up to ctx and three call timeouts at most. It does not close the Redis client, nor
// an actor system given with actorkit.WithActorSystem (nor its remote). Calling
// Close again returns the first call's result.
func (rt *Runtime) Close(ctx context.Context) (err error) {
	defer failed("close", "", &err)
	if !rt.valid() {
		return errNoRuntime
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	rt.closeOnce.Do(func() {
		rt.closed.Store(true)
		drainErr := rt.actors.Drain(ctx)
		stopErr := rt.actors.Stop(ctx)
		// After the actors, whose last refresh of the record has run: it
		// would otherwise outlive the runtime by up to its TTL.
		if !rt.noRecord {
			rt.deleteRecord(ctx)
		}
		var gwErr, remoteErr error
		if rt.gateway != nil {
			if err := rt.sys.Root.StopFuture(rt.gateway).Wait(); err != nil {
				gwErr = fmt.Errorf("stopping the named PID: %w", err)
			}
		}
		close(rt.done)
		if rt.stopServer != nil {
			// After the actors: their last replies and LockLosts to remote
			// owners go out through it.
			remoteErr = rt.stopServer(ctx)
		}
		if rt.ownSystem {
			rt.sys.Shutdown()
		}
		rt.closeErr = joinCauses(drainErr, stopErr, gwErr, remoteErr, rt.tel.close(ctx))
	})
	return rt.closeErr
}

// Stats reports what the runtime keeps now, for metrics and leak checks.
// After Close it returns ErrClosed, with DroppedEvents still counted.
func (rt *Runtime) Stats(ctx context.Context) (observe.Stats, error) {
	if !rt.valid() {
		return observe.Stats{}, errNoRuntime
	}
	if ctx == nil {
		return observe.Stats{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	s, err := rt.actors.Stats(ctx)
	return observe.Stats{
		LockActors: s.LockActors, DormantLocks: s.DormantLocks, Subscriptions: s.Subscriptions, Renewals: s.Renewals,
		DelayedQueueMovers: s.DelayedQueueMovers, PrimitiveActors: s.PrimitiveActors, DroppedEvents: rt.tel.events.droppedCount(),
	}, err
}

// Lock returns a handle on the reentrant lock name (Redisson's RLock). The
// handle may be shared like a sync.Mutex: acquisitions through it exclude
// each other, except one whose ctx descends from a Held.Context() of this
// lock, which re-enters that hold (hold count 2). A bad name or option is
// reported by the handle's methods as ErrInvalidArgument.
func (rt *Runtime) Lock(name string, opts ...LockOption) *Lock {
	return rt.lock(messages.Kind_KIND_LOCK, name, opts)
}

// FairLock returns a handle on the fair lock name (Redisson's RFairLock):
// waiters acquire in the order they started waiting, across processes.
// Reentrancy, leases and the watchdog are as for Lock; TryAcquire never
// joins the queue. The fair lock and the reentrant lock of one name share
// its Redis hash, which does not tell them apart: on one name they exclude
// each other, and the fair lock's order does not bind the reentrant lock
// (the one exception among locks to one kind per name, see ErrWrongKind).
//
// A waiter that gives up (its wait time or ctx ends) returns once it has
// left the Redis queue, as Redisson's tryLock does; a Redis that does not
// answer delays that return by the call timeout at most. While it waits,
// its runtime keeps its place alive, so the place of a waiter whose process
// died goes about a watchdog lease later (see WithFairWaitTimeout).
func (rt *Runtime) FairLock(name string, opts ...LockOption) *Lock {
	return rt.lock(messages.Kind_KIND_FAIR, name, opts)
}

// ReadWriteLock returns a handle on the read-write lock name (Redisson's
// RReadWriteLock): many readers, or one writer. Acquisitions exclude each
// other as for Lock; one whose ctx descends from a write hold's
// Held.Context() acts as that writer, and may also read (a downgrade:
// releasing the write leaves the read held), while one descending from a
// read hold's may not take the write lock (an upgrade would deadlock) and
// gets ErrUpgrade.
//
// A reader gets the lock whenever no other owner writes, even while writers
// wait, as with Redisson, and the same for readers of this runtime and of
// others: readers that keep overlapping can keep a writer waiting. A write
// re-entry adds its lease to the lock's remaining TTL, as Redisson's does.
func (rt *Runtime) ReadWriteLock(name string, opts ...LockOption) *ReadWriteLock {
	read := rt.lock(messages.Kind_KIND_READ, name, opts)
	write := *read
	write.key.Kind = messages.Kind_KIND_WRITE
	return &ReadWriteLock{read: read, write: &write}
}

func (rt *Runtime) lock(kind messages.Kind, name string, opts []LockOption) *Lock {
	if !rt.valid() {
		return &Lock{key: actors.LockKey{Kind: kind, Name: name}, err: errNoRuntime}
	}
	name = rt.mapName(name)
	l := &Lock{rt: rt, key: actors.LockKey{Kind: kind, Name: name}}
	var lc lockConfig
	for _, o := range opts {
		if o == nil {
			lc.err = fmt.Errorf("%w: nil lock option", ErrInvalidArgument)
			continue
		}
		o(&lc)
	}
	l.err = joinCauses(actors.ValidateName(name), lc.err)
	l.owner = lc.owner
	return l
}

// newOwner is a new owner id, "<runtime id>:<n>" like Redisson's
// "<client id>:<thread id>".
func (rt *Runtime) newOwner() string {
	return rt.id + ":" + strconv.FormatUint(rt.owners.Add(1), 10)
}

func (rt *Runtime) send(msg any) { rt.sys.Root.Send(rt.actors.Manager(), msg) }

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// endsCallsWithContext reports whether rdb ends a command when its context
// ends: go-redis clients do so only with ContextTimeoutEnabled (otherwise
// their read timeout ends it). A client of another type is not trusted to.
func endsCallsWithContext(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}
