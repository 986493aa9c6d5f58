// Package observe holds what an actorlock runtime reports about itself and
// its locks: the events of actorlock.WithEvents, the holds that
// Runtime.Held lists, the counts of Runtime.Stats, and Redis's view of a
// lock (Lock.Holders, Lock.Waiters). It has only types; the runtime and its
// handles fill them in. docs/observability.md tells what each costs, with
// the metrics and traces of actorlock.WithMeterProvider and
// actorlock.WithTracerProvider.
package observe
