package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// Redisson's semaphore prefixes.
const (
	semaphoreChannelPrefix = "redisson_sc"
	permitTimeoutPrefix    = "redisson__timeout__set"
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

	semaphoreAcquire            = newScript(semaphoreAcquireLua)
	semaphoreAdd                = newScript(semaphoreAddLua)
	semaphoreTrySet             = newScript(semaphoreTrySetLua)
	semaphoreDrain              = newScript(semaphoreDrainLua)
	semaphoreExpirableAcquire   = newScript(semaphoreExpirableLua, semaphoreExpirableAcquireLua)
	semaphoreExpirableRelease   = newScript(semaphoreExpirableLua, semaphoreExpirableReleaseLua)
	semaphoreExpirableAvailable = newScript(semaphoreExpirableLua, semaphoreExpirableAvailableLua)
)

// SemaphoreChannel carries a semaphore's new permit count whenever permits
// are added or released (both semaphore kinds, as in Redisson).
func SemaphoreChannel(name string) string { return prefixed(semaphoreChannelPrefix, name) }

// PermitTimeoutKey is the ZSET of a permit-expirable semaphore's permits:
// permit id -> expiry ms.
func PermitTimeoutKey(name string) string { return prefixed(permitTimeoutPrefix, name) }

// Marked identifies one request that must take effect at most once: its id
// names its marker, kept for TTL (at least the time over which the request
// is re-attempted).
type Marked struct {
	RequestID string
	TTL       time.Duration
}

// AcquirePermits takes n permits of semaphore name if available. It reports
// whether they were taken and the count after (or available, if not).
func AcquirePermits(ctx context.Context, c Client, name string, n int64, m Marked) (bool, int64, error) {
	res, err := semaphoreAcquire.evalOnce(ctx, c, []string{name, RequestKey(name, m.RequestID)}, n, ms(m.TTL))
	if err != nil {
		return false, 0, err
	}
	v, err := ints(res)
	if err != nil || len(v) != 2 {
		return false, 0, fmt.Errorf("scripts: unexpected semaphore acquire reply %v", res)
	}
	return v[0] == 1, v[1], nil
}

// AddPermits adds n permits (negative: removes) to semaphore name, tells
// waiters the new count and returns it.
func AddPermits(ctx context.Context, c Client, name string, n int64, m Marked) (int64, error) {
	res, err := semaphoreAdd.evalOnce(ctx, c, []string{name, RequestKey(name, m.RequestID)}, n, SemaphoreChannel(name), ms(m.TTL))
	if err != nil {
		return 0, err
	}
	v, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("scripts: unexpected semaphore add reply %v", res)
	}
	return v, nil
}

// TrySetPermits sets semaphore name's permits to n unless already set.
func TrySetPermits(ctx context.Context, c Client, name string, n int64, m Marked) (bool, error) {
	res, err := semaphoreTrySet.evalOnce(ctx, c, []string{name, RequestKey(name, m.RequestID)}, n, SemaphoreChannel(name), ms(m.TTL))
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// DrainPermits takes every available permit of semaphore name and returns
// how many.
func DrainPermits(ctx context.Context, c Client, name string, m Marked) (int64, error) {
	res, err := semaphoreDrain.evalOnce(ctx, c, []string{name, RequestKey(name, m.RequestID)}, ms(m.TTL))
	if err != nil {
		return 0, err
	}
	v, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("scripts: unexpected semaphore drain reply %v", res)
	}
	return v, nil
}

// PermitGrant is the outcome of AcquireExpirablePermit.
type PermitGrant struct {
	Acquired bool
	// Expiry is the permit's expiry (server clock, Unix ms) when acquired.
	Expiry int64
	// Wait, when not acquired, is how long until the earliest permit held
	// expires (server clock); negative when none will.
	Wait time.Duration
}

// AcquireExpirablePermit takes one permit of permit-expirable semaphore name
// under id, for lease (<= 0: without expiry), after returning expired
// permits to the pool. A re-attempt with the same id does not take twice.
func AcquireExpirablePermit(ctx context.Context, c Client, name, id string, lease time.Duration) (PermitGrant, error) {
	leaseMs := int64(-1)
	if lease > 0 {
		leaseMs = ms(lease)
	}
	res, err := semaphoreExpirableAcquire.evalOnce(ctx, c,
		[]string{name, PermitTimeoutKey(name)}, id, leaseMs, SemaphoreChannel(name))
	if err != nil {
		return PermitGrant{}, err
	}
	v, err := ints(res)
	if err != nil || len(v) != 2 {
		return PermitGrant{}, fmt.Errorf("scripts: unexpected permit acquire reply %v", res)
	}
	if v[0] == 1 {
		return PermitGrant{Acquired: true, Expiry: v[1]}, nil
	}
	return PermitGrant{Wait: pttl(v[1])}, nil
}

// PermitRelease is the outcome of ReleaseExpirablePermit.
type PermitRelease int

const (
	PermitUnknown  PermitRelease = 0 // no such permit: expired and returned already, or never taken
	PermitReleased PermitRelease = 1
	PermitExpired  PermitRelease = 2 // it had expired; it returned to the pool now
)

// ReleaseExpirablePermit releases permit id of permit-expirable semaphore
// name.
func ReleaseExpirablePermit(ctx context.Context, c Client, name, id string, m Marked) (PermitRelease, error) {
	res, err := semaphoreExpirableRelease.evalOnce(ctx, c,
		[]string{name, PermitTimeoutKey(name), RequestKey(name, m.RequestID)}, id, SemaphoreChannel(name), ms(m.TTL))
	if err != nil {
		return 0, err
	}
	v, ok := res.(int64)
	if !ok || v < 0 || v > 2 {
		return 0, fmt.Errorf("scripts: unexpected permit release reply %v", res)
	}
	return PermitRelease(v), nil
}

// AvailableExpirablePermits returns expired permits of name to the pool and
// returns the available count. Safe to replay.
func AvailableExpirablePermits(ctx context.Context, c Client, name string) (int64, error) {
	res, err := semaphoreExpirableAvailable.run(ctx, c, []string{name, PermitTimeoutKey(name)}, SemaphoreChannel(name)).Result()
	if err != nil {
		return 0, err
	}
	v, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("scripts: unexpected permit available reply %v", res)
	}
	return v, nil
}
