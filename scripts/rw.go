package scripts

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed rw_read_acquire.lua
	rwReadAcquireLua string
	//go:embed rw_write_acquire.lua
	rwWriteAcquireLua string
	//go:embed rw_read_unlock.lua
	rwReadUnlockLua string
	//go:embed rw_write_unlock.lua
	rwWriteUnlockLua string
	//go:embed rw_renew.lua
	rwRenewLua string
	//go:embed rw_force_unlock.lua
	rwForceUnlockLua string

	rwReadAcquire  = newScript(guardLua, reentrantLua, rwReadAcquireLua)
	rwWriteAcquire = newScript(guardLua, reentrantLua, rwWriteAcquireLua)
	rwReadUnlock   = newScript(guardLua, rwReadUnlockLua)
	rwWriteUnlock  = newScript(guardLua, releaseLua, rwWriteUnlockLua)
	rwRenew        = newScript(reentrantLua, rwRenewLua)
	rwForceUnlock  = newScript(rwForceUnlockLua)
)

// AcquireRead takes or re-enters a read hold.
func AcquireRead(ctx context.Context, c Client, a AcquireArgs, g Guard) (Grant, error) {
	return grantScript(ctx, c, rwReadAcquire, g, a.Name, []string{a.Name, TokenKey(a.Name)},
		ms(a.Lease), a.Owner, RWWriteField(a.Owner), RWTimeoutPrefix(a.Name, a.Owner), ms(a.counterTTL()))
}

// AcquireWrite takes or re-enters the write hold.
func AcquireWrite(ctx context.Context, c Client, a AcquireArgs, g Guard) (Grant, error) {
	return grantScript(ctx, c, rwWriteAcquire, g, a.Name, []string{a.Name, TokenKey(a.Name)},
		ms(a.Lease), RWWriteField(a.Owner), ms(a.counterTTL()))
}

// UnlockRead releases read holds; Released means the lock became free.
func UnlockRead(ctx context.Context, c Client, a UnlockArgs, g Guard) (Unlock, error) {
	return unlockScript(ctx, c, rwReadUnlock, g, a.Name, []string{a.Name},
		a.Owner, a.Holds, RWChannel(a.Name), optCount(a.IfCount), RWTimeoutPrefix(a.Name, a.Owner), rwKeyPrefix(a.Name), optToken(a.IfToken))
}

// UnlockWrite releases write holds; Released means the lock became free
// (not when the writer still reads: a downgrade).
func UnlockWrite(ctx context.Context, c Client, a UnlockArgs, g Guard) (Unlock, error) {
	return unlockScript(ctx, c, rwWriteUnlock, g, a.Name, []string{a.Name, TokenKey(a.Name)},
		RWWriteField(a.Owner), a.Holds, RWChannel(a.Name), optCount(a.IfCount), optToken(a.IfToken))
}

// ForceUnlockRW deletes the read-write lock if it is held in the given
// mode; true if it was.
func ForceUnlockRW(ctx context.Context, c Client, name string, write bool) (bool, error) {
	mode := "read"
	if write {
		mode = "write"
	}
	res, err := rwForceUnlock.evalOnce(ctx, c, []string{name}, mode, RWChannel(name))
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// RWRenewal is one owner's hold of a read-write lock for the watchdog.
type RWRenewal struct {
	Name  string
	Owner string
	Reads int64 // its read holds, whose keys are renewed too
}

// RenewRW queues, on pipe, one renewal call for up to MaxRenewBatch
// read-write locks that share a hash slot. Read it with RenewResult.
func RenewRW(ctx context.Context, pipe redis.Pipeliner, lease time.Duration, batch []RWRenewal) *redis.Cmd {
	keys, args := rwRenewArgs(lease, batch)
	return rwRenew.queue(ctx, pipe, keys, args...)
}

// RetryRenewRW re-runs one renewal call outside a pipeline (after NOSCRIPT).
func RetryRenewRW(ctx context.Context, c Client, lease time.Duration, batch []RWRenewal) *redis.Cmd {
	keys, args := rwRenewArgs(lease, batch)
	return rwRenew.run(ctx, c, keys, args...)
}

func rwRenewArgs(lease time.Duration, batch []RWRenewal) ([]string, []any) {
	keys := make([]string, len(batch))
	args := make([]any, 0, 1+4*len(batch))
	args = append(args, ms(lease))
	for i, r := range batch {
		keys[i] = r.Name
		args = append(args, r.Owner, RWWriteField(r.Owner), r.Reads, RWTimeoutPrefix(r.Name, r.Owner))
	}
	return keys, args
}
