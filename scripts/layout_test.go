package scripts

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The Go name of the holds' mark is the one the scripts write.
func TestHoldMarkFieldIsTheScriptsOne(t *testing.T) {
	require.Contains(t, reentrantLua, "local HOLD_MARK = '"+HoldMarkField+"'")
}
