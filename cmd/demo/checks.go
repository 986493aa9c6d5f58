package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// exclusive reports whether a section excludes every other section of its
// lock; reads exclude only writes.
func (s *section) exclusive() bool { return s.kind != kindRead }

// byLock groups sections by lock name.
func byLock(secs []section) map[string][]*section {
	m := map[string][]*section{}
	for i := range secs {
		s := &secs[i]
		m[s.lock] = append(m[s.lock], s)
	}
	return m
}

// lockCheck is what the checks found on one lock.
type lockCheck struct {
	sections   int
	overlaps   int // sections that started before an earlier-token one they exclude had ended
	inversions int // tokens not increasing with time (or repeated)
	example    string
}

// checkLock checks one lock's sections.
//
// Overlaps, by fencing token: in token order, every section must start
// after each earlier one it excludes has ended (a write excludes all, a
// read excludes writes). That compares every pair once.
//
// Inversions, by time: a section that ended before another started must
// have the lower token (unless both are reads: a reader's grant may come
// before another reader's that returned sooner); and no token repeats.
func checkLock(ss []*section) lockCheck {
	c := lockCheck{sections: len(ss)}
	byTok := slices.Clone(ss)
	slices.SortFunc(byTok, func(a, b *section) int { return cmp.Compare(a.tok, b.tok) })
	endAny, endExcl := int64(math.MinInt64), int64(math.MinInt64)
	var lastAny, lastExcl *section
	for i, s := range byTok {
		if i > 0 && s.tok == byTok[i-1].tok {
			c.inversions++
			c.note(fmt.Sprintf("token %d twice: node %d and node %d", s.tok, byTok[i-1].node, s.node))
		}
		switch {
		case s.exclusive() && s.start < endAny:
			c.overlaps++
			c.note(overlapText(lastAny, s))
		case !s.exclusive() && s.start < endExcl:
			c.overlaps++
			c.note(overlapText(lastExcl, s))
		}
		if s.end > endAny {
			endAny, lastAny = s.end, s
		}
		if s.exclusive() && s.end > endExcl {
			endExcl, lastExcl = s.end, s
		}
	}

	byStart := slices.Clone(ss)
	slices.SortFunc(byStart, func(a, b *section) int { return cmp.Compare(a.start, b.start) })
	byEnd := slices.Clone(ss)
	slices.SortFunc(byEnd, func(a, b *section) int { return cmp.Compare(a.end, b.end) })
	maxAny, maxExcl := int64(math.MinInt64), int64(math.MinInt64)
	j := 0
	for _, s := range byStart {
		for ; j < len(byEnd) && byEnd[j].end < s.start; j++ {
			maxAny = max(maxAny, byEnd[j].tok)
			if byEnd[j].exclusive() {
				maxExcl = max(maxExcl, byEnd[j].tok)
			}
		}
		bound := maxAny
		if !s.exclusive() {
			bound = maxExcl
		}
		if s.tok <= bound {
			c.inversions++
			c.note(fmt.Sprintf("node %d's token %d on %s is not above one that ended before it started", s.node, s.tok, s.lock))
		}
	}
	return c
}

func (c *lockCheck) note(s string) {
	if c.example == "" {
		c.example = s
	}
}

func overlapText(prev, s *section) string {
	if prev == nil {
		return ""
	}
	return fmt.Sprintf("%s: node %d (%s, token %d) started %v before node %d (%s, token %d) left",
		s.lock, s.node, s.kind, s.tok, time.Duration(prev.end-s.start).Round(time.Microsecond), prev.node, prev.kind, prev.tok)
}

// handoff is the time from a release to the next acquisition of the same
// lock by a waiter that was already waiting.
type handoff struct {
	node int    // who got it
	kind string // what it got
	lat  time.Duration
}

// handoffs finds them in one lock's closed sections, sorted by start.
// Sections ended by a kill are no hand-off: the next one waited for the
// lease. Reads following reads are no hand-off either.
func handoffs(out []handoff, ss []*section) []handoff {
	var last *section // the section with the latest end so far
	for _, s := range ss {
		if last != nil && !last.killed && (last.exclusive() || s.exclusive()) &&
			s.wait < last.end && s.start >= last.end {
			out = append(out, handoff{node: s.node, kind: s.kind, lat: time.Duration(s.start - last.end)})
		}
		if last == nil || s.end > last.end {
			last = s
		}
	}
	return out
}

func sortByStart(ss []*section) {
	slices.SortFunc(ss, func(a, b *section) int { return cmp.Compare(a.start, b.start) })
}

// pct is the p-th percentile of sorted ds (0 if empty).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := (len(ds)*p + 99) / 100
	return ds[min(max(i-1, 0), len(ds)-1)]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func msf(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*1000) / 1000
}
