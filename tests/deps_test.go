package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A program that only locks must not link the network stack: gRPC and
// protoactor remote belong to package remoting (a lock-only program is
// half the size without them).
func TestRootPackageDoesNotLinkTheRemote(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "github.com/actorlock/actorlock")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/asynkron/protoactor-go/actor")
	for _, d := range deps {
		assert.False(t, strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "github.com/asynkron/protoactor-go/remote"),
			"the root package links %s", d)
	}
}
