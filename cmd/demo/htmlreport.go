package main

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The --report page: one self-contained HTML file, inline SVG and CSS, no
// scripts, no external assets, so it opens anywhere and can be attached to
// an issue as is.

//go:embed htmlreport.tmpl
var reportTemplateText string

var reportTemplate = template.Must(template.New("report").Parse(reportTemplateText))

// maxBars bounds the timeline's bars (a default 20 s run records ~60,000
// sections, and a page of that many SVG elements weighs ~15 MB). Above it,
// sections shorter than a column of a few pixels are drawn as one bar per
// column, coloured by the node that held the lock longest in it, which is
// what the eye sees anyway at that scale: the page says so, and each such
// bar says how many sections it stands for. Longer sections are always
// drawn as themselves. The hidden --report-max-bars sets it, so a test
// can count one bar per section whatever the machine's speed.
var maxBars = 20000

// minBarPx is the narrowest bar drawn: most sections last well under a
// pixel's worth of time, and a thinner rect would not be painted at all.
const minBarPx = 0.4

// reportInput is what the verdict hands over for the page.
type reportInput struct {
	cfg        config
	backend    string
	sum        summary
	checks     []check
	example    string
	secs       []section
	handoffs   []handoff
	lateness   []time.Duration
	start, end int64 // the work's start and end
	stopAt     int64 // when the nodes were told to stop (0: end)
	killAt     int64 // 0: no kill
	abdicateAt int64 // 0: no release at half time
	takeoverAt int64 // 0: no takeover
	victim     int
}

// writeReport renders the page to path, through a temporary file so that
// a failed run never leaves half a page behind.
func writeReport(path string, in reportInput) error {
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, buildPage(in)); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".demo-report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

type legendNode struct {
	Node  int
	Color string
	Label string
}

type checkRow struct {
	Name, Status, Detail string
}

type figureRow struct {
	Kind         string
	Acquisitions int
	PerSecond    string
	Handoffs     int
	P50, P99     string
	Timeouts     int
}

type reportPage struct {
	Title     string
	Verdict   string
	Killed    bool // the kill's legend entries
	Run       []string
	Style     template.CSS
	Legend    []legendNode
	Timeline  timelineView
	Handoff   histView
	Lateness  histView
	Through   lineView
	Figures   []figureRow
	Checks    []checkRow
	Example   string
	Errors    []string
	MoreErrs  int
	Generated string
}

func buildPage(in reportInput) reportPage {
	sum := in.sum
	p := reportPage{
		Title:     "actorlock demo: " + sum.Verdict,
		Verdict:   sum.Verdict,
		Generated: time.Now().UTC().Format("2006-01-02 15:04:05 MST"),
		Example:   in.example,
		Killed:    in.killAt != 0,
	}
	how := "ran"
	if sum.Interrupted {
		how = "interrupted (Ctrl-C) after"
	}
	work := time.Duration(in.end - in.start).Round(time.Millisecond)
	p.Run = []string{
		fmt.Sprintf("%s %v of work on %d nodes, lease %v", how, work, in.cfg.nodes, in.cfg.lease),
		in.backend,
	}
	switch {
	case in.cfg.unsafe:
		p.Run = append(p.Run, "--unsafe: the nodes skipped the locks, to show what they prevent")
	case in.killAt != 0:
		p.Run = append(p.Run, fmt.Sprintf("node %d held %s and was SIGKILLed at half time", in.victim, leaderLock))
	case in.abdicateAt != 0:
		p.Run = append(p.Run, fmt.Sprintf("node %d held %s and released it at half time", in.victim, leaderLock))
	}

	var css strings.Builder
	for i := range in.cfg.nodes {
		fmt.Fprintf(&css, ".n%d{fill:%s}", i, nodeColor(i))
		label := fmt.Sprintf("node %d", i)
		if i == in.victim && (in.killAt != 0 || in.abdicateAt != 0) {
			if in.killAt != 0 {
				label += " (killed)"
			} else {
				label += " (released the leader lock)"
			}
		}
		p.Legend = append(p.Legend, legendNode{Node: i, Color: nodeColor(i), Label: label})
	}
	p.Style = template.CSS(css.String())

	p.Timeline = buildTimeline(in)
	hs := make([]time.Duration, len(in.handoffs))
	for i, h := range in.handoffs {
		hs[i] = h.lat
	}
	p.Handoff = logHistogram(hs, fmt.Sprintf("%d hand-offs: from a release to the next holder's acquisition, when that holder was already waiting", len(hs)))
	p.Lateness = logHistogram(in.lateness, fmt.Sprintf("%d delayed jobs: delivery time minus due time", len(in.lateness)))
	for _, h := range []*histView{&p.Handoff, &p.Lateness} {
		if h.Clamped > 0 {
			h.Caption += fmt.Sprintf("; %d at or below the axis's left end (zero or less, or too small to show) are counted in the first bar", h.Clamped)
		}
	}
	p.Through = buildThroughput(in)

	for _, k := range kinds {
		p.Figures = append(p.Figures, newFigureRow(sum.Kinds[k], k))
	}
	p.Figures = append(p.Figures, newFigureRow(sum.All, "all"))
	for _, c := range in.checks {
		p.Checks = append(p.Checks, checkRow{Name: c.name, Status: c.status, Detail: strings.TrimSpace(c.detail)})
	}
	p.Errors = sum.Errors
	if len(p.Errors) > 10 {
		p.Errors, p.MoreErrs = p.Errors[:10], len(p.Errors)-10
	}
	return p
}

func newFigureRow(f kindFigures, name string) figureRow {
	r := figureRow{Kind: name, Acquisitions: f.Acquisitions, PerSecond: fmt.Sprintf("%.1f", f.PerSecond),
		Handoffs: f.Handoffs, P50: "-", P99: "-", Timeouts: f.Timeouts}
	if f.Handoffs > 0 {
		r.P50, r.P99 = fmt.Sprintf("%.2fms", f.HandoffP50), fmt.Sprintf("%.2fms", f.HandoffP99)
	}
	return r
}

// ---- timeline ----------------------------------------------------------

// Timeline geometry, in pixels.
const (
	tlWidth   = 1160
	tlLabelW  = 190 // lock names
	tlRight   = 24
	tlTop     = 40 // room for the event labels
	tlAxisH   = 28
	tlFamilyH = 22
	maxRows   = 4 // sub-rows of a lane (sections at the same time)
)

type barView struct {
	Class      string
	X, Y, W, H string
	Node       int
	Start, End string // ms since the timeline's start
	Token      int64
	Kind       string
	N          int // sections drawn as this bar (1 unless aggregated)
	Title      string
}

type laneView struct {
	Family     string // heading shown above the lane, if it opens a family
	FamilyY    string
	Lock       string
	LabelY     string
	LabelClass string
	Y, H       string
	Rows       int
	Sections   int
	Bars       []barView
	Gap        *gapView // the leader's wait for the lease, after the kill
}

type gapView struct {
	X, Y, W, H string
	LabelX     string
	LabelY     string
	Label      string
}

type timelineView struct {
	W, H          int
	PlotX, PlotX2 string
	PlotW         string
	LabelX        string // right edge of the lock names
	AxisY         string
	AxisLabelY    string
	LanesTop      string
	Lanes         []laneView
	Ticks         []tick
	Events        []axisLine
	Sections      int
	Bars          int
	KillMs        string // data-kill: the SIGKILL, ms since the start ("" if none)
	TakeoverMs    string // data-takeover: the leader lock's takeover
	Aggregated    bool
	ColumnPx      int    // width of an aggregated column
	ColumnTime    string // the time a column stands for
	Locks         int
	Stall         string // why the lanes go grey after the kill, and for how long
}

// family sorts and titles the demo's lock names.
func family(lock string) (order int, title string) {
	switch {
	case lock == leaderLock:
		return 0, "leader lock (plain lock, watchdog lease): the victim holds it, a survivor takes it over"
	case lock == configLock:
		return 1, "configuration (read-write lock): readers share it, so its lane splits into rows"
	case strings.HasPrefix(lock, "demo:job:"):
		return 2, "jobs (fair locks, acquired by actors over protoactor remote)"
	case strings.HasPrefix(lock, "demo:acct:"):
		return 3, "bank accounts (each transfer holds two of them in one MultiLock)"
	}
	return 4, "other locks"
}

// buildTimeline lays out one lane per lock name, grouped by family. One
// lane per name, however many: putting several names in one lane would
// draw their sections over each other, and one holder at a time is what a
// lane is there to show. Lanes get thinner as they get more numerous.
func buildTimeline(in reportInput) timelineView {
	v := timelineView{W: tlWidth, Sections: len(in.secs)}
	t0, t1 := in.start, max(in.end, in.start+1, in.takeoverAt)
	for _, s := range in.secs {
		t0, t1 = min(t0, s.start), max(t1, s.end)
	}
	sc := timeScale{t0: t0, t1: t1, x0: tlLabelW, w: tlWidth - tlLabelW - tlRight}
	v.PlotX, v.PlotX2, v.PlotW, v.LabelX = f(sc.x0), f(sc.x0+sc.w), f(sc.w), f(sc.x0-8)
	locks := byLock(in.secs)
	names := make([]string, 0, len(locks))
	for l := range locks {
		names = append(names, l)
	}
	for _, ss := range locks {
		sortByStart(ss)
	}
	slices.SortFunc(names, func(a, b string) int {
		fa, _ := family(a)
		fb, _ := family(b)
		return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
	})
	v.Locks = len(names)
	laneH := min(max(480.0/float64(max(len(names), 1)), 10), 22)
	var colNs float64 // 0: every section is a bar
	if len(in.secs) > maxBars {
		rows := 0
		for _, name := range names {
			_, r := assignRows(locks[name])
			rows += r
		}
		colPx := int(math.Ceil(float64(rows) * sc.w / float64(maxBars)))
		colNs = sc.nsPerPx() * float64(colPx)
		v.Aggregated, v.ColumnPx = true, colPx
		v.ColumnTime = time.Duration(colNs).Round(time.Microsecond).String()
	}
	y := float64(tlTop)
	v.LanesTop = f(y)
	lastFam := -1
	for _, name := range names {
		ss := locks[name]
		ln := laneView{Lock: name, Sections: len(ss)}
		if fam, title := family(name); fam != lastFam {
			lastFam = fam
			ln.Family, ln.FamilyY = title, f(y+15)
			y += tlFamilyH
		}
		rowOf, rows := assignRows(ss)
		ln.Rows = rows
		h := max(laneH, float64(rows)*5+2) // rows of 5 px at least
		ln.Y, ln.H, ln.LabelY = f(y), f(h), f(y+h/2+4)
		if h < 14 {
			ln.LabelClass = "lock thin"
		} else {
			ln.LabelClass = "lock"
		}
		lb := laneBuilder{sc: sc, t0: t0, y: y, rowH: (h - 2) / float64(rows), colNs: colNs}
		ln.Bars = lb.bars(ss, rowOf, rows)
		if name == leaderLock && !in.cfg.unsafe && in.killAt != 0 && in.takeoverAt > in.killAt {
			gx0, gx1 := sc.x(in.killAt), sc.x(in.takeoverAt)
			ln.Gap = &gapView{X: f(gx0), Y: f(y), W: f(gx1 - gx0), H: f(h),
				LabelX: f((gx0 + gx1) / 2), LabelY: f(y + h/2 + 4)}
			wait := time.Duration(in.takeoverAt - in.killAt).Round(time.Millisecond)
			// The longest label that fits (at ~6 px a character).
			for _, l := range []string{fmt.Sprintf("held by the dead node until its lease ran out: %v", wait), fmt.Sprintf("dead node's lease: %v", wait), wait.String()} {
				if float64(len(l))*6 < gx1-gx0-8 {
					ln.Gap.Label = l
					break
				}
			}
		}
		v.Bars += len(ln.Bars)
		v.Lanes = append(v.Lanes, ln)
		y += h
	}
	bottom := y + 4
	v.AxisY, v.AxisLabelY = f(bottom), f(bottom+16)
	v.H = int(bottom) + tlAxisH
	v.Ticks = sc.ticks()
	ev := func(at int64, label, class string, labelY float64) {
		x := sc.x(at)
		a := axisLine{X: f(x), Y1: f(tlTop - 6), Y2: f(bottom), LabelX: f(x + 4), LabelY: f(labelY), Label: label, Class: class, Anchor: "start"}
		if x > sc.x0+sc.w-260 {
			a.LabelX, a.Anchor = f(x-4), "end"
		}
		v.Events = append(v.Events, a)
	}
	if in.killAt != 0 {
		v.KillMs = msSince(in.killAt, t0)
	}
	if in.takeoverAt != 0 {
		v.TakeoverMs = msSince(in.takeoverAt, t0)
	}
	if in.killAt != 0 && !in.cfg.unsafe {
		v.Stall = stallCaption(in, locks, t0)
	}
	switch {
	case in.killAt != 0:
		ev(in.killAt, fmt.Sprintf("SIGKILL node %d at %s", in.victim, secLabel(in.killAt, t0)), "kill", 14)
	case in.abdicateAt != 0:
		ev(in.abdicateAt, fmt.Sprintf("node %d releases %s at %s", in.victim, leaderLock, secLabel(in.abdicateAt, t0)), "event", 14)
	}
	// --unsafe has no leader to take over: its "takeover" is just another
	// node's first section, which means nothing.
	if event := max(in.killAt, in.abdicateAt); !in.cfg.unsafe && event != 0 && in.takeoverAt >= event {
		ev(in.takeoverAt, fmt.Sprintf("%s taken over at %s", leaderLock, secLabel(in.takeoverAt, t0)), "takeover", 29)
	}
	return v
}

// stallCaption says why lanes go grey after the kill, how long each kind
// of lock should stall and how long it did: the dead node's holds last
// until their lease runs out, which the lease's last renewal (every lease/3)
// puts between 2/3 of a lease and a lease after the kill. A transfer that
// needs an account the dead node held waits for it holding its other
// account, so the bank stalls that long. The fair locks stall longer: the
// dead node's runtime also had places in their Redis queues, and each is
// kept until its fair-wait timeout (the demo's is the lease) runs out.
func stallCaption(in reportInput, locks map[string][]*section, t0 int64) string {
	lease := in.cfg.lease
	resumed := func(prefix string) (time.Duration, bool) {
		var worst time.Duration
		found := false
		for name, ss := range locks {
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			for _, s := range ss { // sorted by start
				if s.start >= in.killAt && s.node != in.victim {
					worst, found = max(worst, time.Duration(s.start-in.killAt)), true
					break
				}
			}
		}
		return worst.Round(10 * time.Millisecond), found
	}
	var b strings.Builder
	fmt.Fprintf(&b, "After the SIGKILL at %s, the locks node %d held stay held until their lease runs out: the lease (%v) counts from the node's last renewal, made every %v, so they are free again %v to %v after the kill",
		secLabel(in.killAt, t0), in.victim, lease, lease/3, (lease - lease/3).Round(time.Millisecond), lease)
	if in.takeoverAt > in.killAt {
		fmt.Fprintf(&b, " (%s: %v)", leaderLock, time.Duration(in.takeoverAt-in.killAt).Round(time.Millisecond))
	}
	b.WriteString(". Whatever waits for them stalls that long: a bank transfer that needs an account the dead node held waits for it while holding its other account, so one such account holds up most transfers; the configuration's readers and writers wait for a dead writer or reader. ")
	fmt.Fprintf(&b, "The jobs' fair locks stall longer: the dead node's runtime also had places in their Redis queues, and those behind a place wait until its fair-wait timeout (%v, the lease) drops it, so up to the lease plus %v per dead place.", lease, lease)
	var here []string
	for _, f := range []struct{ what, prefix string }{{"the configuration", configLock}, {"every account", "demo:acct:"}, {"every job", "demo:job:"}} {
		if d, ok := resumed(f.prefix); ok {
			here = append(here, fmt.Sprintf("%s within %v", f.what, d))
		}
	}
	if len(here) > 0 {
		fmt.Fprintf(&b, " This run: a new section on %s of the kill.", strings.Join(here, ", on "))
	}
	return strings.TrimSpace(b.String())
}

// assignRows puts each section (sorted by start) in the first row free
// at its start, so sections at the same time sit one above the other:
// readers sharing a read lock, or, with --unsafe, the overlaps. Past
// maxRows, a section goes to the row that frees first and is drawn over.
func assignRows(ss []*section) (rowOf []int, rows int) {
	rowOf = make([]int, len(ss))
	var ends []int64
	for i, s := range ss {
		r := slices.IndexFunc(ends, func(e int64) bool { return e <= s.start })
		if r < 0 {
			if len(ends) < maxRows {
				ends = append(ends, 0)
				r = len(ends) - 1
			} else {
				r = slices.Index(ends, slices.Min(ends))
			}
		}
		ends[r] = max(ends[r], s.end)
		rowOf[i] = r
	}
	return rowOf, max(len(ends), 1)
}

func msSince(t, t0 int64) string {
	return fmt.Sprintf("%.3f", float64(t-t0)/float64(time.Millisecond))
}

func secLabel(t, t0 int64) string {
	return fmt.Sprintf("%.3fs", float64(t-t0)/float64(time.Second))
}

// ---- throughput --------------------------------------------------------

// buildThroughput draws each node's critical sections entered per second
// (a MultiLock counts once), in buckets of the work's time. The work ends
// when the nodes are told to stop, not when the last one has: the
// stragglers' last moments would draw as a fall to zero that the workload
// never had. A last bucket shorter than half a bucket joins the one before,
// so that a few sections in a sliver of time do not draw as a spike or a
// dip.
func buildThroughput(in reportInput) lineView {
	fr, x0, x1, y0, y1 := newFrame("seconds since the work started")
	v := lineView{frame: fr}
	end := in.end
	if in.stopAt > in.start {
		end = min(in.stopAt, in.end)
	}
	span := time.Duration(end - in.start)
	if span <= 0 {
		v.Empty = "no work recorded"
		return v
	}
	bucket := throughputBucket(span)
	n := max(int(span/bucket), 1)
	if rest := span - time.Duration(n)*bucket; rest >= bucket/2 {
		n++
	}
	// Bucket b covers [b*bucket, (b+1)*bucket), the last one up to span.
	width := func(b int) time.Duration {
		if b == n-1 {
			return span - time.Duration(b)*bucket
		}
		return bucket
	}
	counts := make([][]int, in.cfg.nodes)
	for i := range counts {
		counts[i] = make([]int, n)
	}
	for _, s := range in.secs {
		if !s.lead || s.start < in.start || s.start >= end || s.node >= len(counts) {
			continue
		}
		counts[s.node][min(int(time.Duration(s.start-in.start)/bucket), n-1)]++
	}
	top := 0.0
	for _, cs := range counts {
		for b, c := range cs {
			top = max(top, float64(c)/width(b).Seconds())
		}
	}
	top = niceCeil(top)
	sc := timeScale{t0: in.start, t1: end, x0: x0, w: x1 - x0}
	y := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	for node, cs := range counts {
		var pts strings.Builder
		for b, c := range cs {
			mid := in.start + int64(time.Duration(b)*bucket+width(b)/2)
			if in.killAt != 0 && node == in.victim && mid > in.killAt {
				break // a dead node has no rate, not a rate of zero
			}
			fmt.Fprintf(&pts, "%s,%s ", f(sc.x(mid)), f(y(float64(c)/width(b).Seconds())))
		}
		v.Series = append(v.Series, nodeSeries{Node: node, Color: nodeColor(node), Points: strings.TrimSpace(pts.String())})
	}
	v.XTicks = sc.ticks()
	v.YTicks = countTicks(top, y)
	v.Caption = fmt.Sprintf("critical sections entered per second by each node, in %v buckets (a MultiLock transfer counts once)", bucket)
	mark := func(at int64, label, class string) {
		x := sc.x(at)
		a := axisLine{X: f(x), Y1: f(y0 - 4), Y2: f(y1), LabelX: f(x + 3), LabelY: f(y0 - 8), Label: label, Class: class, Anchor: "start"}
		if x > x1-120 {
			a.LabelX, a.Anchor = f(x-3), "end"
		}
		v.Marks = append(v.Marks, a)
	}
	switch {
	case in.killAt != 0:
		mark(in.killAt, fmt.Sprintf("SIGKILL node %d", in.victim), "kill")
	case in.abdicateAt != 0:
		mark(in.abdicateAt, fmt.Sprintf("node %d releases the leader", in.victim), "event")
	}
	return v
}

// laneBuilder draws the bars of one lane.
type laneBuilder struct {
	sc    timeScale
	t0    int64
	y     float64 // the lane's top
	rowH  float64
	colNs float64 // > 0: aggregate the sections shorter than this
}

// column gathers the short sections that start in one column of a row.
type column struct {
	n        int
	held     map[int]int64 // by node
	from, to int64
	tok      int64 // the lowest
	kind     string
	mixed    bool // of several kinds
}

func (lb laneBuilder) rect(row int, from, to int64) (x, w, y, h string) {
	x0, x1 := lb.sc.x(from), lb.sc.x(to)
	return f2(x0), f2(max(x1-x0, minBarPx)), f(lb.y + 1 + float64(row)*lb.rowH), f(max(lb.rowH-0.5, 1))
}

func (lb laneBuilder) bars(ss []*section, rowOf []int, rows int) []barView {
	var out, long []barView
	cols := make([]map[int]*column, rows)
	var colOrder [][2]int // row, column: in order of first use
	for i, s := range ss {
		r := rowOf[i]
		if lb.colNs > 0 && float64(s.end-s.start) < lb.colNs && !s.killed {
			c := int(float64(s.start-lb.sc.t0) / lb.colNs)
			if cols[r] == nil {
				cols[r] = map[int]*column{}
			}
			col := cols[r][c]
			if col == nil {
				col = &column{held: map[int]int64{}, from: s.start, to: s.end, tok: s.tok, kind: s.kind}
				cols[r][c] = col
				colOrder = append(colOrder, [2]int{r, c})
			}
			col.n++
			col.held[s.node] += s.end - s.start
			col.from, col.to, col.tok = min(col.from, s.start), max(col.to, s.end), min(col.tok, s.tok)
			col.mixed = col.mixed || col.kind != s.kind
			continue
		}
		b := barView{Node: s.node, Start: msSince(s.start, lb.t0), End: msSince(s.end, lb.t0), Token: s.tok, Kind: s.kind, N: 1}
		b.X, b.W, b.Y, b.H = lb.rect(r, s.start, s.end)
		b.Class = fmt.Sprintf("bar n%d", s.node)
		if s.kind == kindRead {
			b.Class += " rd"
		}
		b.Title = fmt.Sprintf("node %d: %s, token %d, at %s for %s", s.node, s.kind, s.tok, secLabel(s.start, lb.t0),
			time.Duration(s.end-s.start).Round(time.Microsecond))
		if s.killed {
			b.Class += " cut"
			b.Title += ", cut short by the SIGKILL (the lock stayed held until its lease ran out)"
		}
		long = append(long, b)
	}
	for _, rc := range colOrder {
		col := cols[rc[0]][rc[1]]
		nodes := make([]int, 0, len(col.held))
		var total int64
		for n, d := range col.held {
			nodes = append(nodes, n)
			total += d
		}
		// Most held time first; ties to the lower node, so pages repeat.
		slices.SortFunc(nodes, func(a, b int) int { return cmp.Or(cmp.Compare(col.held[b], col.held[a]), cmp.Compare(a, b)) })
		kind := col.kind
		if col.mixed {
			kind = "mixed"
		}
		b := barView{Node: nodes[0], Start: msSince(col.from, lb.t0), End: msSince(col.to, lb.t0), Token: col.tok, Kind: kind, N: col.n}
		b.X, b.W, b.Y, b.H = lb.rect(rc[0], col.from, col.to)
		b.Class = fmt.Sprintf("bar n%d", nodes[0])
		if kind == kindRead {
			b.Class += " rd"
		}
		shares := make([]string, len(nodes))
		for i, n := range nodes {
			shares[i] = fmt.Sprintf("node %d %.0f%%", n, 100*float64(col.held[n])/float64(max(total, 1)))
		}
		b.Title = fmt.Sprintf("%d %s sections from %s to %s, held by %s", col.n, kind, secLabel(col.from, lb.t0),
			secLabel(col.to, lb.t0), strings.Join(shares, ", "))
		out = append(out, b)
	}
	return append(out, long...)
}
