package main

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// report is one line a worker writes to the parent: what its owners did
// since the previous line.
type report struct {
	Sections []section `json:"s,omitempty"`
	Timeouts int       `json:"to,omitempty"`
}

// tally collects the critical sections of all processes, in the parent.
type tally struct {
	mu       sync.Mutex
	sections [][]section // by counter
	timeouts int
	errs     []error
}

func newTally(counters int) *tally {
	return &tally{sections: make([][]section, counters)}
}

func (t *tally) record(s section) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(s)
}

func (t *tally) timedOut() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timeouts++
}

func (t *tally) merge(r report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range r.Sections {
		t.add(s)
	}
	t.timeouts += r.Timeouts
}

// fail notes something that makes the run untrustworthy.
func (t *tally) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, err)
}

// add needs t.mu.
func (t *tally) add(s section) {
	if s.Counter < 0 || s.Counter >= len(t.sections) {
		t.errs = append(t.errs, fmt.Errorf("process %d reported unknown counter %d", s.Proc, s.Counter))
		return
	}
	t.sections[s.Counter] = append(t.sections[s.Counter], s)
}

// snapshot is what the progress line shows.
type snapshot struct {
	total      int
	perCounter []int
	handoffs   int // hand-offs measured
	p50, p99   time.Duration
}

func (t *tally) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	snap := snapshot{perCounter: make([]int, len(t.sections))}
	var lat []time.Duration
	for c, ss := range t.sections {
		sortByStart(ss) // in place: workers' lines arrive a little out of order
		snap.perCounter[c] = len(ss)
		snap.total += len(ss)
		lat = appendHandoffs(lat, ss)
	}
	slices.Sort(lat)
	snap.handoffs = len(lat)
	if len(lat) > 0 {
		snap.p50 = lat[len(lat)*50/100]
		snap.p99 = lat[len(lat)*99/100]
	}
	return snap
}

// result is the whole record, for the verdict: sections by counter, each
// sorted by start.
func (t *tally) result() (sections [][]section, timeouts int, errs []error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sections = make([][]section, len(t.sections))
	for c, ss := range t.sections {
		sections[c] = slices.Clone(ss)
		sortByStart(sections[c])
	}
	return sections, t.timeouts, slices.Clone(t.errs)
}

func sortByStart(ss []section) {
	slices.SortFunc(ss, func(a, b section) int { return cmp.Compare(a.Start, b.Start) })
}

// appendHandoffs appends the hand-off latencies measurable in ss (one
// counter's sections by start): from one section's end (its owner unlocking
// next) to the next section's start, when the next owner was already waiting
// at that end. Otherwise the gap is idle time, not a hand-off.
func appendHandoffs(lat []time.Duration, ss []section) []time.Duration {
	for i := 1; i < len(ss); i++ {
		prev, next := ss[i-1], ss[i]
		if next.Wait < prev.End && next.Start >= prev.End {
			lat = append(lat, time.Duration(next.Start-prev.End))
		}
	}
	return lat
}
