package actors

import "time"

// primitiveKind is the family of object one child of the primitives actor
// serves.
type primitiveKind int

const (
	primDelayed   primitiveKind = iota + 1 // delayed queue: its mover
	primQueue                              // blocking queue: its Take waiters
	primSemaphore                          // semaphore: its Acquire waiters
	primExpirable                          // permit-expirable semaphore
	primLatch                              // count-down latch: its Await waiters
)

// primitiveKey names what one child of the primitives actor serves.
type primitiveKey struct {
	Kind primitiveKind
	Name string
}

// primitiveRouted marks the Go commands the primitives actor routes to a
// child.
type primitiveRouted interface {
	primitiveKey() primitiveKey
	// starts: whether the command may spawn the child; commands that refer
	// to a child's state (cancels, closes) are dropped when there is none.
	starts() bool
}

// The Go commands package actorlock sends to the primitives actor (see
// Handle.SendPrimitive). Replies travel on channels buffered for exactly one
// reply.
type (
	// DelayedOpen registers a handle of delayed queue Name: its mover runs
	// while a handle is open or items are pending.
	DelayedOpen struct{ Name string }
	// DelayedClose unregisters one handle.
	DelayedClose struct{ Name string }

	// Take waits for the head of list Name.
	Take struct {
		Name  string
		ID    uint64
		Reply chan<- TakeResult
	}
	// TakeCancel abandons Take ID, which is answered (ErrCanceled, or the
	// item if that came first: the caller must then give it back).
	TakeCancel struct {
		Name string
		ID   uint64
	}

	// SemAcquire takes N permits of semaphore Name (Expirable: of the
	// permit-expirable semaphore, for Lease; 0 never expires).
	SemAcquire struct {
		Name      string
		Expirable bool
		ID        uint64
		N         int64
		Lease     time.Duration
		TryOnce   bool
		Reply     chan<- SemResult
	}
	// SemCancel abandons SemAcquire ID, answered like TakeCancel.
	SemCancel struct {
		Name      string
		Expirable bool
		ID        uint64
	}

	// Await waits for latch Name's count to be zero.
	Await struct {
		Name  string
		ID    uint64
		Reply chan<- error
	}
	// AwaitCancel abandons Await ID (not answered: nothing to give back).
	AwaitCancel struct {
		Name string
		ID   uint64
	}
)

// TakeResult answers Take.
type TakeResult struct {
	Value []byte
	OK    bool // an item was taken (false: a single attempt found none)
	Err   error
}

// SemResult answers SemAcquire.
type SemResult struct {
	Acquired  bool
	PermitIDs []string // expirable only: one per permit
	Expiry    int64    // expirable only: server clock, Unix ms
	Err       error
}

func semKind(expirable bool) primitiveKind {
	if expirable {
		return primExpirable
	}
	return primSemaphore
}

func (m *DelayedOpen) primitiveKey() primitiveKey  { return primitiveKey{primDelayed, m.Name} }
func (m *DelayedClose) primitiveKey() primitiveKey { return primitiveKey{primDelayed, m.Name} }
func (m *Take) primitiveKey() primitiveKey         { return primitiveKey{primQueue, m.Name} }
func (m *TakeCancel) primitiveKey() primitiveKey   { return primitiveKey{primQueue, m.Name} }
func (m *SemAcquire) primitiveKey() primitiveKey {
	return primitiveKey{semKind(m.Expirable), m.Name}
}
func (m *SemCancel) primitiveKey() primitiveKey   { return primitiveKey{semKind(m.Expirable), m.Name} }
func (m *Await) primitiveKey() primitiveKey       { return primitiveKey{primLatch, m.Name} }
func (m *AwaitCancel) primitiveKey() primitiveKey { return primitiveKey{primLatch, m.Name} }

func (*DelayedOpen) starts() bool  { return true }
func (*DelayedClose) starts() bool { return false }
func (*Take) starts() bool         { return true }
func (*TakeCancel) starts() bool   { return false }
func (*SemAcquire) starts() bool   { return true }
func (*SemCancel) starts() bool    { return false }
func (*Await) starts() bool        { return true }
func (*AwaitCancel) starts() bool  { return false }
