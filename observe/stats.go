package observe

// Stats is a snapshot of the state a runtime keeps, as
// actorlock.Runtime.Stats reports it.
type Stats struct {
	// LockActors: lock names with state in this process (held, waited
	// for, or used within the idle timeout).
	LockActors int
	// DormantLocks: of LockActors, names held here without a live actor:
	// after the idle timeout a name whose only state is Go callers' holds
	// is kept as a compact record, its actor started again by the next
	// request for it, by its validity deadline or by Close.
	DormantLocks int
	// Subscriptions: pub/sub channels and patterns subscribed.
	Subscriptions int
	// Renewals: holds the watchdog renews.
	Renewals int
	// DelayedQueueMovers: delayed queues whose due items this runtime
	// moves (a handle is open, or items are pending).
	DelayedQueueMovers int
	// PrimitiveActors: blocking queues, semaphores and count-down latches
	// with state in this process (waited on, or used within the idle
	// timeout).
	PrimitiveActors int
	// DroppedEvents is not state but a count since New: the events not
	// delivered to the actorlock.WithEvents callback because it fell behind
	// (more than 1024 waiting) or the runtime was closed.
	DroppedEvents uint64
}
