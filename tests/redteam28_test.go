package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twenty-eighth red-team pass, over 51131bc..adc678c (give-backs in
// runsBefore's order; Close's drain with drained releases, drainMore's
// uncut validity, Guard.Until, drains/keepDrains, extendUndos).

// RT28-1 (two holders): a late Extend that comes back while Close's
// release of its owner's holds is pending raises that release's giveUpAt
// to the extension's validity (keepDrains), on the word of the script's
// reply alone ("held"). But the Extend script is unguarded and names only
// the owner id: held back on its way, it reached Redis after runtime 1's
// hold had expired and runtime 2 had taken the WithOwner id afresh, and
// extended runtime 2's hold. Close's release, held back too, reached
// Redis past its holds' validity and was refused (Guard.Until, ErrNotRun);
// it is then run again until the raised giveUpAt, unconditionally, and
// deletes runtime 2's hold under its live Held: another owner gets in.
// docs/guarantees.md, "Mutual exclusion on one Redis master".
func TestRedTeam28LateExtendOfAFreshHoldKeepsCloseReleasing(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(5*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 40*time.Second)
	loadExtend(t, ctx, rt1)
	const name, owner = "rt28-late-extend-of-fresh-hold", "owner-rt28-1"
	sent := time.Now()
	h, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)

	// The Extend reaches Redis 2.5 s late (after the hold expired there);
	// Close's release reaches it 2.8 s late (past its Guard.Until, but
	// within go-redis's 3 s read timeout: refused, not run).
	ext := p.on(1, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return isExtendOf(c, name, owner, "30000") })
	drain := p.on(1, holdCommand, 2800*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })

	extended := make(chan error, 1)
	go func() { extended <- h.Extend(ctx, 30*time.Second) }()
	await(t, ext.hits, 2*time.Second, "the Extend, held back")
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt1.Close(cctx)
	}()
	await(t, drain.hits, 2*time.Second, "Close's release, held back")

	// Runtime 1's hold expires in Redis; runtime 2 takes the id afresh.
	for direct.Exists(ctx, name).Val() != 0 {
		require.Less(t, time.Since(sent), 2300*time.Millisecond, "runtime 1's hold expires in Redis")
		time.Sleep(5 * time.Millisecond)
	}
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).TryAcquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")

	await(t, ext.ran, 3*time.Second, "the Extend, run by Redis on runtime 2's hold")
	t.Logf("Extend: %v", await(t, extended, 3*time.Second, "the Extend's answer"))
	await(t, drain.ran, 3*time.Second, "Close's release, reaching Redis past its validity")
	time.Sleep(800 * time.Millisecond) // Close's release, tried again
	t.Logf("Redis now %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}
