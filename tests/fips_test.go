package tests

import (
	"crypto/fips140"
	"crypto/sha1"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aclFIPSGrant is what FIPS 140-only mode adds to aclSetUser: Go's SHA-1
// panics there, so the server hashes the scripts (SCRIPT LOAD).
const aclFIPSGrant = "+script|load"

// TestFIPSOnly runs every primitive in FIPS 140-only mode
// (GODEBUG=fips140=only), where Go's SHA-1 panics: the test binary re-runs
// this test in a child process with that setting (package init included, so
// importing actorlock must not hash with SHA-1), as the least-privilege ACL
// user plus +script|load, and checks that nothing was refused and that the
// scripts ran by EVALSHA of server-computed hashes.
func TestFIPSOnly(t *testing.T) {
	if !fips140.Enforced() {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestFIPSOnly$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "GODEBUG=fips140=only")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "--- PASS: TestFIPSOnly")
		t.Logf("child, GODEBUG=fips140=only:\n%s", out)
		return
	}
	require.Panics(t, func() { sha1.Sum(nil) }, "not in FIPS 140-only mode")

	srv := startRedis(t)
	admin := adminClient(t, srv)
	password := secret("pw-")
	createACLUser(t, admin, "actorlock", password, nil, aclFIPSGrant)
	ctx := ctxFor(t, time.Minute)
	require.NoError(t, admin.ConfigResetStat(ctx).Err())
	dial := func() *redis.Client { return urlClient(t, "redis", srv.Addr, "actorlock", password, nil) }
	runPrimitives(t, dial, admin, "fips:")

	assert.Empty(t, aclLog(t, ctx, admin), "nothing refused")
	stats, err := admin.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Positive(t, commandCalls(stats, "script|load"))
	assert.Positive(t, commandCalls(stats, "evalsha"))
	t.Logf("script|load=%d evalsha=%d eval=%d", commandCalls(stats, "script|load"),
		commandCalls(stats, "evalsha"), commandCalls(stats, "eval"))
}
