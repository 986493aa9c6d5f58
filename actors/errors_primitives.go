package actors

import (
	"errors"

	"github.com/actorlock/actorlock/internal/sentinel"
	"github.com/actorlock/actorlock/messages"
)

// Sentinel errors of the queues, semaphores and latches; package actorlock
// declares the same constants.
var (
	// ErrPermitExpired: a permit of a permit-expirable semaphore was
	// released or renewed after its lease ran out (it went back to the pool
	// when it expired, or at this release), or it was not held at all.
	ErrPermitExpired error = sentinel.Error("actorlock: permit expired")
)

// primitiveError maps an error of the primitives to the protocol: an expired
// permit is a lease that ran out, as a lost lock.
func primitiveError(err error) *messages.Error {
	if errors.Is(err, ErrPermitExpired) {
		return &messages.Error{Code: messages.ErrorCode_ERROR_CODE_LOST, Message: sentinel.Clean(err)}
	}
	return protoError(err)
}
