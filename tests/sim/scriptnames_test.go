package sim

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scriptParts are the scripts of package scripts, each with the files it
// joins (newScript's parts, in its order), as scripts/*.go builds them.
var scriptParts = map[string][]string{
	"lock_acquire":      {"guard", "reentrant", "lock_acquire"},
	"lock_unlock":       {"guard", "release", "reentrant", "lock_unlock"},
	"lock_handoff":      {"guard", "reentrant", "lock_handoff"},
	"lock_force_unlock": {"lock_force_unlock"},
	"lock_renew":        {"reentrant", "lock_renew"},
	"lock_extend":       {"reentrant", "lock_extend"},
	"fair_acquire":      {"guard", "reentrant", "fair", "fair_acquire"},
	"fair_unlock":       {"guard", "release", "reentrant", "fair", "fair_unlock"},
	"fair_leave":        {"guard", "fair", "fair_leave"},
	"fair_force_unlock": {"fair_force_unlock"},
	"fair_refresh":      {"fair", "fair_refresh"},
	"rw_read_acquire":   {"guard", "reentrant", "rw_read_acquire"},
	"rw_write_acquire":  {"guard", "reentrant", "rw_write_acquire"},
	"rw_read_unlock":    {"guard", "rw_read_unlock"},
	"rw_write_unlock":   {"guard", "release", "rw_write_unlock"},
	"rw_renew":          {"reentrant", "rw_renew"},
	"rw_force_unlock":   {"rw_force_unlock"},
	"latch_try_set":     {"kind", "guard", "latch_try_set"},
	"latch_count_down":  {"kind", "guard", "latch_count_down"},
	"latch_delete":      {"kind", "guard", "latch_delete"},
	// The queues' and semaphores' (scripts/queue.go, semaphore.go).
	"queue_offer":                   {"kind", "guard", "queue_offer"},
	"queue_move":                    {"kind", "queue_move"},
	"queue_delayed_poll":            {"queue_delayed_poll"},
	"queue_delayed_contains":        {"queue_delayed_contains"},
	"queue_delayed_remove":          {"guard", "queue_delayed_remove"},
	"queue_push":                    {"kind", "guard", "queue_push"},
	"queue_give_back":               {"kind", "guard", "queue_give_back"},
	"queue_taken":                   {"queue_taken"},
	"semaphore_acquire":             {"kind", "guard", "semaphore_acquire"},
	"semaphore_add":                 {"kind", "guard", "semaphore_add"},
	"semaphore_try_set":             {"kind", "guard", "semaphore_try_set"},
	"semaphore_drain":               {"kind", "guard", "semaphore_drain"},
	"semaphore_expirable_acquire":   {"kind", "semaphore_expirable", "semaphore_expirable_acquire"},
	"semaphore_expirable_release":   {"kind", "guard", "semaphore_expirable", "semaphore_expirable_release"},
	"semaphore_expirable_available": {"kind", "semaphore_expirable", "semaphore_expirable_available"},
	"semaphore_expirable_update":    {"kind", "semaphore_expirable", "semaphore_expirable_update"},
}

// scriptSHAs names the scripts by the SHA1 EVALSHA carries, so that a
// history says which script a fault hit. The sources are the files of
// package scripts, joined as it joins them (a prelude, then the parts).
var scriptSHAs = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	for name, ps := range scriptParts {
		var body strings.Builder
		for _, p := range ps {
			b, err := os.ReadFile(filepath.Join("..", "..", "scripts", p+".lua"))
			if err != nil {
				return out
			}
			body.Write(b)
		}
		sum := sha1.Sum([]byte("local PUBLISH = 'publish'\n" + body.String()))
		out[hex.EncodeToString(sum[:])] = name
	}
	return out
})

// bodySHA is the SHA1 EVALSHA would carry for the script body of an EVAL.
func bodySHA(body string) string {
	sum := sha1.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

func scriptName(sha string) string {
	if n, ok := scriptSHAs()[sha]; ok {
		return n
	}
	return "sha:" + sha[:8]
}

// TestEveryScriptIsNamed: every file of package scripts is a
// script scriptParts names or a prelude one of them joins, and every part
// named exists, so that a script added or recomposed (scripts/*.go) is not
// shown by its SHA alone.
func TestEveryScriptIsNamed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "scripts", "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts/*.lua: %v", err)
	}
	used := map[string]bool{}
	for name, ps := range scriptParts {
		if ps[len(ps)-1] != name {
			t.Errorf("script %s: its last part is %s", name, ps[len(ps)-1])
		}
		for _, p := range ps {
			used[p] = true
			if _, err := os.Stat(filepath.Join("..", "..", "scripts", p+".lua")); err != nil {
				t.Errorf("script %s: part %s: %v", name, p, err)
			}
		}
	}
	for _, f := range files {
		if p := strings.TrimSuffix(filepath.Base(f), ".lua"); !used[p] {
			t.Errorf("scripts/%s.lua is in no script of scriptParts", p)
		}
	}
	if got := len(scriptSHAs()); got != len(scriptParts) {
		t.Errorf("%d of %d scripts have a SHA", got, len(scriptParts))
	}
	// A script sent whole (EVAL, go-redis's fallback on NOSCRIPT) is
	// named as by its SHA (EVALSHA).
	for name, ps := range scriptParts {
		body := "local PUBLISH = 'publish'\n"
		for _, p := range ps {
			b, _ := os.ReadFile(filepath.Join("..", "..", "scripts", p+".lua"))
			body += string(b)
		}
		for _, c := range []redis.Cmder{redis.NewCmd(context.Background(), "evalsha", bodySHA(body), 1, "k", "a"), redis.NewCmd(context.Background(), "eval", body, 1, "k", "a")} {
			if sc, ok := scriptCallOf(c); !ok || sc.script != name || !slices.Equal(sc.keys, []string{"k"}) || !slices.Equal(sc.argv, []string{"a"}) {
				t.Errorf("%s: %s is read as %+v", name, c.Name(), sc)
			}
		}
	}
	// The parts in newScript's order, read from scripts/*.go: each
	// //go:embed names the file of the variable under it.
	srcs, _ := filepath.Glob(filepath.Join("..", "..", "scripts", "*.go"))
	embedded := map[string]string{}
	var calls [][]string
	for _, f := range srcs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range embedRE.FindAllStringSubmatch(string(b), -1) {
			embedded[m[2]] = strings.TrimSuffix(m[1], ".lua")
		}
		for _, m := range newScriptRE.FindAllStringSubmatch(string(b), -1) {
			calls = append(calls, strings.Split(strings.ReplaceAll(m[1], " ", ""), ","))
		}
	}
	for _, vars := range calls {
		ps := make([]string, len(vars))
		for i, v := range vars {
			ps[i] = embedded[v]
		}
		if !slices.Equal(scriptParts[ps[len(ps)-1]], ps) {
			t.Errorf("scripts builds %s from %v; scriptParts says %v", ps[len(ps)-1], ps, scriptParts[ps[len(ps)-1]])
		}
	}
	if len(calls) != len(scriptParts) {
		t.Errorf("scripts builds %d scripts; scriptParts names %d", len(calls), len(scriptParts))
	}
}

var (
	embedRE     = regexp.MustCompile(`//go:embed (\S+)\s+(?:var\s+)?(\w+) string`)
	newScriptRE = regexp.MustCompile(`= newScript\(([\w, ]+)\)`)
)
