package scripts

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed latch_try_set.lua
	latchTrySetLua string
	//go:embed latch_count_down.lua
	latchCountDownLua string
	//go:embed latch_delete.lua
	latchDeleteLua string

	latchTrySet    = newScript(kindLua, latchTrySetLua)
	latchCountDown = newScript(kindLua, latchCountDownLua)
	latchDelete    = newScript(kindLua, latchDeleteLua)
)

// LatchChannel is where a count-down latch announces "0" (reached zero) and
// "1" (a new count). Redisson names it by plain concatenation, braces
// included even when the name has its own: channels have no slot, so only
// the exact bytes matter.
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// TrySetLatchCount sets latch name's count to n unless it is set.
func TrySetLatchCount(ctx context.Context, c Client, name string, n int64, m Marked) (bool, error) {
	res, err := latchTrySet.evalOnce(ctx, c, []string{name, requestKey(name, m.RequestID)}, n, LatchChannel(name), ms(m.TTL))
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// CountDownLatch counts latch name down by one and returns the new count.
func CountDownLatch(ctx context.Context, c Client, name string, m Marked) (int64, error) {
	res, err := latchCountDown.evalOnce(ctx, c, []string{name, requestKey(name, m.RequestID)}, LatchChannel(name), ms(m.TTL))
	if err != nil {
		return 0, err
	}
	v, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("scripts: unexpected count down reply %v", res)
	}
	return v, nil
}

// DeleteLatch deletes latch name, releasing its awaiters; true if it existed.
func DeleteLatch(ctx context.Context, c Client, name string, m Marked) (bool, error) {
	res, err := latchDelete.evalOnce(ctx, c, []string{name, requestKey(name, m.RequestID)}, LatchChannel(name), ms(m.TTL))
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// IsNil reports whether err is go-redis's "no such key".
func IsNil(err error) bool { return errors.Is(err, redis.Nil) }
