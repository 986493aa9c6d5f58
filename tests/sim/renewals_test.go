package sim

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewals records what a runtime's watchdog renewal calls did, as the
// runtime saw them at the call boundary (its client's hook): when each left,
// when its outcome came back, and whether it renewed a given hold. The loss
// check (checkLoss) judges by it whether faults kept every renewal of a
// hold from being confirmed.
type renewals struct {
	mu sync.Mutex
	// byHold: the last calls that carried (name, owner), oldest first.
	byHold map[renewKey][]renewCall
	// rounds: the last renewal calls of the runtime, whatever they carried
	// (ok: every hold in it renewed); the watchdog starts no round while
	// one is out, so a call held up holds up every renewal behind it.
	rounds []renewCall
}

type renewKey struct{ name, owner string }

// renewCall is one renewal call: sent before it left, done when its
// outcome reached the runtime; ok: it renewed (the script found the owner
// holding and its reply came back).
type renewCall struct {
	sent, done time.Time
	ok         bool
}

const (
	renewsPerHold = 16
	renewRounds   = 64
)

func newRenewals() renewals { return renewals{byHold: map[renewKey][]renewCall{}} }

// observe records the renewal calls among cmds, sent at sent, whose
// outcome is in now (deferred by the hooks, so that it sees what the
// runtime sees, injected faults included).
func (r *renewals) observe(w *world, cmds []redis.Cmder, sent time.Time) {
	done := time.Now()
	some, all := false, true
	for _, c := range cmds {
		sc, ok := scriptCallOf(c)
		if !ok || sc.script != "lock_renew" && sc.script != "rw_renew" {
			continue
		}
		some = true
		var res []any
		if cmd, ok := c.(*redis.Cmd); ok && c.Err() == nil {
			res, _ = cmd.Val().([]any)
		}
		r.mu.Lock()
		for i, name := range sc.keys {
			// lock_renew: ARGV lease, owner per key; rw_renew: lease,
			// then owner, write field, read count, key prefix per key.
			at := 1 + i
			if sc.script == "rw_renew" {
				at = 1 + 4*i
			}
			if at >= len(sc.argv) {
				continue
			}
			// rw_renew answers 1 + a mask of the read-hold keys it found.
			renewed := false
			if i < len(res) {
				n, _ := res[i].(int64)
				renewed = n >= 1
			}
			all = all && renewed
			owners := []string{sc.argv[at]}
			if sc.script == "rw_renew" && at+1 < len(sc.argv) {
				owners = append(owners, sc.argv[at+1]) // the model's write holds are owner:write
			}
			for _, owner := range owners {
				k := renewKey{name, owner}
				calls := append(r.byHold[k], renewCall{sent: sent, done: done, ok: renewed})
				if len(calls) > renewsPerHold {
					calls = calls[len(calls)-renewsPerHold:]
				}
				r.byHold[k] = calls
			}
		}
		r.mu.Unlock()
	}
	if !some {
		return
	}
	r.mu.Lock()
	if r.rounds = append(r.rounds, renewCall{sent: sent, done: done, ok: all}); len(r.rounds) > renewRounds {
		r.rounds = r.rounds[len(r.rounds)-renewRounds:]
	}
	r.mu.Unlock()
}

// of is a copy of the calls that carried (name, owner).
func (r *renewals) of(name, owner string) []renewCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]renewCall(nil), r.byHold[renewKey{name, owner}]...)
}

// heldUp reports whether a renewal call of the runtime that did not renew
// everything in time was out over [from, to]: the watchdog sends no round
// while one is out.
func (r *renewals) heldUp(from, to time.Time, late time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.rounds {
		if c.sent.Before(to) && c.done.After(from) && (!c.ok || c.done.Sub(c.sent) > late) {
			return true
		}
	}
	return false
}
