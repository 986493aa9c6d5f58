package actors

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/actorlock/actorlock/internal/sentinel"
	"github.com/actorlock/actorlock/messages"
)

// Validation of the protocol's requests, in one place: checkBounds bounds
// every field of every request generically; then one function per request
// type checks what it means. Remote actors are validated exactly like Go
// callers. The manager and the primitives actor call these, and refuse.

// Bounds on what a protocol message may carry. Every request reaches the
// runtime from actors it does not control (over protoactor remote, from
// another process), so every field is bounded before any of it is used:
// generically, by field kind and name, so that a field added to the
// protocol later is bounded too.
const (
	// maxFieldBytes bounds every string field but name: request ids (they
	// end up in Redis keys), owner tokens, permit ids.
	maxFieldBytes = 256
	// maxPayloadBytes bounds a bytes field (a queue item offered by
	// message). Larger items can be offered through the Go API.
	maxPayloadBytes = 1 << 20
	// maxDuration bounds every *_ms field: far beyond any sensible wait or
	// lease, far below where milliseconds overflow a time.Duration.
	maxDuration = 10 * 365 * 24 * time.Hour
)

// MinLease is the shortest lease a lock may be asked for (LeaseTime,
// lease_ms, Extend, the watchdog's). A lease shorter than the drift
// allowance plus a round trip to Redis expires before its grant's reply can
// arrive: every grant would come back too late, be given back and be tried
// again, a loop of scripts that never holds the lock.
const MinLease = 10 * time.Millisecond

// checkBounds reports why m cannot be served as it is: a field this
// runtime does not know (it could change the meaning of the request, say a
// newer ownership rule, which would be silently ignored), a string or bytes
// field over its bound, or a duration out of [0, maxDuration]. Field values
// are never quoted: a field may be someone's secret.
func checkBounds(m proto.Message) error {
	r := m.ProtoReflect()
	if len(r.GetUnknown()) > 0 {
		return fmt.Errorf("%w: %s carries fields this runtime does not know (a newer protocol?)", ErrInvalidArgument, r.Descriptor().Name())
	}
	var err error
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		switch fd.Kind() {
		case protoreflect.StringKind:
			limit := maxFieldBytes
			if name == "name" {
				limit = maxNameBytes
			}
			if n := len(v.String()); n > limit {
				err = fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrInvalidArgument, name, n, limit)
			}
		case protoreflect.BytesKind:
			if n := len(v.Bytes()); n > maxPayloadBytes {
				err = fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrInvalidArgument, name, n, maxPayloadBytes)
			}
		case protoreflect.Int64Kind:
			if ms := v.Int(); strings.HasSuffix(name, "_ms") && (ms < 0 || ms > maxDuration.Milliseconds()) {
				err = fmt.Errorf("%w: %s %d is out of [0, %d]", ErrInvalidArgument, name, ms, maxDuration.Milliseconds())
			}
		}
		return err == nil
	})
	return err
}

// refusal is the response that refuses request m with err, or nil when m
// is not a request this runtime answers (it is then dropped).
func refusal(m proto.Message, err error) proto.Message {
	switch m := m.(type) {
	case *messages.AcquireRequest:
		return &messages.AcquireResponse{RequestId: echoID(m.RequestId), Error: protoError(err)}
	case *messages.ReleaseRequest:
		return &messages.ReleaseResponse{RequestId: echoID(m.RequestId), Error: protoError(err)}
	case *messages.CancelRequest:
		return &messages.CancelResponse{RequestId: echoID(m.RequestId), Error: protoError(err)}
	case *messages.RenewRequest:
		return &messages.RenewResponse{RequestId: echoID(m.RequestId), Error: protoError(err)}
	case *messages.OfferRequest:
		return &messages.OfferResponse{RequestId: echoID(m.RequestId), Error: primitiveError(err)}
	case *messages.TakeRequest:
		return &messages.TakeResponse{RequestId: echoID(m.RequestId), Error: primitiveError(err)}
	case *messages.SemaphoreAcquireRequest:
		return &messages.SemaphoreAcquireResponse{RequestId: echoID(m.RequestId), Error: primitiveError(err)}
	case *messages.SemaphoreReleaseRequest:
		return &messages.SemaphoreReleaseResponse{RequestId: echoID(m.RequestId), Error: primitiveError(err)}
	}
	return nil
}

// echoID is the request id a refusal echoes: not one over its bound, which
// would make the runtime send back whatever a peer sent it.
func echoID(id string) string {
	if len(id) > maxFieldBytes {
		return ""
	}
	return id
}

// refuse answers request req with err, or drops it (logging why, never its
// content) when it is not a request this runtime answers or has no sender.
func refuse(ctx actor.Context, env *runtimeEnv, req proto.Message, err error) {
	resp := refusal(req, err)
	if resp == nil || ctx.Sender() == nil {
		env.Log.Warn("actorlock: dropped an invalid message",
			slog.String("type", string(req.ProtoReflect().Descriptor().FullName())), slog.Any("error", err))
		return
	}
	ctx.Respond(resp)
}

func validateSender(sender *actor.PID, name string) error {
	if sender == nil {
		return fmt.Errorf("%w: no sender; send requests with Context.Request", ErrInvalidArgument)
	}
	return ValidateName(name)
}

// validateWaiter checks the sender of a request that may wait or hold
// (Acquire, Take, SemaphoreAcquire), which the runtime watches: a future
// (RequestFuture) completes on the first message it gets, and the watch,
// a system message, would be that message, leaving the requester a
// *actor.Watch for its answer and the real one unread. protoactor names
// its futures "future$<n>" (an actor's own name has no reason to look so).
func validateWaiter(sender *actor.PID) error {
	if sender != nil && strings.HasPrefix(sender.GetId(), "future$") {
		return fmt.Errorf("%w: the sender is a future (RequestFuture), which would take the runtime's watch of it for its answer; send waits and acquisitions with Context.Request from an actor", ErrInvalidArgument)
	}
	return nil
}

// validateTarget checks what every lock message names.
func validateTarget(kind messages.Kind, name string, sender *actor.PID) error {
	if sender == nil {
		return fmt.Errorf("%w: no sender; send requests with Context.Request", ErrInvalidArgument)
	}
	switch kind {
	case messages.Kind_KIND_LOCK, messages.Kind_KIND_FAIR, messages.Kind_KIND_READ, messages.Kind_KIND_WRITE:
	default:
		return fmt.Errorf("%w: lock kind %v is not supported", ErrInvalidArgument, kind)
	}
	return ValidateName(name)
}

func validateAcquire(m *messages.AcquireRequest, sender *actor.PID) error {
	if err := validateTarget(m.Kind, m.Name, sender); err != nil {
		return err
	}
	if err := validateWaiter(sender); err != nil {
		return err
	}
	switch {
	case m.RequestId == "":
		return requestIDError()
	case m.WaitMs < 0:
		return fmt.Errorf("%w: negative wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.LeaseMs < 0:
		return fmt.Errorf("%w: negative lease_ms %d", ErrInvalidArgument, m.LeaseMs)
	case m.LeaseMs > 0 && time.Duration(m.LeaseMs)*time.Millisecond < MinLease:
		return fmt.Errorf("%w: lease_ms %d is under %v", ErrInvalidArgument, m.LeaseMs, MinLease)
	case m.WaitIndefinitely && m.WaitMs != 0:
		return fmt.Errorf("%w: wait_indefinitely with wait_ms %d", ErrInvalidArgument, m.WaitMs)
	//lint:ignore SA1019 the deprecated field is refused, not used
	case m.Owner != "":
		return ownerFieldError()
	case m.OwnerToken != "":
		return validateOwnerToken(m.OwnerToken)
	}
	return nil
}

// validateOwned checks a request of an owner (release, renew, cancel): its
// target, its request id and its owner token, which must be present
// (NOT_OWNER otherwise: only the owner may do this) and well-formed.
func validateOwned(kind messages.Kind, name, requestID, token string, sender *actor.PID) error {
	err := validateTarget(kind, name, sender)
	switch {
	case err != nil:
	case requestID == "":
		err = requestIDError()
	case token == "":
		err = fmt.Errorf("%w: no owner_token (only the owner of lock %s may do this; its token came in the AcquireResponse)", ErrNotOwner, sentinel.Quote(name))
	default:
		err = validateOwnerToken(token)
	}
	return err
}

// ownerFieldError refuses the deprecated owner field: naming an owner id
// would let any peer act as any owner.
func ownerFieldError() error {
	return fmt.Errorf("%w: the owner field is no longer accepted; ownership is proven by owner_token", ErrInvalidArgument)
}

// requestIDError is the error of a missing request id (the id of a release
// names its unlock latch in Redis; the others are echoed and de-duplicate).
func requestIDError() error { return fmt.Errorf("%w: empty request_id", ErrInvalidArgument) }

func validateOffer(m *messages.OfferRequest, sender *actor.PID) error {
	err := validateSender(sender, m.Name)
	switch {
	case err != nil:
	case m.RequestId == "":
		err = requestIDError()
	case m.DelayMs < 0:
		err = fmt.Errorf("%w: negative delay_ms %d", ErrInvalidArgument, m.DelayMs)
	}
	return err
}

func validateTake(m *messages.TakeRequest, sender *actor.PID) error {
	err := validateSender(sender, m.Name)
	if err == nil {
		err = validateWaiter(sender)
	}
	switch {
	case err != nil:
	case m.RequestId == "":
		err = requestIDError()
	case m.WaitMs < 0:
		err = fmt.Errorf("%w: negative wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.WaitIndefinitely && m.WaitMs != 0:
		err = fmt.Errorf("%w: wait_indefinitely with wait_ms %d", ErrInvalidArgument, m.WaitMs)
	}
	return err
}

func validateSemAcquire(m *messages.SemaphoreAcquireRequest, sender *actor.PID) error {
	err := validateSender(sender, m.Name)
	if err == nil {
		err = validateWaiter(sender)
	}
	switch {
	case err != nil:
	case m.RequestId == "":
		err = requestIDError()
	case m.WaitMs < 0:
		err = fmt.Errorf("%w: negative wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.WaitIndefinitely && m.WaitMs != 0:
		err = fmt.Errorf("%w: wait_indefinitely with wait_ms %d", ErrInvalidArgument, m.WaitMs)
	case m.LeaseMs < 0:
		err = fmt.Errorf("%w: negative lease_ms %d", ErrInvalidArgument, m.LeaseMs)
	case m.Expirable && m.Permits > 1:
		err = fmt.Errorf("%w: a permit-expirable semaphore grants one permit per request, not %d", ErrInvalidArgument, m.Permits)
	case !m.Expirable && m.Permits < 1:
		err = fmt.Errorf("%w: permits %d is not positive", ErrInvalidArgument, m.Permits)
	case !m.Expirable && m.LeaseMs != 0:
		err = fmt.Errorf("%w: lease_ms needs expirable", ErrInvalidArgument)
	}
	return err
}

func validateSemRelease(m *messages.SemaphoreReleaseRequest, sender *actor.PID) error {
	err := validateSender(sender, m.Name)
	switch {
	case err != nil:
	case m.RequestId == "":
		err = requestIDError()
	case m.Expirable && m.PermitId == "":
		err = fmt.Errorf("%w: empty permit_id", ErrInvalidArgument)
	case !m.Expirable && m.Permits < 1:
		err = fmt.Errorf("%w: permits %d is not positive", ErrInvalidArgument, m.Permits)
	}
	return err
}
