package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// SvcKind is the family of object a services child serves.
type SvcKind int

const (
	SvcDelayed   SvcKind = iota + 1 // delayed queue: its mover
	SvcQueue                        // blocking queue: its Take waiters
	SvcSemaphore                    // semaphore: its Acquire waiters
	SvcExpirable                    // permit-expirable semaphore
	SvcLatch                        // count-down latch: its Await waiters
)

// SvcKey names what one services child serves.
type SvcKey struct {
	Kind SvcKind
	Name string
}

// svcRouted marks the Go commands the services actor routes to a child.
type svcRouted interface {
	svcKey() SvcKey
	// starts: whether the command may spawn the child; commands that refer
	// to a child's state (cancels, closes) are dropped when there is none.
	starts() bool
}

// The Go commands package actorlock sends to the services actor. Replies
// travel on channels buffered for exactly one reply.
type (
	// DelayedOpen registers a handle of delayed queue Name: its mover runs
	// while a handle is open or items are pending.
	DelayedOpen struct{ Name string }
	// DelayedClose unregisters one handle.
	DelayedClose struct{ Name string }

	// Take waits for the head of list Name.
	Take struct {
		Name  string
		ID    uint64
		Reply chan<- TakeResult
	}
	// TakeCancel abandons Take ID, which is answered (ErrCanceled, or the
	// item if that came first: the caller must then give it back).
	TakeCancel struct {
		Name string
		ID   uint64
	}

	// SemAcquire takes N permits of semaphore Name (Expirable: of the
	// permit-expirable semaphore, for Lease; 0 never expires).
	SemAcquire struct {
		Name      string
		Expirable bool
		ID        uint64
		N         int64
		Lease     time.Duration
		TryOnce   bool
		Reply     chan<- SemResult
	}
	// SemCancel abandons SemAcquire ID, answered like TakeCancel.
	SemCancel struct {
		Name      string
		Expirable bool
		ID        uint64
	}

	// Await waits for latch Name's count to be zero.
	Await struct {
		Name  string
		ID    uint64
		Reply chan<- error
	}
	// AwaitCancel abandons Await ID (not answered: nothing to give back).
	AwaitCancel struct {
		Name string
		ID   uint64
	}
)

// TakeResult answers Take.
type TakeResult struct {
	Value []byte
	OK    bool // an item was taken (false: a single attempt found none)
	Err   error
}

// SemResult answers SemAcquire.
type SemResult struct {
	Acquired  bool
	PermitIDs []string // expirable only: one per permit
	Expiry    int64    // expirable only: server clock, Unix ms
	Err       error
}

func semKind(expirable bool) SvcKind {
	if expirable {
		return SvcExpirable
	}
	return SvcSemaphore
}

func (m *DelayedOpen) svcKey() SvcKey  { return SvcKey{SvcDelayed, m.Name} }
func (m *DelayedClose) svcKey() SvcKey { return SvcKey{SvcDelayed, m.Name} }
func (m *Take) svcKey() SvcKey         { return SvcKey{SvcQueue, m.Name} }
func (m *TakeCancel) svcKey() SvcKey   { return SvcKey{SvcQueue, m.Name} }
func (m *SemAcquire) svcKey() SvcKey   { return SvcKey{semKind(m.Expirable), m.Name} }
func (m *SemCancel) svcKey() SvcKey    { return SvcKey{semKind(m.Expirable), m.Name} }
func (m *Await) svcKey() SvcKey        { return SvcKey{SvcLatch, m.Name} }
func (m *AwaitCancel) svcKey() SvcKey  { return SvcKey{SvcLatch, m.Name} }

func (*DelayedOpen) starts() bool  { return true }
func (*DelayedClose) starts() bool { return false }
func (*Take) starts() bool         { return true }
func (*TakeCancel) starts() bool   { return false }
func (*SemAcquire) starts() bool   { return true }
func (*SemCancel) starts() bool    { return false }
func (*Await) starts() bool        { return true }
func (*AwaitCancel) starts() bool  { return false }

// Services is the services actor's PID, where package actorlock sends the
// Go commands above.
func (h *Handle) Services() *actor.PID { return h.env.services }

// RetryUnknown runs a call whose outcome may be unknown after a failure,
// re-attempting as the lock actors do; the call must be safe to repeat.
func RetryUnknown(ctx context.Context, call func(ctx context.Context, attempt int) error) error {
	return retryUnknown(ctx, call)
}

// services serves the protocol's non-lock objects: it routes Go commands and
// protobuf messages by (kind, name) to a child actor it spawns on demand (a
// delayed queue's mover, a blocking queue's or a semaphore's waiters, a
// latch's awaiters) and stops children that report idle, exactly as the lock
// manager does with lock actors. Requests that need no waiting (a plain
// offer, a release) run as a call of their own, answered from it.
type services struct {
	env      *Env
	children children[SvcKey]
}

func newServices(env *Env) *services {
	s := &services{env: env, children: newChildren[SvcKey]()}
	s.children.class = func(k SvcKey) int {
		if k.Kind == SvcDelayed {
			return 0
		}
		return 1
	}
	return s
}

// childIdle is a child's report that it has processed everything routed to
// it and holds nothing: stopping it now loses nothing.
type childIdle struct {
	key    SvcKey
	pid    *actor.PID
	routed uint64
}

// servicesStats asks the services actor for its counts.
type servicesStats struct{ reply chan<- [2]int }

func (s *services) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case svcRouted:
		if s.children.get(m.svcKey()) != nil || m.starts() {
			s.route(ctx, m.svcKey())
		}
	case *messages.OfferRequest:
		s.offer(ctx, m)
	case *messages.TakeRequest:
		s.routeChecked(ctx, SvcKey{SvcQueue, m.Name}, validateTake(m), func(err error) proto.Message {
			return &messages.TakeResponse{RequestId: m.RequestId, Error: primitiveError(err)}
		})
	case *messages.SemaphoreAcquireRequest:
		s.routeChecked(ctx, SvcKey{semKind(m.Expirable), m.Name}, validateSemAcquire(m), func(err error) proto.Message {
			return &messages.SemaphoreAcquireResponse{RequestId: m.RequestId, Error: primitiveError(err)}
		})
	case *messages.SemaphoreReleaseRequest:
		s.release(ctx, m)
	case *messages.CancelWaitRequest:
		var kind SvcKind
		switch m.Kind {
		case messages.WaitKind_WAIT_KIND_TAKE:
			kind = SvcQueue
		case messages.WaitKind_WAIT_KIND_SEMAPHORE:
			kind = SvcSemaphore
		case messages.WaitKind_WAIT_KIND_EXPIRABLE_SEMAPHORE:
			kind = SvcExpirable
		}
		// Nothing pending means nothing to cancel, and nobody to answer.
		if key := (SvcKey{kind, m.Name}); s.children.get(key) != nil && ctx.Sender() != nil {
			s.route(ctx, key)
		}
	case *childIdle:
		if pid := s.children.idle(m.key, m.pid, m.routed); pid != nil {
			ctx.Stop(pid)
		}
	case *actor.Terminated:
		s.children.terminated(m.Who)
	case *servicesStats:
		m.reply <- s.children.counts
	}
}

func (s *services) route(ctx actor.Context, key SvcKey) {
	c := s.children.route(key, func() *actor.PID {
		return ctx.Spawn(props(func() actor.Actor { return s.newChild(key) }))
	})
	ctx.Forward(c.pid)
}

func (s *services) newChild(key SvcKey) actor.Actor {
	switch key.Kind {
	case SvcDelayed:
		return newMover(s.env, key)
	case SvcQueue:
		return newQueueActor(s.env, key)
	case SvcSemaphore, SvcExpirable:
		return newSemaphoreActor(s.env, key)
	default:
		return newLatchActor(s.env, key)
	}
}

// routeChecked routes a validated protobuf request, or answers why not.
func (s *services) routeChecked(ctx actor.Context, key SvcKey, err error, refusal func(error) proto.Message) {
	if err == nil {
		err = validateSender(ctx.Sender(), key.Name)
	}
	if err == nil {
		s.route(ctx, key)
		return
	}
	s.refuse(ctx, refusal(err))
}

func (s *services) refuse(ctx actor.Context, resp proto.Message) {
	if ctx.Sender() == nil {
		s.env.Log.Warn("actorlock: dropped an invalid request without a sender to answer", slog.Any("response", resp))
		return
	}
	ctx.Respond(resp)
}

// offer: a delayed offer belongs to the queue's mover (which must run to
// deliver it); an immediate one is a push.
func (s *services) offer(ctx actor.Context, m *messages.OfferRequest) {
	err := validateSender(ctx.Sender(), m.Name)
	switch {
	case err != nil:
	case m.RequestId == "":
		err = fmt.Errorf("%w: empty request_id", ErrInvalidArgument)
	case m.DelayMs < 0:
		err = fmt.Errorf("%w: negative delay_ms %d", ErrInvalidArgument, m.DelayMs)
	}
	if err != nil {
		s.refuse(ctx, &messages.OfferResponse{RequestId: m.RequestId, Error: primitiveError(err)})
		return
	}
	if m.DelayMs > 0 {
		s.route(ctx, SvcKey{SvcDelayed, m.Name})
		return
	}
	env, from := s.env, ctx.Sender()
	// The marker id must differ between senders that reuse request ids.
	reqID := env.RuntimeID + ":" + pidKey(from) + ":" + m.RequestId
	env.goCall(nil, func(ctx context.Context) any {
		err := retryUnknown(ctx, func(ctx context.Context, _ int) error {
			_, err := scripts.Push(ctx, env.Redis, m.Name, m.Payload, reqID, env.CallTimeout)
			return err
		})
		if err != nil {
			err = fmt.Errorf("actorlock: offer to %q: %w", m.Name, err)
		}
		env.System.Root.Send(from, &messages.OfferResponse{RequestId: m.RequestId, Error: primitiveError(err)})
		return nil
	})
}

// release runs a semaphore release as a call of its own: nothing waits.
func (s *services) release(ctx actor.Context, m *messages.SemaphoreReleaseRequest) {
	err := validateSender(ctx.Sender(), m.Name)
	switch {
	case err != nil:
	case m.RequestId == "":
		err = fmt.Errorf("%w: empty request_id", ErrInvalidArgument)
	case m.Expirable && m.PermitId == "":
		err = fmt.Errorf("%w: empty permit_id", ErrInvalidArgument)
	case !m.Expirable && m.Permits < 1:
		err = fmt.Errorf("%w: permits %d is not positive", ErrInvalidArgument, m.Permits)
	}
	if err != nil {
		s.refuse(ctx, &messages.SemaphoreReleaseResponse{RequestId: m.RequestId, Error: primitiveError(err)})
		return
	}
	env, from := s.env, ctx.Sender()
	mark := scripts.Marked{RequestID: env.RuntimeID + ":" + pidKey(from) + ":" + m.RequestId, TTL: env.CallTimeout}
	env.goCall(nil, func(ctx context.Context) any {
		var err error
		if m.Expirable {
			err = ReleasePermit(ctx, env, m.Name, []string{m.PermitId}, mark)
		} else {
			err = ReleasePermits(ctx, env, m.Name, m.Permits, mark)
		}
		env.System.Root.Send(from, &messages.SemaphoreReleaseResponse{RequestId: m.RequestId, Released: err == nil, Error: primitiveError(err)})
		return nil
	})
}

// ReleasePermits adds n permits back to semaphore name, re-attempting while
// the outcome is unknown (the marker makes that safe).
func ReleasePermits(ctx context.Context, env *Env, name string, n int64, mark scripts.Marked) error {
	err := retryUnknown(ctx, func(ctx context.Context, _ int) error {
		_, err := scripts.AddPermits(ctx, env.Redis, name, n, mark)
		return err
	})
	if err != nil {
		return fmt.Errorf("actorlock: release %d permits of %q: %w", n, name, err)
	}
	return nil
}

// ReleasePermit releases permits ids of permit-expirable semaphore name:
// every one still recorded returns to the pool; ErrPermitExpired when any
// had run out of lease or was not held, ErrInvalidArgument for a malformed
// id (checked before anything is released).
func ReleasePermit(ctx context.Context, env *Env, name string, ids []string, mark scripts.Marked) error {
	if err := ValidatePermitIDs(ids); err != nil {
		return err
	}
	var res scripts.PermitRelease
	err := retryUnknown(ctx, func(ctx context.Context, _ int) (err error) {
		res, err = scripts.ReleaseExpirablePermits(ctx, env.Redis, name, ids, mark)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("actorlock: release permits %q of %q: %w", ids, name, err)
	case res.Expired+res.Unknown > 0:
		return fmt.Errorf("%w: permits %q of %q: %d had expired, %d were not held, %d released in time",
			ErrPermitExpired, ids, name, res.Expired, res.Unknown, res.Released)
	}
	return nil
}

// Env is the runtime's shared state, for package actorlock's direct calls.
func (h *Handle) Env() *Env { return h.env }

func validateSender(sender *actor.PID, name string) error {
	if sender == nil {
		return fmt.Errorf("%w: no sender; send requests with Context.Request", ErrInvalidArgument)
	}
	return ValidateName(name)
}

func validateTake(m *messages.TakeRequest) error {
	switch {
	case m.RequestId == "":
		return fmt.Errorf("%w: empty request_id", ErrInvalidArgument)
	case m.WaitMs < 0:
		return fmt.Errorf("%w: negative wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.WaitIndefinitely && m.WaitMs != 0:
		return fmt.Errorf("%w: wait_indefinitely with wait_ms %d", ErrInvalidArgument, m.WaitMs)
	}
	return nil
}

func validateSemAcquire(m *messages.SemaphoreAcquireRequest) error {
	switch {
	case m.RequestId == "":
		return fmt.Errorf("%w: empty request_id", ErrInvalidArgument)
	case m.WaitMs < 0:
		return fmt.Errorf("%w: negative wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.WaitIndefinitely && m.WaitMs != 0:
		return fmt.Errorf("%w: wait_indefinitely with wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.LeaseMs < 0:
		return fmt.Errorf("%w: negative lease_ms %d", ErrInvalidArgument, m.LeaseMs)
	case m.Expirable && m.Permits > 1:
		return fmt.Errorf("%w: a permit-expirable semaphore grants one permit per request, not %d", ErrInvalidArgument, m.Permits)
	case !m.Expirable && m.Permits < 1:
		return fmt.Errorf("%w: permits %d is not positive", ErrInvalidArgument, m.Permits)
	case !m.Expirable && m.LeaseMs != 0:
		return fmt.Errorf("%w: lease_ms needs expirable", ErrInvalidArgument)
	}
	return nil
}

// isSvcRouted tells a child which messages the services actor counted when
// forwarding them (the idle handshake compares the counts).
func isSvcRouted(msg any) bool {
	switch msg.(type) {
	case svcRouted, *messages.OfferRequest, *messages.TakeRequest,
		*messages.SemaphoreAcquireRequest, *messages.CancelWaitRequest:
		return true
	}
	return false
}

// randomID is 8 random bytes (a delayed item's id).
func randomID() [8]byte {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return b
}

// NewDelayMember encodes value as a delayed-queue member with a fresh id.
func NewDelayMember(value []byte) string { return scripts.DelayMember(randomID(), value) }

// newPermitID is a permit id as Redisson makes them: 16 random bytes, hex.
func newPermitID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
