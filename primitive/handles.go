package primitive

import "github.com/actorlock/actorlock/internal/core"

// The root builds this package's handles through these (their fields are
// this package's).
func init() {
	core.Handles.Semaphore = func(h core.Handle) any { return &Semaphore{primitive: of(h)} }
	core.Handles.PermitExpirableSemaphore = func(h core.Handle) any { return &PermitExpirableSemaphore{primitive: of(h)} }
	core.Handles.CountDownLatch = func(h core.Handle) any { return &CountDownLatch{primitive: of(h)} }
	core.Handles.BlockingQueue = func(h core.Handle) any { return &BlockingQueue{primitive: of(h)} }
	core.Handles.DelayedQueue = func(h core.Handle) any { return openDelayedQueue(of(h)) }
}

func of(h core.Handle) primitive { return primitive{rt: h.RT, name: h.Name, err: h.Err} }
