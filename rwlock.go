package actorlock

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/scripts"
)

// ReadWriteLock is a handle on one read-write lock: its two lockers are the
// read and the write side of the same Redis hash. It is safe to share
// between goroutines, like Lock. The lockers of a nil ReadWriteLock, or of
// one no Runtime made, refuse every call with ErrInvalidArgument.
type ReadWriteLock struct {
	read, write *Lock
}

// Name is the lock's name, which is also its Redis key ("" for a nil
// ReadWriteLock).
func (rw *ReadWriteLock) Name() string { return rw.ReadLocker().Name() }

// ReadLocker is the read side: any number of owners may hold it at once,
// while no other owner holds the write side. Each read hold has its own
// lease, so a reader that dies stops counting when its lease is over.
func (rw *ReadWriteLock) ReadLocker() *Lock {
	if rw == nil || rw.read == nil {
		return &Lock{err: errNilHandle("ReadWriteLock")}
	}
	return rw.read
}

// WriteLocker is the write side: one owner at a time, while no other owner
// reads.
func (rw *ReadWriteLock) WriteLocker() *Lock {
	if rw == nil || rw.write == nil {
		return &Lock{err: errNilHandle("ReadWriteLock")}
	}
	return rw.write
}

// readLocked reports whether some owner holds a read of read-write lock
// name: in mode read, or in mode write when the writer also reads (a
// writer may take the read side: its read field <owner> then sits beside
// its write field <owner>:write).
func readLocked(ctx context.Context, rdb redis.UniversalClient, name string) (bool, error) {
	// HGET and HKEYS, which the least-privilege ACL user has (HGETALL it
	// does not need elsewhere), in one round trip.
	var mode *redis.StringCmd
	var keys *redis.StringSliceCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		mode, keys = p.HGet(ctx, name, "mode"), p.HKeys(ctx, name)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	switch mode.Val() {
	case "read":
		return true, nil
	case "write":
		fields := map[string]bool{}
		for _, f := range keys.Val() {
			fields[f] = true
		}
		for f := range fields {
			if owner, ok := strings.CutSuffix(f, scripts.RWWriteField("")); ok && fields[owner] {
				return true, nil
			}
		}
	}
	return false, nil
}
