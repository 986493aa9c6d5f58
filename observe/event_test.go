package observe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEventKindString(t *testing.T) {
	assert.Equal(t, "lost", EventLost.String())
	assert.Equal(t, "gave_up", EventGaveUp.String())
	assert.Equal(t, "EventKind(99)", EventKind(99).String())
}
