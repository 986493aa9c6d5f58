package actors

import (
	"context"

	"github.com/actorlock/actorlock/scripts"
)

// Old names that files of the lock-actor refactor (semaphore.go, and the
// idleness type moving to idle.go) still use. Delete this file once they use
// primitiveKey, primExpirable, Env.releasePermits and Env.releasePermit.

// SvcKey is primitiveKey.
type SvcKey = primitiveKey

// SvcExpirable is primExpirable.
const SvcExpirable = primExpirable

// ReleasePermits is Env.releasePermits.
func ReleasePermits(ctx context.Context, env *Env, name string, n int64, mark scripts.Marked) error {
	return env.releasePermits(ctx, name, n, mark)
}

// ReleasePermit is Env.releasePermit.
func ReleasePermit(ctx context.Context, env *Env, name string, ids []string, mark scripts.Marked) error {
	return env.releasePermit(ctx, name, ids, mark)
}
