package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// fault is one injected fault, as the parent saw it.
type fault struct {
	Kind       string
	Start, End int64
	// Proc is the worker process it hit, or -1 for all (a Redis fault).
	Proc int
	// Excuses: docs/guarantees.md says a hold can be lost without Done() closing
	// first under this fault (a holder paused past its lease, Redis losing
	// acknowledged writes). Holds it overlaps may overlap the next owner's;
	// the fenced resource must then reject the stale writes, which the
	// register model checks.
	Excuses bool
	// Hits counts what the fault did that its check can see (segments
	// lost, names whose fencing counter it rolled back).
	Hits int
}

// bounds are the claims the checker holds the history to.
type bounds struct {
	Lease time.Duration
	Wait  time.Duration
	// WaitSlack: an Acquire returns within Wait + WaitSlack.
	WaitSlack time.Duration
	// DoneSlack: a hold counts as ended DoneSlack before its worker saw
	// Done() close (the worker's goroutine takes that long to run under
	// load); another grant before that is a violation.
	DoneSlack time.Duration
	// Stall: after a fault ends, the next grant comes within Stall.
	Stall time.Duration
}

type hold struct {
	c, p      int
	name      string
	call, got int64
	tok       int64
	lost      int64 // Done closed with ErrLost (0: never seen)
	unl, unlr int64 // first Unlock call, last Unlock return
	unlOk     bool  // the last Unlock ended the hold
	killed    int64 // its process was SIGKILLed at (0: not)
	end       [2]int64
	excused   bool
}

type regOp struct {
	c         int
	name      string
	write     bool
	tok, val  int64
	call, ret int64
	known, ok bool
	rval      int64
}

// verdict is what check found: problems (empty when every guarantee held)
// and the figures of the run.
type verdict struct {
	Problems        []string
	Grants          int
	Seconds         float64
	StaleRejected   int // fenced writes the resource refused
	ExcusedHolds    int
	Overtaken       int           // excused holds whose lock another client was granted before they ended
	KilledOvertaken int           // holds of killed workers taken over (the lower bound checked)
	WorstDoneMargin time.Duration // least (next grant - Done seen) over lost holds
	DoneMargins     int
	WorstOvershoot  time.Duration // worst (Acquire duration - wait time)
	OvershootDuring string        // the faults under way during that Acquire
	LongestStall    time.Duration
	StallAfter      string
	Faults          map[string]int

	holds  []*hold // for the per-fault checks
	faults []fault
	bounds bounds
}

func (v *verdict) fail(format string, args ...any) {
	if len(v.Problems) < 30 {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

func (v *verdict) String() string {
	kinds := make([]string, 0, len(v.Faults))
	for k, n := range v.Faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("grants %d in %.0f s (%.1f/s); faults %s; stale writes rejected %d; excused holds %d (overtaken %d); killed holders overtaken %d; "+
		"worst Done() margin %v over %d losses; worst wait overshoot %v (during: %s); longest stall after a fault %v (%s)",
		v.Grants, v.Seconds, float64(v.Grants)/v.Seconds, strings.Join(kinds, " "), v.StaleRejected, v.ExcusedHolds, v.Overtaken, v.KilledOvertaken,
		v.WorstDoneMargin, v.DoneMargins, v.WorstOvershoot, v.OvershootDuring, v.LongestStall, v.StallAfter)
}

// check verifies a run's history: the lock is linearizable as a lock with
// increasing tokens (porcupine), the fenced register as a fenced counter
// that never loses an accepted increment (porcupine), waits end on time,
// a killed holder is not overtaken early, and grants resume after faults.
func check(events []event, faults []fault, killed map[int]int64, b bounds) *verdict {
	v := &verdict{Faults: map[string]int{}, WorstDoneMargin: time.Duration(never), faults: faults, bounds: b}
	for _, f := range faults {
		v.Faults[f.Kind]++
	}
	byClient := map[int][]event{}
	var first, last int64 = never, 0
	for _, e := range events {
		if e.K == "mem" { // a worker's resource sample, not a client's step
			continue
		}
		byClient[e.C] = append(byClient[e.C], e)
		first, last = min(first, e.T), max(last, e.T)
	}
	v.Seconds = float64(last-first) / 1e9
	// Pauses of worker processes (stop/cont), by process.
	pauses := map[int][][2]int64{}
	for _, f := range faults {
		if f.Excuses && f.Proc >= 0 {
			pauses[f.Proc] = append(pauses[f.Proc], [2]int64{f.Start, f.End})
		}
	}
	var holds []*hold
	var regs []regOp
	for c, evs := range byClient {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].T < evs[j].T })
		var acq *event
		var pend *regOp
		var stop int64
		byTok := map[int64]*hold{}
		var cur *hold
		p := evs[0].P
		for i := range evs {
			e := &evs[i]
			switch e.K {
			case "acq":
				acq = e
			case "got":
				if acq == nil {
					v.fail("client %d: grant without acquire", c)
					continue
				}
				cur = &hold{c: c, p: p, name: e.N, call: acq.T, got: e.T, tok: e.Tok, killed: killed[p]}
				holds = append(holds, cur)
				byTok[e.Tok] = cur
				acq = nil
			case "nogot":
				if acq == nil {
					continue
				}
				if !pausedDuring(pauses[p], acq.T, e.T) && stop == 0 {
					over := time.Duration(e.T-acq.T) - time.Duration(acq.Wait)
					if over > v.WorstOvershoot {
						v.WorstOvershoot, v.OvershootDuring = over, faultsDuring(faults, acq.T, e.T)
					}
					if over > b.WaitSlack {
						v.fail("client %d: Acquire(%s, wait %v) returned after %v (%s)", c, acq.N,
							time.Duration(acq.Wait), time.Duration(e.T-acq.T), e.Err)
					}
				}
				acq = nil
			case "lost":
				if h := byTok[e.Tok]; h != nil && h.lost == 0 {
					h.lost = e.T
				}
			case "unl":
				if cur != nil && cur.unl == 0 {
					cur.unl = e.T
				}
			case "unlr":
				if cur != nil {
					cur.unlr, cur.unlOk = e.T, e.Ok
				}
			case "rd", "wr":
				pend = &regOp{c: c, name: e.N, write: e.K == "wr", tok: e.Tok, val: e.Val, call: e.T, ret: never}
			case "rdr", "wrr":
				if pend == nil {
					continue
				}
				pend.ret, pend.known, pend.ok, pend.rval = e.T, true, e.Ok, e.Val
				if pend.write && !e.Ok {
					v.StaleRejected++
				}
				regs = append(regs, *pend)
				pend = nil
			case "stop":
				stop = e.T
			case "cont":
				pauses[p] = append(pauses[p], [2]int64{stop, e.T})
				stop = 0
			}
		}
		if stop != 0 { // killed while stopped
			pauses[p] = append(pauses[p], [2]int64{stop, never})
		}
		// An operation the worker's death cut short may or may not have
		// taken effect. An acquire cut short is left out: a grant nobody
		// saw only keeps others waiting, until its lease ends.
		if pend != nil {
			regs = append(regs, *pend)
		}
	}
	for _, h := range holds {
		endHold(h, faults, pauses, b)
		if h.excused {
			v.ExcusedHolds++
		}
	}
	v.Grants, v.holds = len(holds), holds
	checkLock(v, holds)
	checkRegister(v, regs)
	checkMargins(v, holds, b)
	checkKills(v, holds, killed, b)
	checkStalls(v, holds, faults, last, b)
	return v
}

// faultsDuring names the faults under way between from and to.
func faultsDuring(faults []fault, from, to int64) string {
	var out []string
	for _, f := range faults {
		if f.Start < to && f.End > from {
			out = append(out, f.Kind)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func pausedDuring(ps [][2]int64, from, to int64) bool {
	for _, p := range ps {
		if p[0] < to && p[1] > from {
			return true
		}
	}
	return false
}

// endHold sets the interval in which h's hold ended, as far as its worker
// could know: an Unlock that succeeded ends it between its call and return;
// a loss ends it by the time Done() was seen (less DoneSlack); a killed
// process's hold ends some time after the kill; under a fault that excuses
// it, the hold may end from the fault's start.
func endHold(h *hold, faults []fault, pauses map[int][][2]int64, b bounds) {
	ret := int64(never)
	if h.lost != 0 {
		ret = h.lost
	}
	if h.unlr != 0 && h.unlOk {
		ret = min(ret, h.unlr)
	}
	call := ret
	if h.lost != 0 {
		call = h.lost - int64(b.DoneSlack)
	}
	if h.unl != 0 {
		call = min(call, h.unl)
	}
	if h.killed != 0 && h.killed < ret {
		call = min(call, h.killed)
	}
	// A killed holder's hold is over in Redis a lease after the kill at
	// the latest: faults after that do not concern it.
	last := ret
	if h.killed != 0 {
		last = min(ret, h.killed+int64(b.Lease))
	}
	for _, f := range faults {
		if f.Excuses && (f.Proc < 0 || f.Proc == h.p) && f.Start < last && f.End > h.got {
			h.excused = true
			call = min(call, max(h.got, f.Start))
		}
	}
	for _, ps := range pauses[h.p] {
		if ps[0] < last && ps[1] > h.got {
			h.excused = true
			call = min(call, max(h.got, ps[0]))
		}
	}
	if call == never { // no unlock, no loss seen, not killed: ends any time
		call = h.got
	}
	h.end = [2]int64{max(call, h.got), ret}
}

type lockIn struct {
	name string
	c    int
	end  bool
}

type lockState struct {
	holder int // client, -1 free
	last   int64
}

// lockModel: a lock with fencing tokens. A grant needs the lock free and a
// token above every earlier one; only the holder's hold can end.
var lockModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		return partition(h, func(o porcupine.Operation) string { return o.Input.(lockIn).name })
	},
	Init: func() any { return lockState{holder: -1} },
	Step: func(s, in, out any) (bool, any) {
		st, i := s.(lockState), in.(lockIn)
		if i.end {
			return st.holder == i.c, lockState{holder: -1, last: st.last}
		}
		tok := out.(int64)
		return st.holder == -1 && tok > st.last, lockState{holder: i.c, last: tok}
	},
	DescribeOperation: func(in, out any) string {
		i := in.(lockIn)
		if i.end {
			return fmt.Sprintf("c%d end", i.c)
		}
		return fmt.Sprintf("c%d grant %v", i.c, out)
	},
}

func partition(h []porcupine.Operation, key func(porcupine.Operation) string) [][]porcupine.Operation {
	m := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range h {
		k := key(o)
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
		m[k] = append(m[k], o)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

func checkLock(v *verdict, holds []*hold) {
	ops := make([]porcupine.Operation, 0, 2*len(holds))
	for _, h := range holds {
		ops = append(ops,
			porcupine.Operation{ClientId: h.c, Input: lockIn{name: h.name, c: h.c}, Call: h.call, Output: h.tok, Return: h.got},
			porcupine.Operation{ClientId: h.c, Input: lockIn{name: h.name, c: h.c, end: true}, Call: h.end[0], Return: h.end[1]})
	}
	switch res := porcupine.CheckOperationsTimeout(lockModel, ops, 3*time.Minute); res {
	case porcupine.Ok:
	case porcupine.Illegal:
		v.fail("lock history is not linearizable: two holds overlapped without an excusing fault, or a token did not increase (%s)", describeOverlap(holds))
	default:
		v.fail("lock linearizability check gave %q", res)
	}
}

// describeOverlap names the first pair of overlapping holds, for the
// failure message.
func describeOverlap(holds []*hold) string {
	s := append([]*hold(nil), holds...)
	sort.Slice(s, func(i, j int) bool { return s[i].got < s[j].got })
	last := map[string]*hold{}
	for _, h := range s {
		if p := last[h.name]; p != nil && (p.end[0] > h.got || p.tok >= h.tok) {
			return fmt.Sprintf("%s: client %d token %d held until [%d,%d] (excused %v); client %d token %d granted at %d, %v earlier",
				h.name, p.c, p.tok, p.end[0], p.end[1], p.excused, h.c, h.tok, h.got, time.Duration(p.end[0]-h.got))
		}
		last[h.name] = h
	}
	return "no pair found by grant order"
}

type regIn struct {
	name  string
	write bool
	tok   int64
	val   int64
}

type regOut struct {
	known, ok bool
	val       int64
}

type regState struct{ fence, val int64 }

// registerModel: the fenced resource. An operation is accepted iff its token
// is at least the fence, and raises the fence; a read returns the value; an
// accepted write must be the value read plus one, or an update was lost.
// An operation whose reply was never seen may or may not have happened.
var registerModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		return partition(h, func(o porcupine.Operation) string { return o.Input.(regIn).name })
	},
	Init: func() []any { return []any{regState{}} },
	Step: func(s, in, out any) []any {
		st, i, o := s.(regState), in.(regIn), out.(regOut)
		accept := i.tok >= st.fence
		next := st
		if accept {
			next.fence = i.tok
			if i.write {
				next.val = i.val
			}
		}
		if !o.known {
			if accept && i.write && i.val != st.val+1 {
				return []any{st}
			}
			return []any{st, next}
		}
		if o.ok != accept || (accept && !i.write && o.val != st.val) || (accept && i.write && i.val != st.val+1) {
			return nil
		}
		return []any{next}
	},
}

func checkRegister(v *verdict, regs []regOp) {
	ops := make([]porcupine.Operation, 0, len(regs))
	for _, r := range regs {
		ops = append(ops, porcupine.Operation{ClientId: r.c, Input: regIn{name: r.name, write: r.write, tok: r.tok, val: r.val},
			Call: r.call, Output: regOut{known: r.known, ok: r.ok, val: r.rval}, Return: r.ret})
	}
	switch res := porcupine.CheckOperationsTimeout(registerModel.ToModel(), ops, 3*time.Minute); res {
	case porcupine.Ok:
	case porcupine.Illegal:
		v.fail("fenced resource history is not linearizable: a lower token was accepted or an accepted update was lost")
	default:
		v.fail("register linearizability check gave %q", res)
	}
}

// nextGrant is the first hold of name granted after t to another client.
func nextGrant(sorted []*hold, name string, c int, t int64) *hold {
	for _, h := range sorted {
		if h.name == name && h.c != c && h.got > t {
			return h
		}
	}
	return nil
}

func byGrant(holds []*hold) []*hold {
	s := append([]*hold(nil), holds...)
	sort.Slice(s, func(i, j int) bool { return s[i].got < s[j].got })
	return s
}

// checkMargins measures, for every hold lost without an excusing fault, how
// long before the next owner's grant its worker saw Done() close.
func checkMargins(v *verdict, holds []*hold, b bounds) {
	s := byGrant(holds)
	for _, h := range s {
		if h.excused {
			if n := nextGrant(s, h.name, h.c, h.got); n != nil && n.got < h.end[1] {
				v.Overtaken++
			}
		}
		// A loss seen after its Unlock was sent is the release's reply
		// going missing, not a loss: the hold ended with the Unlock.
		if h.lost == 0 || h.excused || (h.unl != 0 && h.unl < h.lost) {
			continue
		}
		if n := nextGrant(s, h.name, h.c, h.got); n != nil {
			m := time.Duration(n.got - h.lost)
			v.DoneMargins++
			v.WorstDoneMargin = min(v.WorstDoneMargin, m)
		}
	}
	if v.DoneMargins == 0 {
		v.WorstDoneMargin = 0
	}
}

// checkKills: the lock of a holder killed by SIGKILL is not granted to
// another before the key expires, which is at least 2/3 of a lease after the
// kill (the watchdog renews every lease/3), less scheduling slack.
func checkKills(v *verdict, holds []*hold, killed map[int]int64, b bounds) {
	s := byGrant(holds)
	floor := 2*b.Lease/3 - 150*time.Millisecond
	for _, h := range s {
		if h.killed == 0 || h.got > h.killed || h.unl != 0 || h.lost != 0 || h.excused {
			continue
		}
		if n := nextGrant(s, h.name, h.c, h.killed); n != nil {
			v.KilledOvertaken++
			if gap := time.Duration(n.got - h.killed); gap < floor {
				v.fail("%s: holder killed at %d, client %d granted %v later (expected >= %v)", h.name, h.killed, n.c, gap, floor)
			}
		}
	}
}

// checkStalls: after each fault ends, grants resume within b.Stall.
func checkStalls(v *verdict, holds []*hold, faults []fault, last int64, b bounds) {
	s := byGrant(holds)
	for _, f := range faults {
		i := sort.Search(len(s), func(i int) bool { return s[i].got >= f.End })
		if i == len(s) {
			if f.End+int64(b.Stall) < last {
				v.fail("no grant after fault %s ended", f.Kind)
			}
			continue // else the run ended too soon after it to tell
		}
		st := time.Duration(s[i].got - f.End)
		if st > v.LongestStall {
			v.LongestStall, v.StallAfter = st, f.Kind
		}
		if st > b.Stall {
			v.fail("grants stalled %v after fault %s (bound %v)", st, f.Kind, b.Stall)
		}
	}
}
