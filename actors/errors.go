package actors

import (
	"errors"
	"fmt"
	"strings"

	"github.com/actorlock/actorlock/internal/sentinel"
	"github.com/actorlock/actorlock/messages"
)

// The sentinel errors of actorlock, as the actors return them. Package
// actorlock declares them as constants (its errors.go, where they are
// documented): the same type and text, so the same values for errors.Is.
var (
	ErrNotAcquired     error = sentinel.Error("actorlock: lock not acquired")
	ErrNotOwner        error = sentinel.Error("actorlock: not the lock owner")
	ErrLost            error = sentinel.Error("actorlock: lock lost")
	ErrClosed          error = sentinel.Error("actorlock: runtime closed")
	ErrInvalidArgument error = sentinel.Error("actorlock: invalid argument")
	ErrUnlocked        error = sentinel.Error("actorlock: already unlocked")
	ErrCanceled        error = sentinel.Error("actorlock: request cancelled")
	ErrUpgrade         error = sentinel.Error("actorlock: a read holder cannot take the write lock (upgrade)")
	ErrReplicaSync     error = sentinel.Error("actorlock: too few replicas confirmed the lock")
)

func lostError(reason string) error { return fmt.Errorf("%w: %s", ErrLost, reason) }

// maxNameBytes bounds a lock name: Redis keys may be huge, but a lock name
// this long is a bug, and every script call carries it several times.
const maxNameBytes = 64 << 10

// ValidateName reports why name cannot name a lock or another primitive,
// or nil.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidArgument)
	case len(name) > maxNameBytes:
		return fmt.Errorf("%w: name of %d bytes exceeds %d", ErrInvalidArgument, len(name), maxNameBytes)
	case strings.Contains(name, "{") && !hasHashTag(name):
		// Its auxiliary keys (prefix + ":" + name) would hash whole while
		// the name alone hashes differently: on a cluster they would land in
		// other slots than the lock key, and every script would fail.
		return fmt.Errorf("%w: name %s contains '{' but no non-empty {hash tag}", ErrInvalidArgument, sentinel.Quote(name))
	}
	return nil
}

// codeOf maps an error to the protocol's error code.
func codeOf(err error) messages.ErrorCode {
	switch {
	case err == nil:
		return messages.ErrorCode_ERROR_CODE_UNSPECIFIED
	case errors.Is(err, ErrNotAcquired):
		return messages.ErrorCode_ERROR_CODE_NOT_ACQUIRED
	case errors.Is(err, ErrNotOwner):
		return messages.ErrorCode_ERROR_CODE_NOT_OWNER
	case errors.Is(err, ErrLost):
		return messages.ErrorCode_ERROR_CODE_LOST
	case errors.Is(err, ErrClosed):
		return messages.ErrorCode_ERROR_CODE_CLOSED
	case errors.Is(err, ErrInvalidArgument):
		return messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT
	case errors.Is(err, ErrCanceled):
		return messages.ErrorCode_ERROR_CODE_CANCELED
	}
	return messages.ErrorCode_ERROR_CODE_UNAVAILABLE
}

func protoError(err error) *messages.Error {
	if err == nil {
		return nil
	}
	return &messages.Error{Code: codeOf(err), Message: sentinel.Clean(err)}
}
