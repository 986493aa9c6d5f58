// Package actors is actorlock's machinery: the actors behind package
// actorlock's public API. It is importable only because the repository's
// layout keeps it at the top level; it makes no compatibility promise and
// exports only what package actorlock calls.
//
// A runtime's actors (see docs/design.md, "The actors"): a supervisor
// (supervisor.go) owning the pub/sub router (pubsub.go), the renewal
// watchdog (renewal.go), the lock manager (manager.go), which spawns one lock
// actor per lock name and kind (lock.go), and the primitives actor
// (primitives.go), which spawns one child per queue, semaphore, latch and
// delayed queue (queues.go, semaphore.go, latch.go, delayqueue.go). Handle
// (supervisor.go, handle.go) is how package actorlock drives them.
package actors
