package actors

import (
	"context"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// The runtime's record in Redis (Config.Record): which process this runtime
// is, so that an operator reading a lock's holders ("<runtime id>:<n>")
// can tell which host and pid hold it (cmd/actorlock). One SET per
// recordRefresh; a process that dies leaves it for at most recordTTL, and
// Close deletes it.
const (
	recordRefresh = 10 * time.Second
	recordTTL     = 3 * recordRefresh
)

// RuntimeRecord is the key and value of the runtime's record.
type RuntimeRecord struct {
	Key, Value string
}

// recorder keeps the runtime's record: written at start and every
// recordRefresh, off the actor. A Redis that refuses it (an ACL user not
// granted the key) is told once in the log, and then left alone: the record
// is for operators, never worth a failing runtime.
type recorder struct {
	env     *runtimeEnv
	stop    scheduler.CancelFunc
	refused bool
}

type (
	recordTick struct{}
	recordDone struct{ err error }
)

func (r *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.write(ctx)
		r.stop = r.env.timers.SendRepeatedly(recordRefresh, recordRefresh, ctx.Self(), &recordTick{})
	case *recordTick:
		r.write(ctx)
	case *recordDone:
		switch {
		case m.err == nil:
		case strings.Contains(m.err.Error(), "NOPERM"):
			r.refused = true
			r.stop()
			r.env.Log.Warn("actorlock: Redis refused the runtime's record (which tells operators this process's host and pid); going on without it",
				"key", r.env.Record.Key, "error", m.err)
		default:
			r.env.Log.Debug("actorlock: writing the runtime's record", "key", r.env.Record.Key, "error", m.err)
		}
	case *actor.Stopping:
		if r.stop != nil {
			r.stop()
		}
	}
}

func (r *recorder) write(ctx actor.Context) {
	if r.refused {
		return
	}
	rdb, rec := r.env.Redis, r.env.Record
	r.env.goCall(ctx.Self(), func(ctx context.Context) any {
		return &recordDone{err: rdb.Set(ctx, rec.Key, rec.Value, recordTTL).Err()}
	})
}
