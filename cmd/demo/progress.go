package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// How often the progress is shown: redrawn in place on a terminal; printed
// as a new line otherwise, less often, so logs stay readable.
const (
	ttyRefresh   = 250 * time.Millisecond
	plainRefresh = 2 * time.Second
	window       = 5 * time.Second // hand-off percentiles are of this recent past
)

type progressPrinter struct {
	r       *runner
	every   time.Duration
	last    time.Time
	lastAcq []int
	lines   int // lines of the last redraw (terminal)
	done    chan struct{}
	quit    chan struct{}
}

func (r *runner) startProgress() *progressPrinter {
	p := &progressPrinter{r: r, every: plainRefresh, last: time.Now(), lastAcq: make([]int, r.cfg.nodes),
		done: make(chan struct{}), quit: make(chan struct{})}
	if r.std.tty {
		p.every = ttyRefresh
	}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(p.every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.show()
			case <-p.quit:
				p.show()
				return
			}
		}
	}()
	return p
}

// stop shows the progress a last time and stops.
func (p *progressPrinter) stop() {
	close(p.quit)
	<-p.done
}

// nodeLine is one node's progress.
type nodeLine struct {
	state    string
	rate     float64
	waiters  int64
	p50, p99 time.Duration
	handoffs int
}

type progressSnap struct {
	elapsed   time.Duration
	nodes     []nodeLine
	due       int
	delivered int
	offered   int
}

func (p *progressPrinter) snapshot() progressSnap {
	a := p.r.agg
	now := time.Now()
	dt := now.Sub(p.last).Seconds()
	p.last = now
	a.mu.Lock()
	defer a.mu.Unlock()
	s := progressSnap{elapsed: now.Sub(p.r.workStart), nodes: make([]nodeLine, len(a.nodes))}
	for i, n := range a.nodes {
		nl := &s.nodes[i]
		nl.rate = float64(n.acqs-p.lastAcq[i]) / max(dt, 1e-3)
		p.lastAcq[i] = n.acqs
		nl.waiters = n.waiters
		switch {
		case p.r.procs[i].isKilled():
			nl.state = "killed"
		case p.r.procs[i].hasExited():
			nl.state = "exited"
		case n.stopped:
			nl.state = "stopped"
		}
	}
	// Hand-offs of the recent past, by the node that got the lock.
	from := now.Add(-window).UnixNano()
	locks := map[string][]*section{}
	for i := len(a.secs) - 1; i >= 0; i-- {
		sec := a.secs[i]
		if sec.start < from-int64(2*time.Second) {
			break // events arrive nearly in order
		}
		if !sec.open && sec.start >= from-int64(time.Second) {
			locks[sec.lock] = append(locks[sec.lock], sec)
		}
	}
	var hs []handoff
	for _, ss := range locks {
		sortByStart(ss)
		hs = handoffs(hs, ss)
	}
	per := make([][]time.Duration, len(a.nodes))
	for _, h := range hs {
		per[h.node] = append(per[h.node], h.lat)
	}
	for i, ds := range per {
		slices.Sort(ds)
		s.nodes[i].p50, s.nodes[i].p99, s.nodes[i].handoffs = pct(ds, 50), pct(ds, 99), len(ds)
	}
	nowNs := now.UnixNano()
	for _, o := range a.offers {
		if o.offered {
			s.offered++
			if o.at+o.delay <= nowNs {
				s.due++
			}
		}
	}
	s.delivered = len(a.delivered)
	return s
}

func (p *progressPrinter) show() {
	s := p.snapshot()
	out := p.r.std.out
	if !p.r.std.tty {
		fmt.Fprintln(out, plainLine(s))
		return
	}
	var b strings.Builder
	if p.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dF\x1b[J", p.lines) // back to the block's first line, clear below
	}
	lines := ttyLines(s)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	p.lines = len(lines)
	fmt.Fprint(out, b.String())
}

func handoffText(n nodeLine) string {
	if n.handoffs == 0 {
		return "p50 -  p99 -"
	}
	return fmt.Sprintf("p50 %s p99 %s", ms(n.p50), ms(n.p99))
}

// plainLine is the progress as one line, for logs.
func plainLine(s progressSnap) string {
	parts := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		if n.state == "killed" || n.state == "exited" {
			parts[i] = fmt.Sprintf("n%d %s", i, n.state)
			continue
		}
		parts[i] = fmt.Sprintf("n%d %4.0f acq/s w%-2d hand-off %s", i, n.rate, n.waiters, handoffText(n))
	}
	return fmt.Sprintf("%5.1fs  %s | delayed due %d delivered %d", s.elapsed.Seconds(), strings.Join(parts, " | "), s.due, s.delivered)
}

// ttyLines is the progress as a small table, redrawn in place.
func ttyLines(s progressSnap) []string {
	lines := []string{fmt.Sprintf("%5.1fs   node  acq/s  waiters  hand-off (last %v)", s.elapsed.Seconds(), window)}
	for i, n := range s.nodes {
		if n.state == "killed" || n.state == "exited" {
			lines = append(lines, fmt.Sprintf("         %4d  %s", i, n.state))
			continue
		}
		lines = append(lines, fmt.Sprintf("         %4d  %5.0f  %7d  %s %s", i, n.rate, n.waiters, handoffText(n), n.state))
	}
	lines = append(lines, fmt.Sprintf("         delayed jobs: %d offered, %d due, %d delivered", s.offered, s.due, s.delivered))
	return lines
}
