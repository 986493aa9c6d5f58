package actorlock

// ReadWriteLock is a handle on one read-write lock for one owner: its two
// lockers are the read and the write side of the same Redis hash.
type ReadWriteLock struct {
	read, write *Lock
}

// Name is the lock's name, which is also its Redis key.
func (rw *ReadWriteLock) Name() string { return rw.read.Name() }

// Owner is the owner id both lockers acquire as.
func (rw *ReadWriteLock) Owner() string { return rw.read.Owner() }

// ReadLocker is the read side: any number of owners may hold it at once,
// while no other owner holds the write side. Each read hold has its own
// lease, so a reader that dies stops counting when its lease is over.
func (rw *ReadWriteLock) ReadLocker() *Lock { return rw.read }

// WriteLocker is the write side: one owner at a time, while no other owner
// reads.
func (rw *ReadWriteLock) WriteLocker() *Lock { return rw.write }
