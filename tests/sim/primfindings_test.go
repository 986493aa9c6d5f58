package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Findings of this simulation in the primitives (issue 33's part of it),
// each with a regression test in tests/ (sim_findings_test.go) that fails
// on a library that has it. SIM_KNOWN=P,...,U looks past them: the calls of
// each one's shape are spared the faults that expose it, so that a run on
// such a library can look for anything else (sim-mutants' baseline, say).
// The letters follow issue 31's (A-E) and its findings (V, W).
const (
	// P: a pop's hold outlives a refused connection: the call that ends
	// the hold (scripts/queue_taken.lua) is not tried again after a dial
	// that failed, so the item stays in the hold for good, the caller
	// having it (delivered and still in Redis) or not (no taker gets it).
	findingP = 'P'
	// Q: a pop (LMOVE, BLMOVE) that reaches Redis after its caller gave
	// up on it, and after its hold was ended, moves an item into a hold
	// nobody ends: no taker gets it. (Its command held back on its
	// connection, or written late: go-redis writes a command whose ctx
	// ended unless ContextTimeoutEnabled.)
	findingQ = 'Q'
	// R: a give-back the runtime makes for a caller that has gone (an
	// item a cancelled Take won or a pop found no taker for, permits a
	// cancelled Acquire won) is not tried again after a dial that failed:
	// the item or the permits are lost.
	findingR = 'R'
	// S: a blocking pop that go-redis replays after its connection broke
	// (the first BLMOVE ran; its reply was lost) and whose replay finds the
	// queue empty reports nothing, and the hold that the first one moved
	// an item into is never ended: no taker gets it.
	findingS = 'S'
	// T: a permit-expirable acquisition's script runs under no guard (it is
	// made idempotent by its permit ids alone): an attempt that reaches
	// Redis after its retry and after those permits were released (by
	// their caller, or by the undo of a call that failed) takes them
	// again, held by nobody until their lease ends (for ever without one).
	findingT = 'T'
	// U: a latch's awaiters are released by a read of the count that began
	// before the count was set again, or by a late "0" of its last round:
	// an Await that began with the count above zero returns nil. The
	// warden starts a latch's next round only once the name is quiet, so
	// the workload meets it no more; SIM_KNOWN=U spares nothing.
	findingU = 'U'
)

var primFindings = map[byte]string{
	findingP: "a pop's hold outlives a refused connection (its item is kept from every taker, or delivered and kept)",
	findingQ: "a pop reaching Redis after its hold was ended strands its item in a new hold",
	findingR: "a give-back for a caller that has gone is dropped after one refused connection (items or permits lost)",
	findingS: "a blocking pop replayed by go-redis after a broken connection, finding nothing, leaves the first pop's item in its hold",
	findingT: "a permit-expirable acquisition's attempt reaching Redis after its retry and the permits' release takes them again, for nobody",
	findingU: "a latch read or message from before the count was set again releases awaiters that began after",
}

// knownPrim reports whether SIM_KNOWN names primitive finding f.
func (c *config) knownPrim(f byte) bool { return c.known[defect31(f)] }

// isCmd reports whether c is the command name (lmove, blmove) or runs the
// script named name.
func isCmd(c redis.Cmder, names ...string) bool {
	args := c.Args()
	if len(args) == 0 {
		return false
	}
	name := strings.ToLower(fmt.Sprint(args[0]))
	if sc, ok := scriptCallOf(c); ok {
		name = sc.script
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// spareKnown turns off a drawn fault (kind; -1 then) that would expose a
// finding SIM_KNOWN names, on the calls of its shape.
func (f *faults) spareKnown(kind int, delay time.Duration, cmds []redis.Cmder) (int, time.Duration) {
	c := f.w.cfg
	for _, cmd := range cmds {
		switch {
		case c.knownPrim(findingP) && kind == fBeforeSend && isCmd(cmd, "queue_taken"),
			c.knownPrim(findingQ) && (kind == fLateDup || kind == fLateSend) && isCmd(cmd, "lmove", "blmove"),
			c.knownPrim(findingT) && (kind == fLateDup || kind == fLateSend) && isCmd(cmd, "semaphore_expirable_acquire"),
			c.knownPrim(findingR) && kind == fBeforeSend && isCmd(cmd, "queue_give_back", "semaphore_add", "semaphore_expirable_release"):
			return -1, 0
		}
	}
	return kind, delay
}

// sparesKnown reports whether cmds (a pipeline) carry a call of a
// finding SIM_KNOWN names, which a fault aimed at another call in the
// pipeline would hit too (a scenario's aimed refusal or late duplicate, a
// release outage): those then pass this pipeline by.
func (f *faults) sparesKnown(cmds []redis.Cmder) bool {
	c := f.w.cfg
	for _, cmd := range cmds {
		if c.knownPrim(findingP) && isCmd(cmd, "queue_taken") ||
			c.knownPrim(findingQ) && isCmd(cmd, "lmove", "blmove") ||
			c.knownPrim(findingR) && isCmd(cmd, "queue_give_back", "semaphore_add", "semaphore_expirable_release") ||
			c.knownPrim(findingT) && isCmd(cmd, "semaphore_expirable_acquire") {
			return true
		}
	}
	return false
}

// refusesDials: the dial hook refuses connections, which no call can be
// spared (SIM_KNOWN=P or R turns it off).
func (c *config) refusesDials() bool {
	return c.faultOn(fBeforeSend) && !c.knownPrim(findingP) && !c.knownPrim(findingR)
}

// blocking marks a connection whose last command was a blocking pop
// (SIM_KNOWN=S: killed connections spare them).
var blmoveCmd = []byte("blmove")

// runtimeLog is a runtime's logger: its warnings and errors about a
// primitive (an item or permits it could not give back, a hold it could
// not end) go into that name's history, where a violation shows them.
type runtimeLog struct {
	w     *world
	slot  int
	attrs []slog.Attr
}

func (l *runtimeLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

func (l *runtimeLog) Handle(_ context.Context, r slog.Record) error {
	var name string
	var permits int64
	var b strings.Builder
	fmt.Fprintf(&b, "runtime %d logged: %s", l.slot, r.Message)
	visit := func(a slog.Attr) bool {
		switch a.Key {
		case "queue", "semaphore", "latch":
			name = a.Value.String()
		case "permits":
			permits = a.Value.Int64()
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range l.attrs {
		visit(a)
	}
	r.Attrs(visit)
	m := l.w.model
	if p := m.prims[name]; p != nil {
		m.mu.Lock()
		p.record(-1, "%s", b.String())
		if p.s != nil && strings.Contains(r.Message, "permits may be lost") {
			// The documented loss (docs/guarantees.md, "Not guaranteed"): an
			// acquisition whose settling Redis never answered may have
			// taken its permits for nobody.
			p.s.unknown = append(p.s.unknown, -permits)
		}
		m.mu.Unlock()
	}
	return nil
}

func (l *runtimeLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &runtimeLog{w: l.w, slot: l.slot, attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...)}
}

func (l *runtimeLog) WithGroup(string) slog.Handler { return l }
