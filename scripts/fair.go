package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

var (
	//go:embed fair.lua
	fairLua string
	//go:embed fair_acquire.lua
	fairAcquireLua string
	//go:embed fair_unlock.lua
	fairUnlockLua string
	//go:embed fair_leave.lua
	fairLeaveLua string
	//go:embed fair_force_unlock.lua
	fairForceUnlockLua string
	//go:embed fair_refresh.lua
	fairRefreshLua string

	fairAcquire     = newScript(guardLua, reentrantLua, fairLua, fairAcquireLua)
	fairUnlock      = newScript(guardLua, releaseLua, reentrantLua, fairLua, fairUnlockLua)
	fairLeave       = newScript(guardLua, fairLua, fairLeaveLua)
	fairForceUnlock = newScript(fairForceUnlockLua)
	fairRefresh     = newScript(fairLua, fairRefreshLua)
)

// FairAcquireArgs describes one attempt at a fair lock.
type FairAcquireArgs struct {
	AcquireArgs
	Wait    time.Duration // how long a queued waiter keeps its place
	Enqueue bool          // join the queue if the lock cannot be had now
}

// AcquireFair takes or re-enters the fair lock, or joins its queue.
// HolderTTL of a refusal is about how long the owner may wait for its turn.
func AcquireFair(ctx context.Context, c Client, a FairAcquireArgs, g Guard) (Grant, error) {
	enqueue := "0"
	if a.Enqueue {
		enqueue = "1"
	}
	return grantScript(ctx, c, fairAcquire, g, a.Name,
		[]string{a.Name, FairQueueKey(a.Name), FairTimeoutKey(a.Name), TokenKey(a.Name)},
		ms(a.Lease), a.Owner, ms(a.Wait), ms(a.counterTTL()), enqueue)
}

// FairUnlockArgs describes one release of a fair lock.
type FairUnlockArgs struct {
	UnlockArgs
	// Next, if set, is the local waiter that gets the lock directly when it
	// becomes free and Next is the queue's head.
	Next AcquireArgs
	// KeepPlace, if positive, gives back a grant its waiter could not use
	// and puts the owner back at the head of the queue, its place lasting
	// that long: the grant had taken the place.
	KeepPlace time.Duration
}

// FairUnlock is the outcome of UnlockFair.
type FairUnlock struct {
	Unlock
	Next Grant // Next.Acquired when the lock went straight to FairUnlockArgs.Next
}

// UnlockFair releases holds of the fair lock in one round trip.
func UnlockFair(ctx context.Context, c Client, a FairUnlockArgs, g Guard) (FairUnlock, error) {
	v, err := guardedInts(ctx, c, fairUnlock, g, a.Name,
		[]string{a.Name, FairQueueKey(a.Name), FairTimeoutKey(a.Name), TokenKey(a.Name)},
		a.Owner, a.Holds, LockChannel(a.Name), optCount(a.IfCount), a.Next.Owner, ms(a.Next.Lease), ms(a.Next.counterTTL()), optMs(a.KeepPlace),
		optToken(a.IfToken))
	if err != nil {
		return FairUnlock{}, err
	}
	u, err := unlockOf(v)
	if err != nil {
		return FairUnlock{}, err
	}
	out := FairUnlock{Unlock: u}
	if len(v) == 6 {
		out.Next = Grant{Acquired: true, HoldCount: v[2], Token: v[3], Fresh: v[4] == 1, Mark: v[5], Other: -1}
	}
	return out, nil
}

// LeaveFair takes owner out of the fair lock's queue (a waiter gave up, or
// an operator drops a dead one); those behind it move up by its slot.
func LeaveFair(ctx context.Context, c Client, name, owner string, g Guard) (bool, error) {
	v, err := guardedInts(ctx, c, fairLeave, g, name,
		[]string{name, FairQueueKey(name), FairTimeoutKey(name)},
		owner, LockChannel(name))
	if err != nil {
		return false, err
	}
	return v[0] == 1, nil
}

// RefreshFair keeps the places of live waiters of the fair lock name: each
// gets the deadline now + window (those behind move with it). It returns
// how many of owners have no place in the queue.
func RefreshFair(ctx context.Context, c Client, name string, window time.Duration, owners []string) (int64, error) {
	args := make([]any, 0, len(owners)+1)
	args = append(args, ms(window))
	for _, o := range owners {
		args = append(args, o)
	}
	res, err := fairRefresh.evalOnce(ctx, c, []string{FairQueueKey(name), FairTimeoutKey(name)}, args...)
	if err != nil {
		return 0, err
	}
	n, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("scripts: unexpected fair refresh reply %v", res)
	}
	return n, nil
}

// ForceUnlockFair deletes the fair lock whoever holds it; true if it was held.
func ForceUnlockFair(ctx context.Context, c Client, name string) (bool, error) {
	res, err := fairForceUnlock.evalOnce(ctx, c, []string{name, FairQueueKey(name)}, LockChannel(name))
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// unlockOf reads the {state[, heard, ...]} reply every unlock script gives.
func unlockOf(v []int64) (Unlock, error) {
	if len(v) == 0 || v[0] < -2 || v[0] > 1 {
		return Unlock{}, fmt.Errorf("scripts: unexpected unlock reply %v", v)
	}
	u := Unlock{State: UnlockState(v[0])}
	if len(v) > 1 {
		u.Heard = v[1]
	}
	return u, nil
}

// optMs renders an optional duration: "" when not positive.
func optMs(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return strconv.FormatInt(ms(d), 10)
}
