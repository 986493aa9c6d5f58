package sim

import (
	"fmt"
	"strings"
	"time"
)

// The shapes of issue 31's defects, so that a violation names the shape it
// has (and SIM_KNOWN=A..E can count those instead of failing, to look past
// them on a library that still has them). Issue 23's defects are 1..8;
// issue 31's A..E are numbered 101..105 here.

func defect31(letter byte) int { return 100 + int(letter-'A') + 1 }

func defectName(d int) string {
	switch {
	case d == defect31('V'):
		return "issue 31 finding V (an acquisition's first attempt reaching Redis after its retry and a re-entry counts again)"
	case d == defect31('W'):
		return "issue 31 finding W (one WithOwner id held through two runtimes: a give-back releases the other's holds)"
	case d > 100 && primFindings[byte('A'+d-101)] != "":
		return fmt.Sprintf("finding %c (%s)", 'A'+d-101, primFindings[byte('A'+d-101)])
	case d > 100:
		return "issue 31 defect " + string(rune('A'+d-101))
	}
	return fmt.Sprintf("issue 23 defect %d", d)
}

// scenarioShape is the issue 31 defect whose shape each scenario drives.
var scenarioShape = [nScenarios]int{
	scLateRelease: defect31('A'), scDowngrade: defect31('B'), scLateReentry: defect31('C'),
	scReleaseOutage: defect31('D'), scFairOrder: defect31('E'),
}

// shapeOf is the issue 31 defect whose shape a violation on hold h of n
// has, 0 if none: the shape of the scenario that took h, else (the random
// workload) an owner id held through two runtimes at once (W), or what
// happened to n since h's grant: a late duplicate of a release (A), a read
// taken with LeaseTime under its owner's write (B), a late-sent
// acquisition (C), a release outage (D). m.mu held.
func (m *model) shapeOf(n *nameState, h *hold) int {
	if h.shape != 0 {
		return h.shape
	}
	if d := m.sharedShape(n, []string{h.owner}); d != 0 {
		return d
	}
	if n.kind == kRW && !h.write && h.leased {
		for _, g := range n.holds {
			if g.owner == h.owner && g.write {
				return defect31('B')
			}
		}
	}
	from := h.since.Add(-m.w.cfg.maxLease())
	for _, e := range n.hist {
		if e.t.Before(from) {
			continue
		}
		switch {
		case (strings.Contains(e.what, "late duplicate") || strings.Contains(e.what, "late-duplicate")) && strings.Contains(e.what, "unlock"):
			return defect31('A')
		case strings.Contains(e.what, "release-outage"):
			return defect31('D')
		case strings.Contains(e.what, "late-send") && strings.Contains(e.what, "_acquire"):
			return defect31('C')
		}
	}
	return 0
}

// shaped is what a violation's detail says of its shape.
func shaped(d int) string {
	if d == 0 {
		return ""
	}
	return " [shape of " + defectName(d) + "]"
}

// lateAcquireShape is shape V when a late duplicate of an acquisition
// reached n's name within the last few leases (the checks that compare
// counts in Redis do not know which hold it was), else 0. m.mu held.
func (m *model) lateAcquireShape(n *nameState) int {
	from := time.Now().Add(-10 * m.w.cfg.maxLease())
	for _, e := range n.hist {
		if e.t.After(from) && strings.Contains(e.what, "late duplicate of") && strings.Contains(e.what, "_acquire") {
			return defect31('V')
		}
	}
	return 0
}

// sharedShape is shape W when one of owners (fields) is a WithOwner id the
// with-owner-pair op tried through two runtimes at once within the last
// few leases, else 0. m.mu held.
func (m *model) sharedShape(n *nameState, owners []string) int {
	for _, o := range owners {
		if t, ok := n.shared[strings.TrimSuffix(o, ":write")]; ok && time.Since(t) < 10*m.w.cfg.maxLease() {
			return defect31('W')
		}
	}
	return 0
}
