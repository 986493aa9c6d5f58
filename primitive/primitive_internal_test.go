package primitive

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/actorlock/actorlock/actors"
)

// The bound this package documents is the one the actors enforce.
func TestMaxPermitsPerCallIsTheActorsBound(t *testing.T) {
	assert.Equal(t, actors.MaxPermitIDs, MaxPermitsPerCall)
}
