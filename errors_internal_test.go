package actorlock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/inspect"
)

// The sentinels this package declares are the very values the actors and
// internal/inspect return, and its constants their bounds: a text or a
// value changed on one side only fails here.
func TestSentinelsAreTheMachinerysOwn(t *testing.T) {
	for _, c := range []struct {
		name        string
		root, inner error
	}{
		{"ErrNotAcquired", ErrNotAcquired, actors.ErrNotAcquired},
		{"ErrNotOwner", ErrNotOwner, actors.ErrNotOwner},
		{"ErrLost", ErrLost, actors.ErrLost},
		{"ErrClosed", ErrClosed, actors.ErrClosed},
		{"ErrInvalidArgument", ErrInvalidArgument, actors.ErrInvalidArgument},
		{"ErrUnlocked", ErrUnlocked, actors.ErrUnlocked},
		{"ErrUpgrade", ErrUpgrade, actors.ErrUpgrade},
		{"ErrReplicaSync", ErrReplicaSync, actors.ErrReplicaSync},
		{"ErrPermitExpired", ErrPermitExpired, actors.ErrPermitExpired},
		{"ErrWrongKind", ErrWrongKind, inspect.ErrWrongKind},
	} {
		assert.Equal(t, c.inner, c.root, c.name)
		assert.ErrorIs(t, fmt.Errorf("wrapped: %w", c.inner), c.root, c.name)
		assert.ErrorIs(t, fmt.Errorf("wrapped: %w", c.root), c.inner, c.name)
	}
	assert.False(t, errors.Is(ErrNotAcquired, ErrLost), "distinct sentinels stay distinct")
}
