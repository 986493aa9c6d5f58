package scripts

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"
)

// Redisson's semaphore prefix and suffix.
const (
	semaphoreChannelPrefix = "redisson_sc"
	permitTimeoutSuffix    = "timeout"
	// legacyPermitTimeoutPrefix named the permit ZSET before actorlock used
	// Redisson 4.x's layout; its permits are still reclaimed and released.
	legacyPermitTimeoutPrefix = "redisson__timeout__set"
)

var (
	//go:embed semaphore_acquire.lua
	semaphoreAcquireLua string
	//go:embed semaphore_add.lua
	semaphoreAddLua string
	//go:embed semaphore_try_set.lua
	semaphoreTrySetLua string
	//go:embed semaphore_drain.lua
	semaphoreDrainLua string
	//go:embed semaphore_expirable.lua
	semaphoreExpirableLua string
	//go:embed semaphore_expirable_acquire.lua
	semaphoreExpirableAcquireLua string
	//go:embed semaphore_expirable_release.lua
	semaphoreExpirableReleaseLua string
	//go:embed semaphore_expirable_available.lua
	semaphoreExpirableAvailableLua string
	//go:embed semaphore_expirable_update.lua
	semaphoreExpirableUpdateLua string

	semaphoreAcquire            = newScript(kindLua, guardLua, semaphoreAcquireLua)
	semaphoreAdd                = newScript(kindLua, guardLua, semaphoreAddLua)
	semaphoreTrySet             = newScript(kindLua, guardLua, semaphoreTrySetLua)
	semaphoreDrain              = newScript(kindLua, guardLua, semaphoreDrainLua)
	semaphoreExpirableAcquire   = newScript(kindLua, semaphoreExpirableLua, semaphoreExpirableAcquireLua)
	semaphoreExpirableRelease   = newScript(kindLua, guardLua, semaphoreExpirableLua, semaphoreExpirableReleaseLua)
	semaphoreExpirableAvailable = newScript(kindLua, semaphoreExpirableLua, semaphoreExpirableAvailableLua)
	semaphoreExpirableUpdate    = newScript(kindLua, semaphoreExpirableLua, semaphoreExpirableUpdateLua)
)

// SemaphoreChannel carries a semaphore's new permit count whenever permits
// are added or released (both semaphore kinds, as in Redisson).
func SemaphoreChannel(name string) string { return prefixed(semaphoreChannelPrefix, name) }

// PermitTimeoutKey is the ZSET of a permit-expirable semaphore's permits
// ({name}:timeout, as Redisson 4.x): the permit id's 16 raw bytes -> expiry
// ms.
func PermitTimeoutKey(name string) string { return suffixed(name, permitTimeoutSuffix) }

// LegacyPermitTimeoutKey is where actorlock kept permits (32 hex chars ->
// expiry ms) before it used Redisson 4.x's layout.
func LegacyPermitTimeoutKey(name string) string { return prefixed(legacyPermitTimeoutPrefix, name) }

// PermitNever is the expiry Redisson records for a permit without lease.
const PermitNever = 922337203685477

// PermitIDBytes is the ZSET member of permit id: its 32 hex chars (either
// case) decoded to 16 bytes, as Redisson's ByteBufUtil.decodeHexDump does.
func PermitIDBytes(id string) (string, error) {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 16 {
		return "", fmt.Errorf("permit id %q is not 32 hex digits", id)
	}
	return string(b), nil
}

func permitKeys(name string, more ...string) []string {
	return append([]string{name, PermitTimeoutKey(name), LegacyPermitTimeoutKey(name)}, more...)
}

// AcquirePermits takes n permits of semaphore name if available, once for
// the request g guards. It reports whether they were taken and the count
// after (or available, if not).
func AcquirePermits(ctx context.Context, c Client, name string, n int64, g Guard) (bool, int64, error) {
	v, err := guardedInts(ctx, c, semaphoreAcquire, g, name, []string{name}, n)
	if err != nil {
		return false, 0, err
	}
	if len(v) != 2 {
		return false, 0, fmt.Errorf("scripts: unexpected semaphore acquire reply %v", v)
	}
	return v[0] == 1, v[1], nil
}

// AddPermits adds n permits (negative: removes) to semaphore name, once
// for the request g guards, tells waiters the new count and returns it.
func AddPermits(ctx context.Context, c Client, name string, n int64, g Guard) (int64, error) {
	v, err := guardedInts(ctx, c, semaphoreAdd, g, name, []string{name}, n, SemaphoreChannel(name))
	if err != nil {
		return 0, err
	}
	if len(v) != 2 {
		return 0, fmt.Errorf("scripts: unexpected semaphore add reply %v", v)
	}
	return v[1], nil
}

// TrySetPermits sets semaphore name's permits to n unless already set.
func TrySetPermits(ctx context.Context, c Client, name string, n int64, g Guard) (bool, error) {
	v, err := guardedInts(ctx, c, semaphoreTrySet, g, name, []string{name}, n, SemaphoreChannel(name))
	if err != nil {
		return false, err
	}
	return v[0] == 1, nil
}

// DrainPermits takes every available permit of semaphore name and returns
// how many.
func DrainPermits(ctx context.Context, c Client, name string, g Guard) (int64, error) {
	v, err := guardedInts(ctx, c, semaphoreDrain, g, name, []string{name})
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// PermitGrant is the outcome of AcquireExpirablePermits.
type PermitGrant struct {
	Acquired bool
	// Expiry is the permits' expiry (server clock, Unix ms; PermitNever
	// without lease) when acquired.
	Expiry int64
	// Wait, when not acquired, is how long until the earliest permit held
	// expires (server clock); negative when none will.
	Wait time.Duration
}

// AcquireExpirablePermits takes one permit per id (32 hex chars each, chosen
// by the caller) of permit-expirable semaphore name, all or none, for lease
// (<= 0: without expiry), after returning expired permits to the pool. A
// re-attempt with the same ids does not take twice. An attempt that
// reaches Redis after ctx's deadline plus clock's slack does nothing
// (ErrNotRun), so that no attempt acts after clock.ActsUntil(ctx): its
// caller must not hand the permits out, nor give them back, while one whose
// outcome is unknown may still act (after a release, it would take them
// again, for nobody). The server's clock is read first if clock has
// learnt nothing yet.
func AcquireExpirablePermits(ctx context.Context, c Client, name string, ids []string, lease time.Duration, clock *Clock) (PermitGrant, error) {
	if len(ids) == 0 {
		return PermitGrant{}, fmt.Errorf("scripts: no permit id")
	}
	leaseMs := int64(-1)
	if lease > 0 {
		leaseMs = ms(lease)
	}
	if err := clock.learn(ctx, c); err != nil {
		return PermitGrant{}, err
	}
	args := []any{leaseMs, SemaphoreChannel(name), clock.notAfter(ctx)}
	for _, id := range ids {
		raw, err := PermitIDBytes(id)
		if err != nil {
			return PermitGrant{}, fmt.Errorf("scripts: %w", err)
		}
		args = append(args, raw)
	}
	res, err := semaphoreExpirableAcquire.evalOnce(ctx, c, permitKeys(name), args...)
	if err != nil {
		return PermitGrant{}, err
	}
	v, err := ints(res)
	if err != nil || len(v) != 2 {
		return PermitGrant{}, fmt.Errorf("scripts: unexpected permit acquire reply %v", res)
	}
	switch v[0] {
	case 1:
		return PermitGrant{Acquired: true, Expiry: v[1]}, nil
	case lateReply:
		return PermitGrant{}, ErrNotRun
	}
	return PermitGrant{Wait: pttl(v[1])}, nil
}

// PermitRelease is the outcome of ReleaseExpirablePermits: how many of the
// ids were released within their lease, found past it (they returned to the
// pool now), and not held at all (expired and returned already, released,
// or never taken).
type PermitRelease struct {
	Released, Expired, Unknown int64
}

// ReleaseExpirablePermits releases permits ids (32 hex chars each) of
// permit-expirable semaphore name, once for the request g guards: every id
// found returns to the pool.
func ReleaseExpirablePermits(ctx context.Context, c Client, name string, ids []string, g Guard) (PermitRelease, error) {
	args := []any{SemaphoreChannel(name)}
	for _, id := range ids {
		raw, err := PermitIDBytes(id)
		if err != nil {
			return PermitRelease{}, fmt.Errorf("scripts: %w", err)
		}
		args = append(args, raw)
	}
	v, err := guardedInts(ctx, c, semaphoreExpirableRelease, g, name, permitKeys(name), args...)
	if err != nil {
		return PermitRelease{}, err
	}
	if len(v) != 3 {
		return PermitRelease{}, fmt.Errorf("scripts: unexpected permit release reply %v", v)
	}
	return PermitRelease{Released: v[0], Expired: v[1], Unknown: v[2]}, nil
}

// UpdatePermitLease gives held permit id of permit-expirable semaphore name
// a new lease from now (<= 0: no expiry). It reports the new expiry (server
// clock, Unix ms), or false when the permit is not held (it expired, was
// released, or never taken). Safe to replay.
func UpdatePermitLease(ctx context.Context, c Client, name, id string, lease time.Duration) (int64, bool, error) {
	raw, err := PermitIDBytes(id)
	if err != nil {
		return 0, false, fmt.Errorf("scripts: %w", err)
	}
	leaseMs := int64(-1)
	if lease > 0 {
		leaseMs = ms(lease)
	}
	res, err := semaphoreExpirableUpdate.run(ctx, c, permitKeys(name), raw, leaseMs, SemaphoreChannel(name)).Result()
	if err != nil {
		return 0, false, err
	}
	v, ok := res.(int64)
	if !ok {
		return 0, false, fmt.Errorf("scripts: unexpected permit lease update reply %v", res)
	}
	return v, v != 0, nil
}

// AvailableExpirablePermits returns expired permits of name to the pool and
// returns the available count. Safe to replay.
func AvailableExpirablePermits(ctx context.Context, c Client, name string) (int64, error) {
	res, err := semaphoreExpirableAvailable.run(ctx, c, permitKeys(name), SemaphoreChannel(name)).Result()
	if err != nil {
		return 0, err
	}
	v, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("scripts: unexpected permit available reply %v", res)
	}
	return v, nil
}
