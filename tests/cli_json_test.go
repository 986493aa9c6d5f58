package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliJSONShapes are the JSON shapes of `actorlock inspect --json` for each
// kind, and of `queue stats --json` and `list --json`, as docs/cli.md
// documents them: each field and the JSON type of its value ("number",
// "string", "bool", "null|number", "array", "object"; "time" is an RFC
// 3339 string). An array's elements are described under "<field>[]". A
// change here is a change of the CLI's contract: say so in the CHANGELOG.
var cliJSONShapes = map[string]map[string]string{
	"lock": {
		"name": "string", "kind": "string", "locked": "bool", "ttl_ms": "number", "last_token": "null|number",
		"holders": "array", "holders[]": "owner:string holds:number process:object",
	},
	"fair-lock": {
		"name": "string", "kind": "string", "locked": "bool", "ttl_ms": "number", "last_token": "null|number",
		"holders": "array", "holders[]": "owner:string holds:number process:object",
		"waiters_total": "number", "waiters": "array", "waiters[]": "owner:string deadline:time remaining_ms:number",
	},
	"read-write-lock": {
		"name": "string", "kind": "string", "locked": "bool", "mode": "string", "ttl_ms": "number", "last_token": "null|number",
		"holders": "array", "holders[]": "owner:string read_holds:number write_holds:number read_ttls_ms:array process:object",
	},
	"semaphore":        {"name": "string", "kind": "string", "available": "number"},
	"count-down-latch": {"name": "string", "kind": "string", "count": "number"},
	"permit-expirable-semaphore": {
		"name": "string", "kind": "string", "available": "number", "taken": "number",
		"permits": "array", "permits[]": "id:string expiry:null|time expires_in_ms:null|number",
	},
	"queue": {"name": "string", "kind": "string", "ready": "number"},
	"delayed-queue": {
		"name": "string", "kind": "string", "ready": "number", "delayed": "number",
		"next_due": "null|time", "next_due_in_ms": "null|number",
	},
	"list[]": {"name": "string", "kind": "string", "summary": "string"},
}

// jsonType is v's type in cliJSONShapes' terms.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return "time"
		}
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// checkShape checks obj against shape: exactly its fields, each of one of
// the types allowed ("null|number": either), and an array's elements
// against "<field>[]"'s "key:type" list (a key of type object may be
// missing: an owner of no known process).
func checkShape(t *testing.T, what string, obj map[string]any, shape map[string]string) {
	t.Helper()
	var want, got []string
	for k := range shape {
		if !strings.HasSuffix(k, "[]") {
			want = append(want, k)
		}
	}
	for k := range obj {
		got = append(got, k)
	}
	sort.Strings(want)
	sort.Strings(got)
	assert.Equal(t, want, got, "%s: its fields", what)
	for k, v := range obj {
		allowed := shape[k]
		typ := jsonType(v)
		if typ == "time" && strings.Contains(allowed, "string") && !strings.Contains(allowed, "time") {
			typ = "string"
		}
		assert.Contains(t, strings.Split(allowed, "|"), typ, "%s.%s is %s (%v)", what, k, typ, v)
		elems, ok := shape[k+"[]"]
		if !ok {
			continue
		}
		fields := map[string]string{}
		for _, f := range strings.Fields(elems) {
			name, typ, _ := strings.Cut(f, ":")
			fields[name] = typ
		}
		for i, e := range v.([]any) {
			m, ok := e.(map[string]any)
			require.True(t, ok, "%s.%s[%d] is an object", what, k, i)
			for name, typ := range fields {
				if _, present := m[name]; !present && typ == "object" {
					m[name] = map[string]any{}
				}
			}
			sub := map[string]string{}
			for name, typ := range fields {
				sub[name] = typ
			}
			checkShape(t, fmt.Sprintf("%s.%s[%d]", what, k, i), m, sub)
		}
	}
}

// Issue 32 item 5: the CLI's JSON is a contract. Each kind's inspect
// --json, queue stats --json and list --json have the shape docs/cli.md
// documents, pinned field by field; durations are milliseconds (a 30 s
// watchdog lease reads about 30000 in ttl_ms).
func TestCLIJSONShapes(t *testing.T) {
	t.Parallel()
	srv, _, rt := setup(t)
	ctx := ctxFor(t, 60*time.Second)
	bin := buildCommand(t, "github.com/actorlock/actorlock/cmd/actorlock")
	cli := func(args ...string) (any, string) {
		r := runCLI(t, bin, append([]string{"--url", "redis://" + srv.Addr, "--json"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		var v any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
		return v, r.stdout
	}

	held, err := rt.Lock("j:lock").Acquire(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Unlock(context.Background()) }()
	fairHeld, err := rt.FairLock("j:fair").Acquire(ctx)
	require.NoError(t, err)
	defer func() { _ = fairHeld.Unlock(context.Background()) }()
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	go func() { _, _ = rt.FairLock("j:fair").Acquire(waitCtx) }()
	rw, err := rt.ReadWriteLock("j:rw").ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	defer func() { _ = rw.Unlock(context.Background()) }()
	_, err = rt.Semaphore("j:sem").TrySetPermits(ctx, 3)
	require.NoError(t, err)
	_, err = rt.CountDownLatch("j:latch").TrySetCount(ctx, 2)
	require.NoError(t, err)
	ps := rt.PermitExpirableSemaphore("j:permits")
	_, err = ps.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	_, err = ps.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	_, err = ps.Acquire(ctx, 0) // no lease: null expiry
	require.NoError(t, err)
	require.NoError(t, rt.BlockingQueue("j:queue").Offer(ctx, []byte("x")))
	dq := rt.DelayedQueue("j:delayed")
	defer dq.Close()
	require.NoError(t, dq.Offer(ctx, []byte("later"), time.Hour))
	require.NoError(t, rt.BlockingQueue("j:delayed").Offer(ctx, []byte("now")))
	require.Eventually(t, func() bool {
		w, err := rt.FairLock("j:fair").Waiters(ctx)
		return err == nil && len(w) == 1
	}, 10*time.Second, 10*time.Millisecond, "the fair lock has a waiter")

	for kind, name := range map[string]string{
		"lock": "j:lock", "fair-lock": "j:fair", "read-write-lock": "j:rw", "semaphore": "j:sem",
		"count-down-latch": "j:latch", "permit-expirable-semaphore": "j:permits", "queue": "j:queue", "delayed-queue": "j:delayed",
	} {
		args := []string{"inspect", name}
		if kind == "count-down-latch" {
			args = []string{"inspect", "--kind", kind, name} // a latch's STRING reads as a semaphore unless told
		}
		v, out := cli(args...)
		obj, ok := v.(map[string]any)
		require.True(t, ok, out)
		assert.Equal(t, kind, obj["kind"], out)
		checkShape(t, kind, obj, cliJSONShapes[kind])
		if ttl, ok := obj["ttl_ms"].(float64); ok {
			assert.InDelta(t, 30000, ttl, 5000, "ttl_ms is milliseconds of the 30 s lease")
		}
	}
	v, out := cli("queue", "stats", "j:delayed")
	checkShape(t, "queue stats", v.(map[string]any), cliJSONShapes["delayed-queue"])
	assert.InDelta(t, time.Hour.Milliseconds(), v.(map[string]any)["next_due_in_ms"], 60_000, out)
	v, out = cli("list", "j:*")
	items, ok := v.([]any)
	require.True(t, ok, out)
	assert.Len(t, items, 8, out)
	for i, item := range items {
		checkShape(t, fmt.Sprintf("list[%d]", i), item.(map[string]any), cliJSONShapes["list[]"])
	}
}
