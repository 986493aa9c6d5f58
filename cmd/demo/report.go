package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// check is one line of the verdict.
type check struct {
	key    string // in the summary
	name   string
	status string // PASS, FAIL, SKIP
	detail string
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// kindFigures are the figures of one kind of critical section.
type kindFigures struct {
	Acquisitions int     `json:"acquisitions"`
	PerSecond    float64 `json:"per_s"`
	Handoffs     int     `json:"handoffs"`
	HandoffP50   float64 `json:"handoff_p50_ms"`
	HandoffP99   float64 `json:"handoff_p99_ms"`
	Timeouts     int     `json:"timeouts"`
}

// summary is the machine-readable result, printed as one line:
// "SUMMARY <json>".
type summary struct {
	Verdict     string                 `json:"verdict"`
	Checks      map[string]string      `json:"checks"`
	Interrupted bool                   `json:"interrupted"`
	Nodes       int                    `json:"nodes"`
	NodePIDs    []int                  `json:"node_pids"`
	Redis       []string               `json:"redis"`
	Cluster     bool                   `json:"cluster"`
	OwnRedis    bool                   `json:"own_redis"`
	WorkSeconds float64                `json:"work_s"`
	LeaseMs     int64                  `json:"lease_ms"`
	Kinds       map[string]kindFigures `json:"kinds"`
	All         kindFigures            `json:"all"`
	Killed      bool                   `json:"killed"`
	TakeoverMs  float64                `json:"takeover_ms"` // -1: none
	Balance     struct {
		Want int64 `json:"want"`
		Got  int64 `json:"got"`
	} `json:"balance"`
	Sections   int `json:"sections"` // per lock: a MultiLock section counts once per lock
	Transfers  int `json:"transfers"`
	Overlaps   int `json:"overlaps"`
	Inversions int `json:"inversions"`
	LostJobs   int `json:"lost_job_updates"`
	Reads      int `json:"reads"`
	TornReads  int `json:"torn_reads"`
	RelicReads int `json:"torn_by_kill"`
	Delayed    struct {
		Offered    int     `json:"offered"`
		InDoubt    int     `json:"in_doubt"`
		Delivered  int     `json:"delivered"`
		Missing    int     `json:"missing"`
		Duplicates int     `json:"duplicates"`
		Unknown    int     `json:"unknown"`
		LateP50    float64 `json:"lateness_p50_ms"`
		LateP99    float64 `json:"lateness_p99_ms"`
	} `json:"delayed"`
	Switches int      `json:"peer_switches"`
	Lost     int      `json:"locks_lost"`
	Errors   []string `json:"errors"`
}

// verdict reads the end state, checks the record against it and prints
// the figures, the verdict and the summary; it returns the exit code.
func (r *runner) verdict() int {
	out := r.std.out
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	final, err := readFinal(ctx, r.rdb, r.cfg)
	if err != nil {
		fmt.Fprintln(r.std.err, "demo: reading the end state:", err)
		return exitFail
	}
	a := r.agg
	secs, leftOpen := a.snapshotSections(r.workEnd.UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()

	var sum summary
	sum.Nodes, sum.Redis, sum.Cluster, sum.OwnRedis = r.cfg.nodes, r.be.addrs, r.be.cluster, r.be.own
	for _, n := range a.nodes {
		sum.NodePIDs = append(sum.NodePIDs, n.pid)
	}
	work := r.workEnd.Sub(r.workStart)
	sum.WorkSeconds, sum.LeaseMs, sum.Interrupted = work.Seconds(), r.cfg.lease.Milliseconds(), r.interrupted
	sum.Killed = a.killAt != 0

	// Per lock: overlaps, inversions, hand-offs; per kind: figures.
	locks := byLock(secs)
	names := make([]string, 0, len(locks))
	for l := range locks {
		names = append(names, l)
	}
	slices.Sort(names)
	var hs []handoff
	var example string
	for _, l := range names {
		ss := locks[l]
		c := checkLock(ss)
		sum.Overlaps += c.overlaps
		sum.Inversions += c.inversions
		if example == "" {
			example = c.example
		}
		sortByStart(ss)
		hs = handoffs(hs, ss)
	}
	sum.Kinds = map[string]kindFigures{}
	lat := map[string][]time.Duration{}
	var all []time.Duration
	for _, h := range hs {
		lat[h.kind] = append(lat[h.kind], h.lat)
		all = append(all, h.lat)
	}
	for _, s := range secs {
		if !s.lead {
			continue
		}
		f := sum.Kinds[s.kind]
		f.Acquisitions++
		sum.Kinds[s.kind] = f
		sum.All.Acquisitions++
		if s.kind == kindMulti && s.wrote {
			sum.Transfers++
		}
	}
	figures := func(f kindFigures, ds []time.Duration, timeouts int) kindFigures {
		slices.Sort(ds)
		f.PerSecond = float64(f.Acquisitions) / max(work.Seconds(), 1e-3)
		f.Handoffs, f.HandoffP50, f.HandoffP99 = len(ds), msf(pct(ds, 50)), msf(pct(ds, 99))
		f.Timeouts = timeouts
		return f
	}
	var timeouts int
	for _, k := range kinds {
		sum.Kinds[k] = figures(sum.Kinds[k], lat[k], a.timeouts[k])
		timeouts += a.timeouts[k]
	}
	sum.All = figures(sum.All, all, timeouts)

	// Takeover of the leader lock.
	sum.TakeoverMs = -1
	event := a.killAt
	if event == 0 {
		event = a.abdicatedAt
	}
	if event != 0 && a.takeoverAt != 0 {
		sum.TakeoverMs = msf(time.Duration(a.takeoverAt - event))
	}

	// Bank.
	sum.Balance.Want = int64(r.cfg.accounts * initBalance)
	for _, b := range final.balances {
		sum.Balance.Got += b
	}

	// Jobs: each counter counts the jobs that wrote it, give or take the
	// victim's jobs cut by the kill (their write may or may not be in).
	completed := make([]int64, r.cfg.jobs)
	cut := make([]int64, r.cfg.jobs)
	jobOf := map[string]int{}
	for k := range r.cfg.jobs {
		jobOf[jobLock(k)] = k
	}
	for _, s := range secs {
		if k, ok := jobOf[s.lock]; ok && s.kind == kindFair {
			switch {
			case s.killed:
				cut[k]++
			case s.wrote:
				completed[k]++
			}
		}
	}
	var jobsDone int64
	for k, v := range final.jobs {
		jobsDone += completed[k]
		if v < completed[k] {
			sum.LostJobs += int(completed[k] - v)
		} else if v > completed[k]+cut[k] {
			sum.LostJobs += int(v - completed[k] - cut[k]) // counted more than ran: as wrong
		}
	}
	sum.Reads, sum.TornReads, sum.RelicReads = a.reads, a.torn, a.relics

	// Delayed jobs: exactly once.
	d := &sum.Delayed
	for job, o := range a.offers {
		n := a.delivered[job]
		switch {
		case o.offered:
			d.Offered++
			if n == 0 {
				d.Missing++
			}
		default:
			d.InDoubt++ // killed (or failed) between offering and offered: 0 or 1 delivery
		}
		if n > 1 {
			d.Duplicates += n - 1
		}
	}
	for job, n := range a.delivered {
		d.Delivered += n
		if a.offers[job] == nil {
			d.Unknown++
		}
	}
	var late []time.Duration
	for _, job := range a.dlvOrder {
		if o := a.offers[job]; o != nil && o.at != 0 {
			late = append(late, time.Duration(a.dlvAt[job]-(o.at+o.delay)))
		}
	}
	slices.Sort(late)
	d.LateP50, d.LateP99 = msf(pct(late, 50)), msf(pct(late, 99))
	sum.Switches, sum.Lost = a.switches, a.lost
	sum.Errors = slices.Clone(a.errs)
	if leftOpen > 0 {
		sum.Errors = append(sum.Errors, fmt.Sprintf("%d critical sections of live nodes never ended", leftOpen))
	}

	// The checks.
	checks := []check{
		{key: "balance", name: "balance conserved (sum of " + bankKey + ")", status: passFail(sum.Balance.Got == sum.Balance.Want),
			detail: fmt.Sprintf("%d, want %d, after %d transfers", sum.Balance.Got, sum.Balance.Want, sum.Transfers)},
		{key: "overlap", name: "no overlapping critical sections (by fencing token)", status: passFail(sum.Overlaps == 0),
			detail: fmt.Sprintf("%d overlaps in %d sections on %d locks", sum.Overlaps, len(secs), len(locks))},
		{key: "tokens", name: "fencing tokens increase with time", status: passFail(sum.Inversions == 0),
			detail: fmt.Sprintf("%d inversions", sum.Inversions)},
		{key: "jobs", name: "no lost job updates (fair-lock counters)", status: passFail(sum.LostJobs == 0),
			detail: fmt.Sprintf("%d jobs run, %d updates lost", jobsDone, sum.LostJobs)},
		{key: "config", name: "no torn config reads (read-write lock)", status: passFail(sum.TornReads == 0 && sum.Reads > 0),
			detail: fmt.Sprintf("%d torn of %d reads (%d saw the write the kill cut short, until the next write)", sum.TornReads, sum.Reads, sum.RelicReads)},
		{key: "delayed", name: "every delayed job delivered exactly once", status: passFail(d.Missing == 0 && d.Duplicates == 0 && d.Unknown == 0),
			detail: fmt.Sprintf("%d offered, %d delivered; %d missing, %d duplicates, %d never offered; %d in doubt (killed mid-offer)",
				d.Offered, d.Delivered, d.Missing, d.Duplicates, d.Unknown, d.InDoubt)},
		r.takeoverCheck(sum.TakeoverMs, event),
		{key: "errors", name: "nodes ran without errors", status: passFail(len(sum.Errors) == 0),
			detail: fmt.Sprintf("%d errors; %d acquisitions timed out, %d remote peers given up on, %d locks reported lost", len(sum.Errors), timeouts, sum.Switches, sum.Lost)},
	}
	ok := true
	sum.Checks = map[string]string{}
	for _, c := range checks {
		sum.Checks[c.key] = c.status
		ok = ok && c.status != "FAIL"
	}
	sum.Verdict = passFail(ok)
	sum.Sections = len(secs)

	var reportErr error
	if r.cfg.report != "" {
		reportErr = writeReport(r.cfg.report, reportInput{
			cfg: r.cfg, backend: r.be.String(), sum: sum, checks: checks, example: example, secs: secs,
			handoffs: hs, lateness: late, start: r.workStart.UnixNano(), end: r.workEnd.UnixNano(), stopAt: r.stopAt.UnixNano(),
			killAt: a.killAt, abdicateAt: a.abdicatedAt, takeoverAt: a.takeoverAt, victim: a.victim,
		})
	}

	r.printFigures(out, sum, work)
	printChecks(out, checks)
	for i, e := range sum.Errors {
		if i == 10 {
			fmt.Fprintf(out, "  ... %d more errors\n", len(sum.Errors)-10)
			break
		}
		fmt.Fprintln(out, "  error:", e)
	}
	if example != "" {
		fmt.Fprintln(out, "  first violation:", example)
	}
	for _, m := range a.lostMsgs {
		fmt.Fprintln(out, "  lost:", m)
	}
	switch {
	case reportErr != nil:
		fmt.Fprintln(r.std.err, "demo: writing the report:", reportErr)
	case r.cfg.report != "":
		fmt.Fprintln(out, "report:", r.cfg.report)
	}
	fmt.Fprintln(out, "VERDICT:", sum.Verdict)
	b, _ := json.Marshal(sum)
	fmt.Fprintf(out, "SUMMARY %s\n", b)
	if !ok || reportErr != nil {
		return exitFail
	}
	return exitPass
}

// takeoverCheck: after the kill (or the abdication) a survivor must get
// the leader lock within the lease and some slack. After a kill that is
// when the dead holder's lease runs out, which counts from its last
// renewal (every lease/3), not from the kill: 2/3 of a lease to a lease
// after it.
func (r *runner) takeoverCheck(takeoverMs float64, event int64) check {
	c := check{key: "takeover", name: "leader lock taken over when the dead holder's lease ran out"}
	bound := r.cfg.lease + takeoverSlack
	what := "after the SIGKILL"
	expect := fmt.Sprintf("expected %v to %v: the lease, %v, runs from the last renewal, made every %v",
		(r.cfg.lease - r.cfg.lease/3).Round(time.Millisecond), r.cfg.lease, r.cfg.lease, r.cfg.lease/3)
	if !r.cfg.kill {
		c.name, what, expect = "leader lock handed over after release", "after the release", "expected at once"
	}
	switch {
	case r.cfg.unsafe:
		c.status, c.detail = "SKIP", "--unsafe: no lock to take over"
	case event == 0:
		c.status, c.detail = "SKIP", "the run ended before half time"
	case takeoverMs < 0:
		c.status, c.detail = passFail(r.interrupted), fmt.Sprintf("no other node got %s %s", leaderLock, what)
		if r.interrupted {
			c.status = "SKIP"
		}
	default:
		d := time.Duration(takeoverMs * float64(time.Millisecond))
		c.status = passFail(d <= bound)
		c.detail = fmt.Sprintf("%v %s (%s; bound %v)", d.Round(time.Millisecond), what, expect, bound)
	}
	return c
}

func (r *runner) printFigures(w io.Writer, sum summary, work time.Duration) {
	how := "ran"
	if r.interrupted {
		how = "interrupted (Ctrl-C) after"
	}
	fmt.Fprintf(w, "\n%s %v of work on %d nodes, %s, lease %v\n", how, work.Round(time.Millisecond), r.cfg.nodes, r.be, r.cfg.lease)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "primitive\tacquisitions\tper s\thand-offs\thand-off p50\thand-off p99\ttimeouts\t")
	row := func(name string, f kindFigures) {
		p50, p99 := "-", "-"
		if f.Handoffs > 0 {
			p50, p99 = fmt.Sprintf("%.2fms", f.HandoffP50), fmt.Sprintf("%.2fms", f.HandoffP99)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%s\t%s\t%d\t\n", name, f.Acquisitions, f.PerSecond, f.Handoffs, p50, p99, f.Timeouts)
	}
	for _, k := range kinds {
		row(k, sum.Kinds[k])
	}
	row("all", sum.All)
	_ = tw.Flush()
	switch {
	case sum.TakeoverMs >= 0 && r.cfg.kill:
		fmt.Fprintf(w, "takeover of %s after SIGKILL of node %d: %.0fms (lease %v)\n", leaderLock, r.agg.victim, sum.TakeoverMs, r.cfg.lease)
	case sum.TakeoverMs >= 0:
		fmt.Fprintf(w, "hand-over of %s after node %d released it: %.2fms\n", leaderLock, r.agg.victim, sum.TakeoverMs)
	default:
		fmt.Fprintf(w, "takeover of %s: none\n", leaderLock)
	}
	d := sum.Delayed
	fmt.Fprintf(w, "delayed jobs: %d offered, %d delivered, lateness p50 %.2fms p99 %.2fms\n", d.Offered, d.Delivered, d.LateP50, d.LateP99)
}

func printChecks(w io.Writer, checks []check) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tresult\tdetail")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.name, c.status, strings.TrimSpace(c.detail))
	}
	_ = tw.Flush()
}
