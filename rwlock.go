package actorlock

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/scripts"
)

// ReadWriteLock is a handle on one read-write lock: its two lockers are the
// read and the write side of the same Redis hash. It is safe to share
// between goroutines, like Lock.
type ReadWriteLock struct {
	read, write *Lock
}

// Name is the lock's name, which is also its Redis key.
func (rw *ReadWriteLock) Name() string { return rw.read.Name() }

// Owner is the WithOwner id both lockers acquire as, or "" (see Lock.Owner).
func (rw *ReadWriteLock) Owner() string { return rw.read.Owner() }

// ReadLocker is the read side: any number of owners may hold it at once,
// while no other owner holds the write side. Each read hold has its own
// lease, so a reader that dies stops counting when its lease is over.
func (rw *ReadWriteLock) ReadLocker() *Lock { return rw.read }

// WriteLocker is the write side: one owner at a time, while no other owner
// reads.
func (rw *ReadWriteLock) WriteLocker() *Lock { return rw.write }

// readLocked reports whether some owner holds a read of read-write lock
// name: in mode read, or in mode write when the writer also reads (a
// writer may take the read side: its read field <owner> then sits beside
// its write field <owner>:write).
func readLocked(ctx context.Context, rdb redis.UniversalClient, name string) (bool, error) {
	fields, err := rdb.HGetAll(ctx, name).Result()
	if err != nil {
		return false, err
	}
	switch fields["mode"] {
	case "read":
		return true, nil
	case "write":
		for f := range fields {
			if owner, ok := strings.CutSuffix(f, scripts.RWWriteField("")); ok {
				if _, reads := fields[owner]; reads {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
