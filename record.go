package actorlock

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/scripts"
)

// runtimeRecord is what the runtime records about itself in Redis, under
// its id, so that an operator reading a lock's holders ("<runtime id>:<n>")
// can tell which process holds it: cmd/actorlock shows the host and pid
// next to each holder. It is actorlock's own key (RuntimeKey), beside
// Redisson's layout, refreshed by an actor of the runtime and deleted by
// Close.
func runtimeRecord(id string, cfg *config) actors.RuntimeRecord {
	if cfg.noRecord {
		return actors.RuntimeRecord{}
	}
	host, err := os.Hostname()
	if err != nil {
		host = "?"
	}
	v, _ := json.Marshal(struct {
		Host    string    `json:"host"`
		PID     int       `json:"pid"`
		Started time.Time `json:"started"`
	}{host, os.Getpid(), time.Now().UTC().Truncate(time.Second)})
	return actors.RuntimeRecord{Key: scripts.RuntimeKey(cfg.keyPrefix, id), Value: string(v)}
}

// WithRuntimeRecord(false) keeps the runtime from recording its host and
// pid in Redis. By default it does, under "actorlock_runtime:<runtime id>"
// (after the WithKeyPrefix prefix), a string of a few dozen bytes that one
// SET refreshes every 10 s with a 30 s expiry and Close deletes, so that
// cmd/actorlock can show which process holds a lock. An ACL user must be
// granted that key (docs/security.md); a refusal is logged once.
func WithRuntimeRecord(on bool) Option {
	return func(c *config) { c.noRecord = !on }
}

// deleteRecord deletes the runtime's record, best effort: a Redis that
// cannot be reached lets it expire by its TTL instead.
func (rt *Runtime) deleteRecord(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, recordDeleteWait)
	defer cancel()
	_ = rt.rdb.Del(ctx, scripts.RuntimeKey(rt.keyPrefix, rt.id)).Err()
}

// recordDeleteWait bounds deleting the record at Close: a Redis that does
// not answer at once (down, paused) must not hold Close up.
const recordDeleteWait = 200 * time.Millisecond
