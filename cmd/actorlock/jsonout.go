package main

import (
	"time"

	"github.com/actorlock/actorlock/internal/inspect"
)

// The JSON that inspect and queue stats print: one shape per kind, each
// field meaningful for it, durations as whole milliseconds with the unit in
// the name, times in RFC 3339. docs/cli.md documents each shape, and
// TestCLIJSONShapes pins them: a field renamed, added or retyped here is a
// change of the CLI's contract.

// lockJSON is a reentrant lock.
type lockJSON struct {
	Name   string       `json:"name"`
	Kind   inspect.Kind `json:"kind"`
	Locked bool         `json:"locked"`
	// TTLMs is the lease left: 0 when free, -1 when the key has no expiry.
	TTLMs     int64        `json:"ttl_ms"`
	Holders   []holderJSON `json:"holders"`
	LastToken *int64       `json:"last_token"` // null: none issued
}

type holderJSON struct {
	Owner   string           `json:"owner"`
	Holds   int64            `json:"holds"`
	Process *inspect.Process `json:"process,omitempty"` // an actorlock runtime's host and pid
}

// fairLockJSON is a fair lock: a lock with a queue.
type fairLockJSON struct {
	lockJSON
	WaitersTotal int64        `json:"waiters_total"`
	Waiters      []waiterJSON `json:"waiters"` // head first, at most --limit
}

type waiterJSON struct {
	Owner       string    `json:"owner"`
	Deadline    time.Time `json:"deadline"`
	RemainingMs int64     `json:"remaining_ms"`
}

// readWriteLockJSON is a read-write lock.
type readWriteLockJSON struct {
	Name      string         `json:"name"`
	Kind      inspect.Kind   `json:"kind"`
	Locked    bool           `json:"locked"`
	Mode      string         `json:"mode"` // "read", "write", "" when free
	TTLMs     int64          `json:"ttl_ms"`
	Holders   []rwHolderJSON `json:"holders"`
	LastToken *int64         `json:"last_token"`
}

type rwHolderJSON struct {
	Owner      string `json:"owner"`
	ReadHolds  int64  `json:"read_holds"`
	WriteHolds int64  `json:"write_holds"`
	// ReadTTLsMs is each read hold's lease left (hold n at index n-1): 0
	// once its key is gone, -1 without expiry.
	ReadTTLsMs []int64          `json:"read_ttls_ms"`
	Process    *inspect.Process `json:"process,omitempty"`
}

type semaphoreJSON struct {
	Name      string       `json:"name"`
	Kind      inspect.Kind `json:"kind"`
	Available int64        `json:"available"`
}

type latchJSON struct {
	Name  string       `json:"name"`
	Kind  inspect.Kind `json:"kind"`
	Count int64        `json:"count"`
}

type permitSemaphoreJSON struct {
	Name      string       `json:"name"`
	Kind      inspect.Kind `json:"kind"`
	Available int64        `json:"available"`
	Taken     int64        `json:"taken"`
	Permits   []permitJSON `json:"permits"` // soonest expiry first, at most --limit
}

type permitJSON struct {
	ID string `json:"id"`
	// Expiry and ExpiresInMs are null for a permit without lease;
	// ExpiresInMs is negative once expired (back to the pool on the
	// semaphore's next call).
	Expiry      *time.Time `json:"expiry"`
	ExpiresInMs *int64     `json:"expires_in_ms"`
}

type queueJSON struct {
	Name  string       `json:"name"`
	Kind  inspect.Kind `json:"kind"`
	Ready int64        `json:"ready"` // items in the list
}

type delayedQueueJSON struct {
	queueJSON
	Delayed int64 `json:"delayed"`
	// NextDue and NextDueInMs are null when nothing is delayed.
	NextDue     *time.Time `json:"next_due"`
	NextDueInMs *int64     `json:"next_due_in_ms"`
}

func ms(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// jsonOf is o in the JSON shape of its kind.
func jsonOf(o *inspect.Object) any {
	var token *int64
	if o.TokenSet {
		token = &o.Token
	}
	switch o.Kind {
	case inspect.Lock, inspect.FairLock:
		l := lockJSON{Name: o.Name, Kind: o.Kind, Locked: o.Locked(), TTLMs: ms(o.TTL), Holders: []holderJSON{}, LastToken: token}
		for _, h := range o.Holds {
			l.Holders = append(l.Holders, holderJSON{Owner: h.Owner, Holds: h.Count, Process: h.Process})
		}
		if o.Kind == inspect.Lock {
			return l
		}
		f := fairLockJSON{lockJSON: l, WaitersTotal: o.WaitersTotal, Waiters: []waiterJSON{}}
		for _, w := range o.Waiters {
			f.Waiters = append(f.Waiters, waiterJSON{Owner: w.Owner, Deadline: w.Deadline.UTC(), RemainingMs: w.Remaining.Milliseconds()})
		}
		return f
	case inspect.ReadWriteLock:
		rw := readWriteLockJSON{Name: o.Name, Kind: o.Kind, Locked: o.Locked(), Mode: o.Mode, TTLMs: ms(o.TTL), Holders: []rwHolderJSON{}, LastToken: token}
		for _, h := range o.Holds {
			ttls := make([]int64, len(h.ReadTTLs))
			for i, d := range h.ReadTTLs {
				ttls[i] = ms(d)
			}
			rw.Holders = append(rw.Holders, rwHolderJSON{Owner: h.Owner, ReadHolds: h.Count, WriteHolds: h.Writes, ReadTTLsMs: ttls, Process: h.Process})
		}
		return rw
	case inspect.Semaphore:
		return semaphoreJSON{Name: o.Name, Kind: o.Kind, Available: o.Value}
	case inspect.CountDownLatch:
		return latchJSON{Name: o.Name, Kind: o.Kind, Count: o.Value}
	case inspect.ExpirableSemaphore:
		s := permitSemaphoreJSON{Name: o.Name, Kind: o.Kind, Available: o.Value, Taken: o.PermitsTotal, Permits: []permitJSON{}}
		for _, p := range o.Permits {
			pj := permitJSON{ID: p.ID}
			if !p.Expiry.IsZero() {
				expiry, in := p.Expiry.UTC(), p.Remaining.Milliseconds()
				pj.Expiry, pj.ExpiresInMs = &expiry, &in
			}
			s.Permits = append(s.Permits, pj)
		}
		return s
	case inspect.Queue:
		return queueJSON{Name: o.Name, Kind: o.Kind, Ready: o.Queue.Ready}
	}
	// inspect.DelayedQueue
	q := delayedQueueJSON{queueJSON: queueJSON{Name: o.Name, Kind: o.Kind, Ready: o.Queue.Ready}, Delayed: o.Queue.Delayed}
	if !o.Queue.NextDue.IsZero() {
		due, in := o.Queue.NextDue.UTC(), o.Queue.NextDueIn.Milliseconds()
		q.NextDue, q.NextDueInMs = &due, &in
	}
	return q
}
