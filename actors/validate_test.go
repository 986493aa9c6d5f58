package actors

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock/messages"
)

// TestValidateRequests runs every protobuf validator over a valid request
// and over each way of breaking it: the one place where requests are
// validated refuses each with the sentinel the protocol maps to its code.
func TestValidateRequests(t *testing.T) {
	from := actor.NewPID("peer:1", "requester")
	token := NewOwnerToken()
	lock := messages.Kind_KIND_LOCK
	cases := []struct {
		name  string
		check func(sender *actor.PID) error
		want  error // nil: valid
	}{
		{"acquire", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Name: "l", Kind: lock, RequestId: "1", WaitMs: 5}, s)
		}, nil},
		{"acquire own token", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Name: "l", Kind: lock, RequestId: "1", OwnerToken: token}, s)
		}, nil},
		{"acquire without request id", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Name: "l", Kind: lock}, s)
		}, ErrInvalidArgument},
		{"acquire of no kind", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Name: "l", RequestId: "1"}, s)
		}, ErrInvalidArgument},
		{"acquire of no name", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Kind: lock, RequestId: "1"}, s)
		}, ErrInvalidArgument},
		{"acquire waiting both ways", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Name: "l", Kind: lock, RequestId: "1", WaitMs: 5, WaitIndefinitely: true}, s)
		}, ErrInvalidArgument},
		{"acquire with a malformed token", func(s *actor.PID) error {
			return validateAcquire(&messages.AcquireRequest{Name: "l", Kind: lock, RequestId: "1", OwnerToken: "xyz"}, s)
		}, ErrInvalidArgument},
		{"owned", func(s *actor.PID) error { return validateOwned(lock, "l", "1", token, s) }, nil},
		{"owned without token", func(s *actor.PID) error { return validateOwned(lock, "l", "1", "", s) }, ErrNotOwner},
		{"owned without request id", func(s *actor.PID) error { return validateOwned(lock, "l", "", token, s) }, ErrInvalidArgument},
		{"offer", func(s *actor.PID) error {
			return validateOffer(&messages.OfferRequest{Name: "q", RequestId: "1", DelayMs: 10}, s)
		}, nil},
		{"offer without request id", func(s *actor.PID) error {
			return validateOffer(&messages.OfferRequest{Name: "q"}, s)
		}, ErrInvalidArgument},
		{"take", func(s *actor.PID) error {
			return validateTake(&messages.TakeRequest{Name: "q", RequestId: "1", WaitIndefinitely: true}, s)
		}, nil},
		{"take waiting both ways", func(s *actor.PID) error {
			return validateTake(&messages.TakeRequest{Name: "q", RequestId: "1", WaitMs: 1, WaitIndefinitely: true}, s)
		}, ErrInvalidArgument},
		{"semaphore acquire", func(s *actor.PID) error {
			return validateSemAcquire(&messages.SemaphoreAcquireRequest{Name: "s", RequestId: "1", Permits: 2}, s)
		}, nil},
		{"semaphore acquire of no permits", func(s *actor.PID) error {
			return validateSemAcquire(&messages.SemaphoreAcquireRequest{Name: "s", RequestId: "1"}, s)
		}, ErrInvalidArgument},
		{"semaphore acquire with a lease, not expirable", func(s *actor.PID) error {
			return validateSemAcquire(&messages.SemaphoreAcquireRequest{Name: "s", RequestId: "1", Permits: 1, LeaseMs: 5}, s)
		}, ErrInvalidArgument},
		{"expirable acquire of two", func(s *actor.PID) error {
			return validateSemAcquire(&messages.SemaphoreAcquireRequest{Name: "s", RequestId: "1", Permits: 2, Expirable: true}, s)
		}, ErrInvalidArgument},
		{"semaphore release", func(s *actor.PID) error {
			return validateSemRelease(&messages.SemaphoreReleaseRequest{Name: "s", RequestId: "1", Permits: 1}, s)
		}, nil},
		{"expirable release without permit id", func(s *actor.PID) error {
			return validateSemRelease(&messages.SemaphoreReleaseRequest{Name: "s", RequestId: "1", Expirable: true}, s)
		}, ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.check(from)
			if c.want == nil {
				assert.NoError(t, err)
				// Whatever is valid from a sender is refused without one:
				// nobody could be answered.
				assert.ErrorIs(t, c.check(nil), ErrInvalidArgument)
				return
			}
			assert.ErrorIs(t, err, c.want)
		})
	}
}

// TestCheckBounds: every field is bounded by kind, before any is used.
func TestCheckBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		msg  proto.Message
		ok   bool
	}{
		{"plain", &messages.AcquireRequest{Name: "l", RequestId: "1", WaitMs: 1000}, true},
		{"long name", &messages.AcquireRequest{Name: strings.Repeat("n", maxNameBytes+1)}, false},
		{"long request id", &messages.ReleaseRequest{RequestId: strings.Repeat("r", maxFieldBytes+1)}, false},
		{"big payload", &messages.OfferRequest{Payload: make([]byte, maxPayloadBytes+1)}, false},
		{"negative duration", &messages.TakeRequest{WaitMs: -1}, false},
		{"huge duration", &messages.SemaphoreAcquireRequest{LeaseMs: maxDuration.Milliseconds() + 1}, false},
	} {
		err := checkBounds(c.msg)
		if c.ok {
			assert.NoError(t, err, c.name)
		} else {
			assert.ErrorIs(t, err, ErrInvalidArgument, c.name)
		}
	}
}
