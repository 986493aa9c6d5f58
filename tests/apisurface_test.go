package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/internal/apidecl"
)

// maxRootExports bounds what the root package exports (issue 32): the
// primitives' constructors, the locks, their options and errors, the
// Runtime. Machinery and secondary surfaces live in packages of their own
// (actorkit, observe, primitive, remoting); a new export here needs a
// reason to be in the root.
const maxRootExports = 90

func TestRootPackageExportsAtMost90Identifiers(t *testing.T) {
	t.Parallel()
	decls, err := apidecl.Exported("..")
	require.NoError(t, err)
	for _, kind := range apidecl.Kinds {
		t.Logf("%s %d: %s", kind, len(decls[kind]), strings.Join(decls[kind], " "))
	}
	t.Logf("total %d", decls.Total())
	assert.LessOrEqual(t, decls.Total(), maxRootExports, "the root package's exported identifiers")
	// What only actors need is in package actorkit, not beside the locks.
	for _, machinery := range []string{"KeeperProps", "Keep", "Unkeep", "NewOwnerToken", "DefaultRemoteName", "Runtime.PID", "Runtime.NamedPID", "Runtime.TokenOwner", "Runtime.ActorSystem"} {
		for _, kind := range []string{"funcs", "methods", "types", "consts"} {
			assert.NotContains(t, decls[kind], machinery, "the root exports %s", machinery)
		}
	}
}
