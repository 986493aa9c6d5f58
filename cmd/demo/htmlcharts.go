package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// The small pieces of SVG geometry the HTML report's charts share: axes,
// ticks, a log-binned histogram and per-node lines. Coordinates are
// computed here; html.tmpl only places them.

// nodeColors tell the nodes apart (--nodes is at most 16). No red: red
// marks the kill.
var nodeColors = []string{
	"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
	"#17becf", "#8c564b", "#bcbd22", "#7f7f7f", "#1f3a93", "#a05d00", "#2e7d32", "#6a1b9a",
}

func nodeColor(i int) string { return nodeColors[i%len(nodeColors)] }

// f formats an SVG coordinate: a tenth of a pixel is finer than any screen.
func f(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// f2 formats a coordinate that may be under a pixel (a short section).
func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

// tick is a labelled position on an axis.
type tick struct {
	Pos   string // x (time axes, log axes) or y (count axes)
	Text  string // where its label's baseline goes (y axes)
	Label string
}

// axisLine is a vertical marker across a chart: the kill, the takeover.
type axisLine struct {
	X, Y1, Y2 string
	LabelX    string
	LabelY    string
	Label     string
	Class     string
	Anchor    string // text-anchor of the label
}

// timeScale maps wall-clock nanoseconds to x.
type timeScale struct {
	t0, t1 int64
	x0, w  float64
}

func (s timeScale) x(t int64) float64 {
	return s.x0 + float64(t-s.t0)/float64(max(s.t1-s.t0, 1))*s.w
}

// nsPerPx is how much time one pixel stands for.
func (s timeScale) nsPerPx() float64 { return float64(max(s.t1-s.t0, 1)) / s.w }

// ticks are round offsets from t0 ("0s", "2s", ...), at most about 12.
func (s timeScale) ticks() []tick {
	span := time.Duration(s.t1 - s.t0)
	steps := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}
	step := steps[len(steps)-1]
	for _, st := range steps {
		if span/st <= 12 {
			step = st
			break
		}
	}
	var out []tick
	for d := time.Duration(0); d <= span; d += step {
		label := fmt.Sprintf("%gs", d.Seconds())
		out = append(out, tick{Pos: f(s.x(s.t0 + int64(d))), Label: label})
	}
	return out
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten that is >= v
// (and >= 1): the top of a count axis.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// countTicks are 4 gridlines from 0 to top, mapped by y.
func countTicks(top float64, y func(float64) float64) []tick {
	var out []tick
	for i := range 5 {
		v := top * float64(i) / 4
		out = append(out, tick{Pos: f(y(v)), Text: f(y(v) + 4), Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return out
}

// Chart frame shared by the histograms and the throughput chart.
const (
	chartW     = 560
	chartH     = 250
	chartLeft  = 52
	chartRight = 16
	chartTop   = 26
	chartBot   = 40
)

// frame is the plot area of a chart and where its axes' labels go.
type frame struct {
	W, H                int
	Left, Right         string // plot edges
	Top, Bottom         string
	TickEnd, TickLabelY string // x-axis tick marks and labels
	YLabelX             string // right edge of the y-axis labels
	MidX, XLabelY       string // the x axis's title
	XLabel              string
	XTicks, YTicks      []tick
	Marks               []axisLine
	Caption             string
	Empty               string // shown instead of the plot when there is no data
}

func newFrame(xLabel string) (frame, float64, float64, float64, float64) {
	x0, x1 := float64(chartLeft), float64(chartW-chartRight)
	y0, y1 := float64(chartTop), float64(chartH-chartBot)
	return frame{
		W: chartW, H: chartH, Left: f(x0), Right: f(x1), Top: f(y0), Bottom: f(y1),
		TickEnd: f(y1 + 4), TickLabelY: f(y1 + 16), YLabelX: f(x0 - 6),
		MidX: f((x0 + x1) / 2), XLabelY: f(chartH - 6), XLabel: xLabel,
	}, x0, x1, y0, y1
}

type histBar struct {
	X, Y, W, H string
	Title      string
	Count      int
}

// histView is a histogram of durations on log-spaced bins.
type histView struct {
	frame
	Bars    []histBar
	Count   int
	Clamped int // values below the first bin's lower edge, counted in it
}

// binsPerDecade of the log histograms: fine enough to show a p99 tail
// apart from the bulk, coarse enough to keep ~20 bars.
const binsPerDecade = 5

// logHistogram bins ds (sorted or not) on a log scale of milliseconds,
// marking p50 and p99. Values at or below the lowest edge (including
// zero and negatives, which a log axis cannot show) fall into the first
// bin, and the caption says how many.
func logHistogram(ds []time.Duration, caption string) histView {
	fr, x0, x1, y0, y1 := newFrame("log scale")
	h := histView{frame: fr, Count: len(ds)}
	h.Caption = caption
	if len(ds) == 0 {
		h.Empty = "nothing recorded"
		return h
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	hiMs := max(msOf(sorted[len(sorted)-1]), 0.001)
	loMs := hiMs
	for _, d := range sorted {
		if d > 0 {
			loMs = msOf(d)
			break
		}
	}
	// Bin k covers [10^(k/b), 10^((k+1)/b)) ms; at most 6 decades shown.
	kLo := int(math.Floor(math.Log10(loMs) * binsPerDecade))
	kHi := int(math.Floor(math.Log10(hiMs)*binsPerDecade)) + 1
	kLo = max(kLo, kHi-6*binsPerDecade)
	// Whole decades at both ends, so the axis labels sit at its edges.
	kLo = int(math.Floor(float64(kLo)/binsPerDecade)) * binsPerDecade
	kHi = int(math.Ceil(float64(kHi)/binsPerDecade)) * binsPerDecade
	counts := make([]int, kHi-kLo)
	for _, d := range sorted {
		k := kLo - 1 // zero and negatives: below any log axis
		if v := msOf(d); v > 0 {
			k = int(math.Floor(math.Log10(v) * binsPerDecade))
		}
		if k < kLo {
			h.Clamped++
			k = kLo
		}
		counts[min(k, kHi-1)-kLo]++
	}
	top := niceCeil(float64(slices.Max(counts)))
	xk := func(k float64) float64 { return x0 + (k-float64(kLo))/float64(kHi-kLo)*(x1-x0) }
	y := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	for i, c := range counts {
		if c == 0 {
			continue
		}
		k := float64(kLo + i)
		lo, hi := math.Pow(10, k/binsPerDecade), math.Pow(10, (k+1)/binsPerDecade)
		h.Bars = append(h.Bars, histBar{
			X: f(xk(k) + 0.5), W: f(max(xk(k+1)-xk(k)-1, 0.5)), Y: f(y(float64(c))), H: f(y1 - y(float64(c))),
			Title: fmt.Sprintf("%d between %s and %s", c, msLabel(lo), msLabel(hi)), Count: c,
		})
	}
	for k := kLo; k <= kHi; k += binsPerDecade {
		h.XTicks = append(h.XTicks, tick{Pos: f(xk(float64(k))), Label: msLabel(math.Pow(10, float64(k)/binsPerDecade))})
	}
	h.YTicks = countTicks(top, y)
	xOf := func(d time.Duration) float64 {
		v := max(msOf(d), math.Pow(10, float64(kLo)/binsPerDecade))
		return min(max(xk(math.Log10(v)*binsPerDecade), x0), x1)
	}
	for _, m := range []struct {
		p     int
		name  string
		above float64
	}{{50, "p50", 14}, {99, "p99", 2}} {
		d := pct(sorted, m.p)
		x := xOf(d)
		h.Marks = append(h.Marks, axisLine{X: f(x), Y1: f(y0 + m.above), Y2: f(y1), LabelX: f(x + 3), LabelY: f(y0 + m.above + 8),
			Label: fmt.Sprintf("%s %s", m.name, ms(d)), Class: "pmark", Anchor: "start"})
	}
	// A label that would cross the right edge goes to the line's left.
	for i := range h.Marks {
		if x, _ := strconv.ParseFloat(h.Marks[i].X, 64); x+3+float64(len(h.Marks[i].Label))*6 > x1 {
			h.Marks[i].LabelX, h.Marks[i].Anchor = f(x-3), "end"
		}
	}
	return h
}

// msLabel names a bin edge given in milliseconds, in the unit that keeps
// it short: 10ns, 100µs, 1ms, 10s.
func msLabel(v float64) string {
	g := func(x float64, unit string) string { return strconv.FormatFloat(x, 'g', 3, 64) + unit }
	switch {
	case v >= 1000:
		return g(v/1000, "s")
	case v >= 1:
		return g(v, "ms")
	case v >= 0.001:
		return g(v*1000, "µs")
	}
	return g(v*1e6, "ns")
}

// nodeSeries is one node's throughput over time.
type nodeSeries struct {
	Node   int
	Color  string
	Points string // SVG polyline points
}

type lineView struct {
	frame
	Series []nodeSeries
}

// throughputBucket is the width of the throughput chart's buckets: the
// smallest that keeps at most 40 points, and never under 250 ms (finer is
// noise at these rates).
func throughputBucket(span time.Duration) time.Duration {
	for _, b := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second} {
		if span/b <= 40 {
			return b
		}
	}
	return time.Minute
}
