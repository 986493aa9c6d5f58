package scripts

import (
	"context"
	_ "embed"
	"errors"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed latch_try_set.lua
	latchTrySetLua string
	//go:embed latch_count_down.lua
	latchCountDownLua string
	//go:embed latch_delete.lua
	latchDeleteLua string

	latchTrySet    = newScript(kindLua, guardLua, latchTrySetLua)
	latchCountDown = newScript(kindLua, guardLua, latchCountDownLua)
	latchDelete    = newScript(kindLua, guardLua, latchDeleteLua)
)

// LatchChannel is where a count-down latch announces "0" (reached zero) and
// "1" (a new count). Redisson names it by plain concatenation, braces
// included even when the name has its own: channels have no slot, so only
// the exact bytes matter.
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// TrySetLatchCount sets latch name's count to n unless it is set.
func TrySetLatchCount(ctx context.Context, c Client, name string, n int64, g Guard) (bool, error) {
	v, err := guardedInts(ctx, c, latchTrySet, g, name, []string{name}, n, LatchChannel(name))
	if err != nil {
		return false, err
	}
	return v[0] == 1, nil
}

// CountDownLatch counts latch name down by one, once for the request g
// guards, and returns the new count.
func CountDownLatch(ctx context.Context, c Client, name string, g Guard) (int64, error) {
	v, err := guardedInts(ctx, c, latchCountDown, g, name, []string{name}, LatchChannel(name))
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// DeleteLatch deletes latch name, releasing its awaiters; true if it existed.
func DeleteLatch(ctx context.Context, c Client, name string, g Guard) (bool, error) {
	v, err := guardedInts(ctx, c, latchDelete, g, name, []string{name}, LatchChannel(name))
	if err != nil {
		return false, err
	}
	return v[0] == 1, nil
}

// IsNil reports whether err is go-redis's "no such key".
func IsNil(err error) bool { return errors.Is(err, redis.Nil) }
