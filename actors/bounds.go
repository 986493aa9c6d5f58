package actors

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/actorlock/actorlock/messages"
)

// Bounds on what a protocol message may carry. Every request reaches the
// runtime from actors it does not control (over protoactor remote, from
// another process), so every field is bounded before any of it is used:
// generically, by field kind and name, so that a field added to the
// protocol later is bounded too.
const (
	// MaxFieldBytes bounds every string field but name: request ids (they
	// end up in Redis keys), owner tokens, permit ids.
	MaxFieldBytes = 256
	// MaxPayloadBytes bounds a bytes field (a queue item offered by
	// message). Larger items can be offered through the Go API.
	MaxPayloadBytes = 1 << 20
	// MaxDuration bounds every *_ms field: far beyond any sensible wait or
	// lease, far below where milliseconds overflow a time.Duration.
	MaxDuration = 10 * 365 * 24 * time.Hour
)

// checkBounds reports why m cannot be served as it is: a field this
// runtime does not know (it could change the meaning of the request, say a
// newer ownership rule, which would be silently ignored), a string or bytes
// field over its bound, or a duration out of [0, MaxDuration]. Field values
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
			limit := MaxFieldBytes
			if name == "name" {
				limit = MaxNameBytes
			}
			if n := len(v.String()); n > limit {
				err = fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrInvalidArgument, name, n, limit)
			}
		case protoreflect.BytesKind:
			if n := len(v.Bytes()); n > MaxPayloadBytes {
				err = fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrInvalidArgument, name, n, MaxPayloadBytes)
			}
		case protoreflect.Int64Kind:
			if ms := v.Int(); strings.HasSuffix(name, "_ms") && (ms < 0 || ms > MaxDuration.Milliseconds()) {
				err = fmt.Errorf("%w: %s %d is out of [0, %d]", ErrInvalidArgument, name, ms, MaxDuration.Milliseconds())
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
	if len(id) > MaxFieldBytes {
		return ""
	}
	return id
}
