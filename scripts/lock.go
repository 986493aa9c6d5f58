package scripts

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/sentinel"
)

var (
	//go:embed reentrant.lua
	reentrantLua string
	//go:embed release.lua
	releaseLua string
	//go:embed lock_acquire.lua
	lockAcquireLua string
	//go:embed lock_unlock.lua
	lockUnlockLua string
	//go:embed lock_handoff.lua
	lockHandoffLua string
	//go:embed lock_force_unlock.lua
	lockForceUnlockLua string
	//go:embed lock_renew.lua
	lockRenewLua string

	lockAcquire     = newScript(guardLua, reentrantLua, lockAcquireLua)
	lockUnlock      = newScript(guardLua, releaseLua, reentrantLua, lockUnlockLua)
	lockHandoff     = newScript(guardLua, reentrantLua, lockHandoffLua)
	lockForceUnlock = newScript(lockForceUnlockLua)
	lockRenew       = newScript(reentrantLua, lockRenewLua)
)

// MaxRenewBatch is the most locks one renewal call carries, so one call never
// holds the Redis event loop for long.
const MaxRenewBatch = 100

// Grant is the outcome of an acquire attempt.
type Grant struct {
	Acquired  bool
	HoldCount int64         // the owner's hold count, when acquired
	Token     int64         // fencing token of this acquisition, when acquired
	HolderTTL time.Duration // remaining lease of the other holder, when not; negative: no expiry
	// Other is, for a read grant, the owner's write holds as the grant
	// found them; -1 when the script does not report it.
	Other int64
	// Fresh: the lock did not exist, so the owner's holds, if it had any,
	// were gone before this grant.
	Fresh bool
	// Mark, when acquired, is what a give-back of the grant checks
	// (UnlockArgs.IfToken): for a reentrant or fair lock, the mark of the
	// owner's holds (reentrant.lua's HOLD_MARK: the token of the grant
	// that began them, the same for every re-entry of them); for a
	// read-write lock, the grant's own token.
	Mark int64
	// Head and Joined (fair lock, when not acquired): the owner is the head
	// of the lock's queue (the next to get it); the attempt put it at the
	// back of the queue.
	Head, Joined bool
}

// AcquireArgs describes one acquisition of a reentrant lock.
type AcquireArgs struct {
	Name     string
	Owner    string
	Lease    time.Duration
	TokenTTL time.Duration // fencing counter TTL; 0 = never expire
}

// counterTTL is the TTL an acquisition sets on the fencing counter:
// TokenTTL, but never shorter than the hold's lease (and the watchdog's
// renewals keep it so: lock_renew.lua), so that the counter is there as
// long as the hold is. A give-back tells by it whether a newer grant came
// (release.lua); a counter gone under a live hold could not tell it.
func (a AcquireArgs) counterTTL() time.Duration {
	if a.TokenTTL == 0 {
		return 0
	}
	return max(a.TokenTTL, a.Lease)
}

// AcquireLock takes or re-enters the reentrant lock in one round trip.
func AcquireLock(ctx context.Context, c Client, a AcquireArgs, g Guard) (Grant, error) {
	return grantScript(ctx, c, lockAcquire, g, a.Name, []string{a.Name, TokenKey(a.Name)},
		ms(a.Lease), a.Owner, ms(a.counterTTL()))
}

// ErrWrongKind: the lock's name holds another kind of object: a read-write
// lock for a reentrant or fair lock, a reentrant or fair lock for a
// read-write lock, or a key of another Redis type (a semaphore's STRING,
// ...). One kind per name: the acquisition did nothing.
var ErrWrongKind error = sentinel.Error("actorlock: the name holds another kind of object")

// grantScript runs an acquire script under g, never retried, and reads
// its grant.
func grantScript(ctx context.Context, c Client, s script, g Guard, name string, keys []string, args ...any) (Grant, error) {
	v, err := guardedInts(ctx, c, s, g, name, keys, args...)
	if err != nil {
		if redis.HasErrorPrefix(err, "WRONGTYPE") {
			// The script's first access to the key failed: nothing written.
			return Grant{}, refused(ctx, c, keys[0], errors.New("its key is of another Redis type"))
		}
		return Grant{}, err
	}
	grant, err := grantOf(v)
	if errors.Is(err, ErrWrongKind) {
		return grant, refused(ctx, c, keys[0], err)
	}
	return grant, err
}

func grantOf(v []int64) (Grant, error) {
	switch {
	case len(v) == 5 && v[0] == 1:
		return Grant{Acquired: true, HoldCount: v[1], Token: v[2], Fresh: v[3] == 1, Mark: v[4], Other: -1}, nil
	case len(v) == 6 && v[0] == 1:
		return Grant{Acquired: true, HoldCount: v[1], Token: v[2], Fresh: v[3] == 1, Mark: v[4], Other: v[5]}, nil
	case len(v) == 2 && v[0] == 0:
		return Grant{HolderTTL: pttl(v[1])}, nil
	case len(v) == 4 && v[0] == 0:
		return Grant{HolderTTL: pttl(v[1]), Head: v[2] == 1, Joined: v[3] == 1}, nil
	case len(v) == 1 && v[0] == -3:
		return Grant{}, ErrWrongKind
	}
	return Grant{}, fmt.Errorf("scripts: unexpected grant reply %v", v)
}

// UnlockState is the outcome of an unlock.
type UnlockState int

const (
	Released     UnlockState = 1  // the last hold went; waiters were told
	StillHeld    UnlockState = 0  // the owner still holds other holds
	NotOwner     UnlockState = -1 // the owner held nothing (expired, lost or taken)
	CountChanged UnlockState = -2 // the conditional unlock found another count; nothing done
)

// UnlockArgs describes one release of a reentrant lock.
type UnlockArgs struct {
	Name  string
	Owner string
	Holds int64 // holds to release: 1, or the owner's whole count
	// IfCount, when >= 0, releases only if the owner's count equals it.
	IfCount int64
	// IfToken, when positive, releases only if the holds are still the
	// ones it names (Grant.Mark): for a reentrant or fair lock, if the
	// holds' mark is still IfToken; for a write, if the fencing counter
	// still holds it (no grant since); for a read, if the owner's newest
	// read-hold key does.
	IfToken int64
}

// Unlock is the outcome of UnlockLock.
type Unlock struct {
	State UnlockState
	// Heard is how many pub/sub clients received the unlock message, when
	// Released (0 when the release was an earlier attempt's).
	Heard int64
}

// UnlockLock releases holds of the reentrant lock in one round trip.
func UnlockLock(ctx context.Context, c Client, a UnlockArgs, g Guard) (Unlock, error) {
	return unlockScript(ctx, c, lockUnlock, g, a.Name, []string{a.Name, TokenKey(a.Name)},
		a.Owner, a.Holds, LockChannel(a.Name), optCount(a.IfCount), optToken(a.IfToken))
}

// HandoffArgs describes releasing one owner's last hold and granting the next.
type HandoffArgs struct {
	Name string
	From string      // releasing owner
	To   AcquireArgs // the next owner's acquisition; To.Name is ignored
}

// Handoff is the outcome of HandoffLock.
type Handoff struct {
	Released UnlockState // Released, StillHeld or NotOwner
	Next     Grant       // meaningful when Released == Released
}

// HandoffLock releases From's last hold and grants To in one atomic step.
func HandoffLock(ctx context.Context, c Client, a HandoffArgs, g Guard) (Handoff, error) {
	v, err := guardedInts(ctx, c, lockHandoff, g, a.Name, []string{a.Name, TokenKey(a.Name)},
		a.From, a.To.Owner, ms(a.To.Lease), ms(a.To.counterTTL()))
	if err != nil {
		return Handoff{}, err
	}
	switch v[0] {
	case -1:
		return Handoff{Released: NotOwner}, nil
	case 0:
		return Handoff{Released: StillHeld}, nil
	}
	next, err := grantOf(v[1:])
	return Handoff{Released: Released, Next: next}, err
}

// ForceUnlockLock deletes the lock whoever holds it; true if it was held.
func ForceUnlockLock(ctx context.Context, c Client, name string) (bool, error) {
	res, err := lockForceUnlock.evalOnce(ctx, c, []string{name}, LockChannel(name))
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// Renewal is one lock the watchdog extends.
type Renewal struct {
	Name  string
	Owner string
}

// RenewLocks queues, on pipe, one renewal call for up to MaxRenewBatch locks
// that share a hash slot. Renewal is idempotent, so go-redis may retry it.
// Read the result with RenewResult.
func RenewLocks(ctx context.Context, pipe redis.Pipeliner, lease time.Duration, batch []Renewal) *redis.Cmd {
	keys, args := renewArgs(lease, batch)
	return lockRenew.queue(ctx, pipe, keys, args...)
}

// RetryRenewLocks re-runs one renewal call outside a pipeline, loading the
// script if the server lost it (EVALSHA answered NOSCRIPT).
func RetryRenewLocks(ctx context.Context, c Client, lease time.Duration, batch []Renewal) *redis.Cmd {
	keys, args := renewArgs(lease, batch)
	return lockRenew.run(ctx, c, keys, args...)
}

func renewArgs(lease time.Duration, batch []Renewal) ([]string, []any) {
	keys := make([]string, len(batch))
	args := make([]any, 0, 1+len(batch))
	args = append(args, ms(lease))
	for i, r := range batch {
		keys[i] = r.Name
		args = append(args, r.Owner)
	}
	return keys, args
}

// RenewResult reads what a renewal call found of each lock: 0 gone, else
// held, and renewed; for a read-write lock, 1 plus a mask of the owner's
// read-hold keys it found and renewed, bit n-1 for key n (rw_renew.lua).
func RenewResult(cmd *redis.Cmd, n int) ([]int64, error) {
	v, err := ints(cmd.Val())
	if cmd.Err() != nil {
		return nil, cmd.Err()
	}
	if err != nil || len(v) != n {
		return nil, fmt.Errorf("scripts: unexpected renew reply %v", cmd.Val())
	}
	return v, nil
}

// optToken renders an optional fencing token: "" when not positive.
func optToken(t int64) string {
	if t <= 0 {
		return ""
	}
	return strconv.FormatInt(t, 10)
}

// unlockScript runs an unlock script under g, never retried, and reads its
// outcome.
func unlockScript(ctx context.Context, c Client, s script, g Guard, name string, keys []string, args ...any) (Unlock, error) {
	v, err := guardedInts(ctx, c, s, g, name, keys, args...)
	if err != nil {
		return Unlock{}, err
	}
	return unlockOf(v)
}

func ints(res any) ([]int64, error) {
	raw, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("scripts: want an array, got %T", res)
	}
	out := make([]int64, len(raw))
	for i, x := range raw {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("scripts: want integers, got %T", x)
		}
		out[i] = n
	}
	return out, nil
}

func pttl(n int64) time.Duration {
	if n < 0 {
		return -1
	}
	return time.Duration(n) * time.Millisecond
}
