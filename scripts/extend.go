package scripts

import (
	"context"
	_ "embed"
	"time"
)

var (
	//go:embed lock_extend.lua
	lockExtendLua string

	lockExtend = newScript(reentrantLua, lockExtendLua)
)

// ExtendLock makes owner's hold of the reentrant or fair lock name last at
// least lease from now, and reports whether owner still holds it.
// Idempotent, so go-redis may retry it.
func ExtendLock(ctx context.Context, c Client, name, owner string, lease time.Duration) (bool, error) {
	n, err := lockExtend.run(ctx, c, []string{name, TokenKey(name)}, ms(lease), owner).Int64()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}
