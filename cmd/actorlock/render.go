package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/actorlock/actorlock/internal/inspect"
)

// render shows an object as aligned "label: value" lines; withTTL false
// leaves out what changes by itself as time passes (TTLs, time left), for
// views that print only what changed.
func render(o *inspect.Object, withTTL bool) string {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	line("name", "%s", o.Name)
	line("kind", "%s", o.Kind)
	switch o.Kind {
	case inspect.Lock, inspect.FairLock, inspect.ReadWriteLock:
		state := "free"
		if o.Locked() {
			state = "held"
			if o.Mode != "" {
				state += " for " + o.Mode + "ing"
			}
			if withTTL {
				state += ", lease " + ttlText(o.TTL)
			}
		}
		line("state", "%s", state)
		for i, h := range o.Holds {
			label := ""
			if i == 0 {
				label = "holders:"
			}
			fmt.Fprintf(&b, "%-10s %s\n", label, holdText(o.Kind, h, withTTL))
		}
		if o.Kind == inspect.FairLock {
			line("waiters", "%d", o.WaitersTotal)
			for i, w := range o.Waiters {
				fmt.Fprintf(&b, "%-10s %d. %s", "", i+1, w.Owner)
				if withTTL {
					fmt.Fprintf(&b, "  keeps its place until %s (%s)", clock(w.Deadline), left(w.Remaining))
				}
				b.WriteByte('\n')
			}
			if n := o.WaitersTotal - int64(len(o.Waiters)); n > 0 {
				fmt.Fprintf(&b, "%-10s ... and %d more\n", "", n)
			}
		}
		if o.TokenSet {
			line("token", "%d (last fencing token issued)", o.Token)
		} else {
			line("token", "none issued")
		}
	case inspect.Semaphore:
		line("available", "%s", plural(o.Value, "permit"))
	case inspect.CountDownLatch:
		line("count", "%d", o.Value)
	case inspect.ExpirableSemaphore:
		line("available", "%s", plural(o.Value, "permit"))
		line("taken", "%s", plural(o.PermitsTotal, "permit"))
		for _, p := range o.Permits {
			fmt.Fprintf(&b, "%-10s %s", "", p.ID)
			switch {
			case !withTTL:
			case p.Expiry.IsZero():
				b.WriteString("  no expiry")
			case p.Remaining <= 0:
				fmt.Fprintf(&b, "  expired at %s, returns to the pool on the next call", clock(p.Expiry))
			default:
				fmt.Fprintf(&b, "  expires %s (%s)", clock(p.Expiry), left(p.Remaining))
			}
			b.WriteByte('\n')
		}
		if n := o.PermitsTotal - int64(len(o.Permits)); n > 0 {
			fmt.Fprintf(&b, "%-10s ... and %d more\n", "", n)
		}
	case inspect.DelayedQueue, inspect.Queue:
		q := o.Queue
		line("ready", "%s in the list (what Take gets)", plural(q.Ready, "item"))
		if o.Kind == inspect.DelayedQueue {
			line("delayed", "%s", plural(q.Delayed, "item"))
			switch {
			case q.NextDue.IsZero():
				line("next due", "none")
			case withTTL:
				line("next due", "%s (%s)", clock(q.NextDue), left(q.NextDueIn))
			}
		}
	}
	return b.String()
}

// holdText is one owner's holds.
func holdText(kind inspect.Kind, h inspect.Hold, withTTL bool) string {
	if kind != inspect.ReadWriteLock {
		return fmt.Sprintf("%s  %s%s", h.Owner, plural(h.Count, "hold"), processText(h))
	}
	var parts []string
	if h.Writes > 0 {
		parts = append(parts, plural(h.Writes, "write"))
	}
	if h.Count > 0 {
		r := plural(h.Count, "read")
		if withTTL && len(h.ReadTTLs) > 0 {
			ttls := make([]string, len(h.ReadTTLs))
			for i, d := range h.ReadTTLs {
				ttls[i] = ttlText(d)
			}
			r += " [" + strings.Join(ttls, " ") + "]"
		}
		parts = append(parts, r)
	}
	return h.Owner + "  " + strings.Join(parts, ", ") + processText(h)
}

// processText is where the holder runs, when its runtime keeps a record.
func processText(h inspect.Hold) string {
	if h.Process == nil {
		return ""
	}
	return fmt.Sprintf("  (host %s, pid %d)", h.Process.Host, h.Process.PID)
}

// summary is an object on one line, for list and for watch without a
// terminal.
func summary(o *inspect.Object) string {
	switch o.Kind {
	case inspect.Lock, inspect.FairLock, inspect.ReadWriteLock:
		s := "free"
		if o.Locked() {
			s = "held by " + owners(o)
			if o.Mode != "" {
				s = o.Mode + " " + s
			}
		}
		if o.Kind == inspect.FairLock {
			w := make([]string, len(o.Waiters))
			for i, x := range o.Waiters {
				w[i] = x.Owner
			}
			s += fmt.Sprintf("; %d waiting [%s]", o.WaitersTotal, strings.Join(w, " "))
		}
		return s
	case inspect.Semaphore:
		return plural(o.Value, "permit") + " available"
	case inspect.CountDownLatch:
		return fmt.Sprintf("count %d", o.Value)
	case inspect.ExpirableSemaphore:
		return fmt.Sprintf("%s available, %d taken", plural(o.Value, "permit"), o.PermitsTotal)
	case inspect.DelayedQueue:
		return fmt.Sprintf("%d ready, %d delayed", o.Queue.Ready, o.Queue.Delayed)
	case inspect.Queue:
		return fmt.Sprintf("%d ready", o.Queue.Ready)
	}
	return ""
}

// owners lists a lock's holders with their counts.
func owners(o *inspect.Object) string {
	s := make([]string, len(o.Holds))
	for i, h := range o.Holds {
		n := h.Count + h.Writes
		s[i] = fmt.Sprintf("%s×%d", h.Owner, n)
		if h.Process != nil {
			s[i] += fmt.Sprintf(" (%s pid %d)", h.Process.Host, h.Process.PID)
		}
	}
	return strings.Join(s, ", ")
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// ttlText is a TTL as inspect gives it: 0 gone, -1 no expiry.
func ttlText(d time.Duration) string {
	switch {
	case d == 0:
		return "expired"
	case d < 0:
		return "no expiry"
	}
	return d.Round(time.Millisecond).String() + " left"
}

func left(d time.Duration) string {
	if d < 0 {
		return "passed " + (-d).Round(time.Millisecond).String() + " ago"
	}
	return "in " + d.Round(time.Millisecond).String()
}

// clock shows a server timestamp in UTC, to the millisecond.
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }
