package sim

import (
	"context"
	"errors"
	"time"

	"github.com/actorlock/actorlock"
)

// mixedReads: red-team finding RT9-1. One owner reads twice, first with a
// short LeaseTime, then (a re-entry) with the watchdog, and unlocks the
// watchdog read while its release is held back past the short read's key.
// The short read ends meanwhile (the release may have run, and then
// nothing keeps it), which the exclusion check holds to its validity; the
// watchdog read waits for its release, which runs: its Unlock succeeds and
// its Held ends unlocked, not lost. Then a writer contends.
func (wk *worker) mixedReads() {
	m := wk.w.model
	rt, gen, f := wk.slotNow()
	n, _ := wk.take(kRW, scMixedReads, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	// Held back for less than a read timeout (the runtime does not retry
	// it) and longer than what is left of the short read's lease.
	delay := min(400*time.Millisecond, f.readTimeout-50*time.Millisecond)
	lease := delay / 2
	start := time.Now()
	short := wk.acquireOnce(ctx, n, gen, handle(rt, n, false), false, "scenario mixed reads: short read", time.Second, actorlock.LeaseTime(lease))
	if short == nil {
		return
	}
	defer wk.release(n, short)
	long := wk.acquireOnce(short.h.Context(), n, gen, handle(rt, n, false), false, "scenario mixed reads: watchdog read", time.Second)
	if long == nil {
		return
	}
	defer wk.release(n, long)
	held := f.aimAt(&aim{kind: fDelay, delay: delay, left: 1, match: func(sc scriptCall) bool {
		return sc.script == "rw_read_unlock" && arg(sc.keys, 0) == n.name && arg(sc.argv, 0) == long.owner && arg(sc.argv, 3) == "" // not a give-back
	}})
	defer f.unaim(held)
	err := wk.unlockCall(n, long, wk.w.cfg.callTimeout+delay, "scenario mixed reads: watchdog read unlock")
	select {
	case <-held.hits:
	default:
		return // the release was not the one held back
	}
	if err != nil || !m.faultless(n, start, true) || time.Since(short.since) < lease {
		return
	}
	wk.w.judged[scMixedReads].Add(1)
	// A mid-run Close ends every acquisition at once (ErrClosed), one
	// whose Unlock is on its way too: nothing would end it at its
	// validity after that (red-team finding RT27-2, seed 213).
	if cause := long.h.Err(); !errors.Is(cause, actorlock.ErrUnlocked) && !errors.Is(cause, actorlock.ErrClosed) {
		m.mu.Lock()
		m.fail("an acquisition whose Unlock succeeded ends unlocked, not lost", n, []string{long.field},
			"the watchdog read's Unlock, held back %v while its owner's short read (LeaseTime %v) ran out, returned nil, and its Held ended with %v", delay, lease, cause)
		m.mu.Unlock()
	}
	wk.contend(n, true, 300*time.Millisecond, "scenario mixed reads: a writer")
}
