package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syntheticRun is a 20 s run of 3 nodes on 14 locks with n short sections
// taken in turns, and node 2 holding the leader from the start until it is
// killed at half time.
func syntheticRun(n int) reportInput {
	const start = int64(1_700_000_000_000_000_000)
	span := int64(20 * time.Second)
	locks := []string{leaderLock, configLock}
	for k := range 4 {
		locks = append(locks, jobLock(k))
	}
	for k := range 8 {
		locks = append(locks, acctLock(k))
	}
	kill := start + span/2
	in := reportInput{cfg: config{nodes: 3, lease: 3 * time.Second}, start: start, end: start + span,
		killAt: kill, takeoverAt: kill + int64(3*time.Second), victim: 2}
	in.secs = append(in.secs, section{node: 2, lock: leaderLock, kind: kindLeader, lead: true, tok: 1, start: start, end: kill, killed: true})
	per := n / (len(locks) - 1)
	for li, l := range locks[1:] {
		step := span / int64(per)
		for i := range per {
			s := start + int64(i)*step
			in.secs = append(in.secs, section{node: (i + li) % 2, lock: l, kind: kindMulti, lead: true,
				tok: int64(10 + i), start: s, end: s + step/2})
		}
	}
	in.sum.Verdict = "PASS"
	return in
}

var (
	barRE      = regexp.MustCompile(`<rect class="bar [^"]*"[^>]*>`)
	sectionsRE = regexp.MustCompile(`data-sections="(\d+)"`)
)

// render renders the page and returns its bars and the sections they
// stand for.
func render(t *testing.T, in reportInput) (html string, bars, sections int) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, reportTemplate.Execute(&buf, buildPage(in)))
	html = buf.String()
	for _, b := range barRE.FindAllString(html, -1) {
		bars++
		if m := sectionsRE.FindStringSubmatch(b); m != nil {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			sections += n
		} else {
			sections++
		}
	}
	return html, bars, sections
}

func TestReportDrawsEverySectionBelowTheBudget(t *testing.T) {
	in := syntheticRun(5000)
	html, bars, sections := render(t, in)
	assert.Equal(t, len(in.secs), bars)
	assert.Equal(t, len(in.secs), sections)
	assert.Contains(t, html, `data-aggregated="false"`)
	assert.Contains(t, html, "All "+strconv.Itoa(len(in.secs))+" sections on 14 locks are drawn")
}

func TestReportAggregatesAboveTheBudget(t *testing.T) {
	in := syntheticRun(100_000)
	require.Greater(t, len(in.secs), maxBars)
	html, bars, sections := render(t, in)
	assert.LessOrEqual(t, bars, maxBars, "the page stays bounded")
	assert.Equal(t, len(in.secs), sections, "every section is counted in some bar")
	assert.Contains(t, html, `data-aggregated="true"`)
	assert.Contains(t, html, "This run recorded "+strconv.Itoa(len(in.secs))+" sections")
	// The victim's hold of the leader lock is long: drawn as itself, cut.
	assert.Regexp(t, `<rect class="bar n2 cut"[^>]* data-node="2" data-start="0.000" data-end="10000.000" data-token="1"`, html)
	t.Logf("%d sections as %d bars, %d KB", len(in.secs), bars, len(html)/1024)
}

func TestLogHistogramCountsEveryValue(t *testing.T) {
	ds := []time.Duration{-time.Millisecond, 0, time.Nanosecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Second}
	h := logHistogram(ds, "")
	n := 0
	for _, b := range h.Bars {
		n += b.Count
	}
	assert.Equal(t, len(ds), n)
	// 6 decades below 3 s reach down to 3 µs: the nanosecond, zero and
	// the negative value fall below it.
	assert.Equal(t, 3, h.Clamped)
	assert.Equal(t, "1µs", h.XTicks[0].Label)
	assert.Equal(t, "10s", h.XTicks[len(h.XTicks)-1].Label)
}

func TestReportPathIsCheckedBeforeTheRun(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"--report", "/nonexistent-dir/report.html"}, &stderr)
	require.Error(t, err)
	assert.Contains(t, stderr.String(), "--report")
}

// A node that enters sections at a steady rate draws a flat line up to the
// end of the work, whatever the run's length: no dip in a last bucket that
// holds only a sliver of time, nor after the nodes were told to stop.
func TestThroughputHasNoEdgeDip(t *testing.T) {
	const start = int64(1_700_000_000_000_000_000)
	for _, stop := range []time.Duration{20 * time.Second, 20*time.Second + 45*time.Millisecond, 20*time.Second + 300*time.Millisecond} {
		in := reportInput{cfg: config{nodes: 1, lease: 3 * time.Second}, start: start,
			stopAt: start + int64(stop), end: start + int64(stop+400*time.Millisecond)} // the nodes take 400 ms to stop
		for at := start; at < in.stopAt; at += int64(10 * time.Millisecond) { // 100 per second
			in.secs = append(in.secs, section{node: 0, lock: acctLock(0), kind: kindMulti, lead: true, start: at, end: at + int64(time.Millisecond)})
		}
		v := buildThroughput(in)
		require.Len(t, v.Series, 1)
		var ys []float64
		for _, p := range strings.Fields(v.Series[0].Points) {
			_, y, ok := strings.Cut(p, ",")
			require.True(t, ok, p)
			f, err := strconv.ParseFloat(y, 64)
			require.NoError(t, err)
			ys = append(ys, f)
		}
		require.GreaterOrEqual(t, len(ys), 40, "%v: buckets of 500 ms", stop)
		for i, y := range ys {
			assert.InDelta(t, ys[0], y, 2, "%v: bucket %d of %d drawn at another rate", stop, i, len(ys))
		}
	}
}
