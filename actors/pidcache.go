package actors

import (
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
)

// pidCacheOffset is the offset of the field where protoactor's PID caches
// its process (p *Process); ok is false if a protoactor version lacks it.
var pidCacheOffset, pidCacheOK = func() (uintptr, bool) {
	f, ok := reflect.TypeOf(actor.PID{}).FieldByName("p")
	if !ok || f.Type != reflect.TypeOf((*actor.Process)(nil)) {
		return 0, false
	}
	return f.Offset, true
}()

// dropProcessCache clears the process a stopped actor's PID caches, the way
// protoactor itself does (atomically, pid.go ref) when it next uses a PID
// whose process is dead. A copy of the PID that protoactor keeps (a slot past
// the end of an actor's set of children, which PIDSet.Remove does not clear)
// would otherwise keep the whole dead actor in memory. Other goroutines may
// still hold the PID (a timer due to send to it): they find no cache and look
// the process up, as for any stopped actor. proto.Reset would race with them.
func dropProcessCache(pid *actor.PID) {
	if pidCacheOK && pid != nil {
		atomic.StorePointer((*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(pid), pidCacheOffset)), nil)
	}
}
