package tests

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

// A runtime's record (its host and pid, for operators) is refreshed while
// the runtime runs: its 30 s expiry never comes. A Redis that refuses it
// (an ACL user not granted the key) costs the runtime nothing: it locks as
// before, says so once in its log and stops asking.
func TestRuntimeRecordIsRefreshedAndARefusalIsHarmless(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := adminClient(t, srv)
	ctx := ctxFor(t, time.Minute)

	rt := newRuntime(t, client(t, srv.Addr))
	key := scripts.RuntimeKey("", rt.ID())
	require.Eventually(t, func() bool { return admin.Exists(ctx, key).Val() == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, admin.Get(ctx, key).Val(), `"pid":`+itoa(int64(os.Getpid())))

	// A user narrowed to "app:" without the record's key.
	password := secret("pw-")
	narrowed := strings.ReplaceAll(aclPrefixRules, "~actorlock_runtime:* ", "")
	require.NotEqual(t, aclPrefixRules, narrowed)
	createACLUser(t, admin, "norecord", password, []string{"~*", "&redisson_*"}, strings.Fields(narrowed)...)
	logger, logs := debugLogger()
	refused := newRuntime(t, urlClient(t, "redis", srv.Addr, "norecord", password, nil), actorlock.WithLogger(logger))
	held, err := refused.Lock("app:orders").Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, held.Unlock(ctx))

	// Past one refresh (10 s).
	time.Sleep(11 * time.Second)
	ttl := admin.PTTL(ctx, key).Val()
	assert.Greater(t, ttl, 20*time.Second, "refreshed, not left to expire")
	assert.Equal(t, 1, strings.Count(logs.String(), "refused the runtime's record"), "told once: %s", logs.String())
	entries, err := admin.ACLLog(ctx, 100).Result()
	require.NoError(t, err)
	var denials int64
	for _, e := range entries {
		if e.Username == "norecord" {
			denials += e.Count // Redis folds repeated refusals into one entry
		}
	}
	assert.Equal(t, int64(1), denials, "asked once, not at every refresh")
	assert.Zero(t, admin.Exists(ctx, scripts.RuntimeKey("", refused.ID())).Val())
}
