package main

import (
	"fmt"
	"sync"
)

// section is one lock's part of a critical section. Times are wall-clock
// Unix nanoseconds, one machine's clock for every node.
type section struct {
	node   int
	id     uint64
	lock   string
	kind   string
	lead   bool // the section's first lock (a MultiLock section counts once)
	tok    int64
	wait   int64 // asked for the lock
	start  int64 // held it
	end    int64 // left (before the unlock); the kill time if its node was killed in it
	open   bool
	killed bool // its node was killed inside it
	wrote  bool // its write went through
}

type secKey struct {
	node int
	id   uint64
}

type nodeState struct {
	addr    string
	pid     int
	ready   bool
	stopped bool // its workload has stopped
	acqs    int  // sections entered (a MultiLock counts once)
	waiters int64
}

// offer is a delayed job as its producer reported it.
type offer struct {
	node    int
	at      int64 // about to Offer
	delay   int64
	offered bool // Offer returned nil
	failed  bool // Offer failed: stored or not
}

// agg is everything the nodes reported, in the orchestrator.
type agg struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change

	nodes     []nodeState
	open      map[secKey][]*section
	secs      []*section
	offers    map[string]*offer
	delivered map[string]int
	dlvOrder  []string // deliveries in arrival order (lateness)
	dlvAt     map[string]int64
	reads     int
	torn      int
	relics    int // torn reads of a write the kill cut short
	timeouts  map[string]int
	switches  int
	lost      int
	lostMsgs  []string
	errs      []string

	victim      int
	takeoverAt  int64 // first acquisition of the leader lock by another node than the victim
	killAt      int64 // 0: not killed
	abdicatedAt int64 // 0: did not abdicate
}

func newAgg(nodes int) *agg {
	return &agg{
		changed: make(chan struct{}), nodes: make([]nodeState, nodes), open: map[secKey][]*section{},
		offers: map[string]*offer{}, delivered: map[string]int{}, dlvAt: map[string]int64{},
		timeouts: map[string]int{}, victim: nodes - 1,
	}
}

// poke wakes everyone waiting for a change; needs a.mu.
func (a *agg) poke() {
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *agg) fail(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, fmt.Sprintf(format, args...))
	a.poke()
}

// apply takes one event of node i.
func (a *agg) apply(i int, ev event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.poke()
	n := &a.nodes[i]
	switch ev.T {
	case "ready":
		n.addr, n.pid, n.ready = ev.Addr, ev.PID, true
	case "acq":
		if len(ev.L) == 0 || len(ev.L) != len(ev.Tok) {
			a.errs = append(a.errs, fmt.Sprintf("node %d: malformed acq event", i))
			return
		}
		k := secKey{i, ev.ID}
		for j, l := range ev.L {
			s := &section{node: i, id: ev.ID, lock: l, kind: ev.Kind, lead: j == 0, tok: ev.Tok[j], wait: ev.W, start: ev.At, open: true}
			a.secs = append(a.secs, s)
			a.open[k] = append(a.open[k], s)
		}
		n.acqs++
		if ev.Kind == kindLeader && i != a.victim && a.takeoverAt == 0 {
			a.takeoverAt = ev.At
		}
	case "rel":
		k := secKey{i, ev.ID}
		for _, s := range a.open[k] {
			s.end, s.open, s.wrote = ev.At, false, ev.N == 1
		}
		delete(a.open, k)
	case "read":
		a.reads++
		switch {
		case ev.N == 0:
		case a.killAt != 0 && ev.At > a.killAt && ev.Node == a.victim:
			// The killed node's writer died half-way through a write;
			// the next write repairs it. The lock did its part.
			a.relics++
		default:
			a.torn++
		}
	case "offering":
		a.offers[ev.Job] = &offer{node: i, at: ev.At, delay: ev.D}
	case "offered", "offerfail":
		o := a.offers[ev.Job]
		if o == nil {
			o = &offer{node: i}
			a.offers[ev.Job] = o
		}
		o.offered = o.offered || ev.T == "offered"
		o.failed = o.failed || ev.T == "offerfail"
	case "dlv":
		a.delivered[ev.Job]++
		if a.delivered[ev.Job] == 1 {
			a.dlvAt[ev.Job] = ev.At
			a.dlvOrder = append(a.dlvOrder, ev.Job)
		}
	case "gauge":
		n.waiters = ev.N
	case "timeout":
		a.timeouts[ev.Kind]++
	case "switch":
		a.switches++
	case "lost":
		a.lost++
		if len(a.lostMsgs) < 5 {
			a.lostMsgs = append(a.lostMsgs, fmt.Sprintf("node %d: %v: %s", i, ev.L, ev.Msg))
		}
	case "err":
		a.errs = append(a.errs, ev.Msg)
	case "stopped":
		n.stopped = true
	default:
		a.errs = append(a.errs, fmt.Sprintf("node %d: unknown event %q", i, ev.T))
	}
}

// pendingDeliveries counts the delayed jobs offered by live nodes (or
// offered before a kill) that are not delivered yet; needs a.mu.
func (a *agg) pendingDeliveries() int {
	n := 0
	for job, o := range a.offers {
		if o.offered && a.delivered[job] == 0 {
			n++
		}
	}
	return n
}

// snapshotSections copies the sections for the checks, closing those
// still open: a killed node's at the kill time; any other's at end (and
// that is an error, reported by the caller).
func (a *agg) snapshotSections(end int64) (secs []section, leftOpen int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	secs = make([]section, len(a.secs))
	for i, s := range a.secs {
		c := *s
		if c.open {
			if a.killAt != 0 && c.node == a.victim {
				c.end, c.killed = a.killAt, true
			} else {
				c.end = end
				if c.lead {
					leftOpen++
				}
			}
			c.open = false
		}
		secs[i] = c
	}
	return secs, leftOpen
}
