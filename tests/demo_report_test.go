package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoReport runs the demo with --report and checks the page against
// the run: one bar per critical section the demo counted, in the lane of
// its lock, the killed node's sections before the kill and its hold of the
// leader lock cut by it, the takeover where the summary says, the
// histograms holding every hand-off and delayed job, the verdict table.
// Then headless Chromium opens the page: its DOM has the same bars, and
// its screenshot shows the nodes' colours painted over large areas.
func TestDemoReport(t *testing.T) {
	t.Parallel()
	bin := buildDemo(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	// One bar per section, however many a fast machine records.
	res := runDemo(t, bin, "--duration", "6s", "--report", page, "--report-max-bars", "1000000")
	require.Equal(t, 0, res.code, res)
	assert.Empty(t, res.stderr)
	assert.Contains(t, res.stdout, "report: "+page)
	s := parseReportSummary(t, res.stdout)
	require.Equal(t, "PASS", s.Verdict, res.stdout)
	require.True(t, s.Killed)
	require.Positive(t, s.Sections)

	raw, err := os.ReadFile(page)
	require.NoError(t, err)
	doc := parseHTMLPage(t, raw)

	// Self-contained: nothing to fetch, nothing to run.
	assert.Zero(t, doc.count("script"), "no scripts")
	assert.Empty(t, doc.external, "no external references")
	assert.NotContains(t, string(raw), "url(", "no CSS fetches")

	// The timeline: every section of the run is one bar.
	tl := doc.first("svg", "timeline")
	require.NotNil(t, tl, "the timeline's svg")
	assert.Equal(t, "false", tl.attr["data-aggregated"])
	assert.Equal(t, strconv.Itoa(s.Sections), tl.attr["data-sections"])
	bars := doc.all("rect", "bar")
	assert.Len(t, bars, s.Sections, "one bar per critical section")

	wantLocks := []string{"demo:leader", "demo:config:lock"}
	for k := range 4 {
		wantLocks = append(wantLocks, "demo:job:"+strconv.Itoa(k))
	}
	for k := range 8 {
		wantLocks = append(wantLocks, "demo:acct:"+strconv.Itoa(k))
	}
	var lanes []string
	perLane := map[string]int{}
	for _, b := range bars {
		perLane[b.lane]++
	}
	for _, l := range doc.all("g", "lane") {
		lock := l.attr["data-lock"]
		lanes = append(lanes, lock)
		assert.Equal(t, l.attr["data-sections"], strconv.Itoa(perLane[lock]), "bars in the lane of %s", lock)
	}
	assert.Equal(t, wantLocks, lanes, "one lane per lock, the leader first, accounts last")

	killMs := floatAttr(t, tl, "data-kill")
	takeoverMs := floatAttr(t, tl, "data-takeover")
	assert.InDelta(t, s.TakeoverMs, takeoverMs-killMs, 1, "takeover marked where the summary says")
	victim := len(s.NodePIDs) - 1
	seen := map[string]bool{}
	var victimLeader, survivorLeader []*htmlElement
	for _, b := range bars {
		node, err := strconv.Atoi(b.attr["data-node"])
		require.NoError(t, err)
		require.True(t, node >= 0 && node <= victim, "node %d", node)
		assert.Contains(t, b.attr["class"], "n"+strconv.Itoa(node), "coloured by its node")
		start, end := floatAttr(t, b, "data-start"), floatAttr(t, b, "data-end")
		assert.LessOrEqual(t, start, end)
		tok, err := strconv.ParseInt(b.attr["data-token"], 10, 64)
		require.NoError(t, err)
		assert.Positive(t, tok)
		key := b.lane + "/" + b.attr["data-token"]
		assert.False(t, seen[key], "token %s twice on %s", b.attr["data-token"], b.lane)
		seen[key] = true
		if node == victim {
			assert.LessOrEqual(t, start, killMs, "the killed node entered nothing after its death")
			assert.LessOrEqual(t, end, killMs+0.001)
		}
		if b.lane == "demo:leader" {
			if node == victim {
				victimLeader = append(victimLeader, b)
			} else {
				survivorLeader = append(survivorLeader, b)
			}
		}
	}
	require.Len(t, victimLeader, 1, "the victim held the leader lock once, until the kill")
	assert.Contains(t, victimLeader[0].attr["class"], "cut")
	assert.InDelta(t, killMs, floatAttr(t, victimLeader[0], "data-end"), 0.001)
	require.NotEmpty(t, survivorLeader, "a survivor took the leader lock")
	first := survivorLeader[0]
	for _, b := range survivorLeader {
		assert.GreaterOrEqual(t, floatAttr(t, b, "data-start"), takeoverMs-0.001, "no survivor led before the takeover")
		if floatAttr(t, b, "data-start") < floatAttr(t, first, "data-start") {
			first = b
		}
	}
	assert.InDelta(t, takeoverMs, floatAttr(t, first, "data-start"), 0.001)

	// Histograms: every hand-off and every delayed job, in their bins.
	hists := doc.all("svg", "histogram")
	require.Len(t, hists, 2)
	assert.Equal(t, strconv.Itoa(s.All.Handoffs), hists[0].attr["data-count"], "hand-offs")
	assert.Equal(t, strconv.Itoa(s.Delayed.Delivered), hists[1].attr["data-count"], "delayed jobs")
	for _, h := range hists {
		sum := 0
		for _, b := range doc.all("rect", "hbar") {
			if b.parent == h {
				n, err := strconv.Atoi(b.attr["data-count"])
				require.NoError(t, err)
				sum += n
			}
		}
		assert.Equal(t, h.attr["data-count"], strconv.Itoa(sum), "the bins hold every value")
	}
	assert.Len(t, doc.all("polyline", "series"), len(s.NodePIDs), "a throughput line per node")

	// The verdict table says what the text verdict said.
	var statuses []string
	for _, r := range doc.all("tr", "") {
		if st, ok := r.attr["data-status"]; ok {
			statuses = append(statuses, st)
		}
	}
	assert.Len(t, statuses, len(s.Checks))
	for _, st := range statuses {
		assert.Equal(t, "PASS", st)
	}
	assert.Equal(t, "PASS", doc.text("verdict"))

	// The page explains its marks: every one is in the legend, and the
	// stall after the kill is captioned with its cause and expected length.
	for _, key := range []string{"grey lane: no critical section", "paler: a read section", "kill<", "lock held by a dead node<",
		"section cut short by the kill<", "takeover of the leader lock<"} {
		assert.True(t, bytes.Contains(raw, []byte("</svg>"+key)), "no legend entry %q", key)
	}
	stall := doc.text("stall")
	assert.Contains(t, stall, "until their lease runs out")
	assert.Contains(t, stall, "fair-wait timeout")

	legend := map[int]color.RGBA{}
	for _, r := range doc.all("rect", "") {
		if n, ok := r.attr["data-legend-node"]; ok {
			i, err := strconv.Atoi(n)
			require.NoError(t, err)
			legend[i] = hexColour(t, r.attr["fill"])
		}
	}
	require.Len(t, legend, len(s.NodePIDs), "a legend entry per node")

	// In a browser.
	browser := findChromium(t)
	profile := t.TempDir() // a fresh profile: parallel runs never share one
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	url := "file://" + page
	dom, err := exec.CommandContext(ctx, browser, "--headless", "--disable-gpu", "--no-sandbox",
		"--user-data-dir="+profile, "--dump-dom", url).Output()
	require.NoError(t, err, "chromium --dump-dom")
	rendered := parseHTMLPage(t, dom)
	assert.Len(t, rendered.all("rect", "bar"), s.Sections, "the browser's DOM has every bar")
	assert.GreaterOrEqual(t, rendered.count("svg"), 5, "timeline, two histograms, throughput, legend swatches")
	assert.Len(t, rendered.all("polyline", "series"), len(s.NodePIDs))

	shot := filepath.Join(t.TempDir(), "report.png")
	const width, height = 1240, 1900
	out, err := exec.CommandContext(ctx, browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
		"--user-data-dir="+profile, "--screenshot="+shot, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), url).CombinedOutput()
	require.NoError(t, err, "chromium --screenshot: %s", out)
	img := readPNGFile(t, shot)
	require.Equal(t, image.Rect(0, 0, width, height), img.Bounds())
	colours, saturated, perNode := paintedColours(img, legend)
	t.Logf("screenshot: %d distinct colours, %d saturated pixels; pixels of each node's exact colour: %v", colours, saturated, perNode)
	assert.Greater(t, colours, 1000, "a page of charts and text, not a blank or a flat image")
	// Measured on a 6 s run: ~26,000 saturated pixels without the bars
	// (badges, lines, histograms), ~84,000 with them; most bars are under
	// a pixel wide, so they show as blends of the nodes' colours.
	assert.Greater(t, saturated, 50000, "the timeline's bars are painted")
	// The victim's hold of the leader lock spans half the timeline, in its
	// node's colour (~9,000 pixels); the legend swatches are ~250.
	assert.Greater(t, perNode[victim], 4000, "pixels painted in the victim's colour")

	// Every panel fits a 1400 px window: a copy of the page with a probe
	// script records, where Chromium's dump of the DOM shows it, the panels
	// wider than their box (which would scroll sideways).
	probe := filepath.Join(dir, "probe.html")
	script := `<script>document.body.setAttribute("data-overflow", Array.from(document.querySelectorAll("section"))` +
		`.filter(s => s.scrollWidth > s.clientWidth).map(s => s.querySelector("h2").textContent).join("|") || "none")</script></body>`
	require.NoError(t, os.WriteFile(probe, bytes.Replace(raw, []byte("</body>"), []byte(script), 1), 0o644))
	dom, err = exec.CommandContext(ctx, browser, "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir="+profile,
		"--window-size=1400,1000", "--dump-dom", "file://"+probe).Output()
	require.NoError(t, err, "chromium --dump-dom of the probe")
	overflow := parseHTMLPage(t, dom).first("body", "")
	require.NotNil(t, overflow)
	assert.Equal(t, "none", overflow.attr["data-overflow"], "panels that scroll sideways at 1400 px")
}

// reportSummary is what this test reads of the SUMMARY line.
type reportSummary struct {
	Verdict    string            `json:"verdict"`
	Checks     map[string]string `json:"checks"`
	NodePIDs   []int             `json:"node_pids"`
	Killed     bool              `json:"killed"`
	TakeoverMs float64           `json:"takeover_ms"`
	Sections   int               `json:"sections"`
	All        struct {
		Handoffs int `json:"handoffs"`
	} `json:"all"`
	Delayed struct {
		Delivered int `json:"delivered"`
	} `json:"delayed"`
}

func parseReportSummary(t *testing.T, stdout string) reportSummary {
	t.Helper()
	m := summaryLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, "no SUMMARY line in:\n%s", stdout)
	var s reportSummary
	require.NoError(t, json.Unmarshal([]byte(m[1]), &s))
	return s
}

// findChromium finds Debian's chromium. The test command (./dev.sh test)
// installs it; in CI a missing one fails the test, elsewhere it skips with
// the hint.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const hint = "headless Chromium is needed to render the demo's report: apt-get install -y chromium (./dev.sh test installs it)"
	if os.Getenv("CI") == "true" {
		t.Fatal(hint)
	}
	t.Skip(hint)
	return ""
}

// htmlElement is an element of the page, with the lane it is in (if any).
type htmlElement struct {
	name   string
	attr   map[string]string
	lane   string
	parent *htmlElement // the nearest enclosing svg
	text   string
}

// htmlPage is the parsed report: its elements in document order.
type htmlPage struct {
	elems    []*htmlElement
	external []string // attributes that would fetch something
}

// parseHTMLPage reads HTML with encoding/xml in its lenient HTML mode: the
// report is the demo's own, regular output, and the browser's serialized
// DOM is too.
func parseHTMLPage(t *testing.T, b []byte) *htmlPage {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	p := &htmlPage{}
	type open struct {
		e    *htmlElement
		lane bool
	}
	var stack []open
	var lane string
	var svg *htmlElement
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &htmlElement{name: strings.ToLower(tok.Name.Local), attr: map[string]string{}, lane: lane, parent: svg}
			for _, a := range tok.Attr {
				name := strings.ToLower(a.Name.Local)
				if a.Name.Space != "" {
					name = strings.ToLower(a.Name.Space) + ":" + name
				}
				e.attr[name] = a.Value
				if name == "src" || strings.HasSuffix(name, "href") {
					p.external = append(p.external, name+"="+a.Value)
				}
			}
			isLane := e.name == "g" && htmlHasClass(e, "lane")
			if isLane {
				lane = e.attr["data-lock"]
			}
			if e.name == "svg" && svg == nil {
				svg = e
			}
			p.elems = append(p.elems, e)
			stack = append(stack, open{e, isLane})
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].e.text += string(tok)
			}
		case xml.EndElement:
			if len(stack) == 0 {
				continue
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.lane {
				lane = ""
			}
			if top.e == svg {
				svg = nil
			}
		}
	}
	return p
}

func htmlHasClass(e *htmlElement, class string) bool {
	return class == "" || strings.Contains(" "+e.attr["class"]+" ", " "+class+" ")
}

// all are the elements of that name with that class ("" for any).
func (p *htmlPage) all(name, class string) []*htmlElement {
	var out []*htmlElement
	for _, e := range p.elems {
		if e.name == name && htmlHasClass(e, class) {
			out = append(out, e)
		}
	}
	return out
}

func (p *htmlPage) first(name, class string) *htmlElement {
	if es := p.all(name, class); len(es) > 0 {
		return es[0]
	}
	return nil
}

func (p *htmlPage) count(name string) int { return len(p.all(name, "")) }

// text is the text of the element with that id.
func (p *htmlPage) text(id string) string {
	for _, e := range p.elems {
		if e.attr["id"] == id {
			return strings.TrimSpace(e.text)
		}
	}
	return ""
}

func floatAttr(t *testing.T, e *htmlElement, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attr[name], 64)
	require.NoError(t, err, "%s=%q of a %s", name, e.attr[name], e.name)
	return v
}

func hexColour(t *testing.T, s string) color.RGBA {
	t.Helper()
	require.Len(t, s, 7, "colour %q", s)
	v, err := strconv.ParseUint(s[1:], 16, 32)
	require.NoError(t, err)
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

func readPNGFile(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img
}

// paintedColours counts the image's distinct colours, its saturated
// pixels (channels more than 50 apart: not white, grey or black text) and,
// per node, the pixels of exactly its colour.
func paintedColours(img image.Image, nodes map[int]color.RGBA) (distinct, saturated int, perNode map[int]int) {
	seen := map[color.RGBA]bool{}
	byColour := map[color.RGBA]int{}
	for node, c := range nodes {
		byColour[c] = node
	}
	perNode = map[int]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			seen[c] = true
			if int(max(c.R, c.G, c.B))-int(min(c.R, c.G, c.B)) > 50 {
				saturated++
			}
			if node, ok := byColour[c]; ok {
				perNode[node]++
			}
		}
	}
	return len(seen), saturated, perNode
}
