package primitive

import "github.com/actorlock/actorlock/internal/core"

// The root builds this package's handles through these (their fields are
// this package's).
func init() {
	core.Handles.Semaphore = func(h core.Handle) any { return &Semaphore{primitive: of(h, "a semaphore")} }
	core.Handles.PermitExpirableSemaphore = func(h core.Handle) any {
		return &PermitExpirableSemaphore{primitive: of(h, "a permit-expirable semaphore")}
	}
	core.Handles.CountDownLatch = func(h core.Handle) any { return &CountDownLatch{primitive: of(h, "a count-down latch")} }
	core.Handles.BlockingQueue = func(h core.Handle) any { return &BlockingQueue{primitive: of(h, "a queue")} }
	core.Handles.DelayedQueue = func(h core.Handle) any { return openDelayedQueue(of(h, "a delayed queue")) }
}

func of(h core.Handle, kind string) primitive {
	return primitive{rt: h.RT, name: h.Name, err: h.Err, kind: kind}
}
