package tests

import (
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

// readmeBlock returns the first ```go block after marker in README.md.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	return docBlock(t, "README.md", marker)
}

// docBlock returns the first ```go block after marker in the repository's
// file doc (a path from the module's root).
func docBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", doc))
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, marker)
	require.GreaterOrEqual(t, i, 0, "%s lost its %q marker", doc, marker)
	s = s[i:]
	start := strings.Index(s, "```go\n")
	require.GreaterOrEqual(t, start, 0)
	s = s[start+len("```go\n"):]
	end := strings.Index(s, "\n```")
	require.GreaterOrEqual(t, end, 0)
	return s[:end+1]
}

// buildProgram builds src as a main package of this module (so it uses this
// checkout of actorlock) and returns the binary's path.
func buildProgram(t *testing.T, src string) string {
	t.Helper()
	// Inside the module, in a directory "./..." patterns skip (leading _).
	dir, err := os.MkdirTemp("..", "_readme")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	bin := filepath.Join(t.TempDir(), "prog")
	cmd := exec.Command("go", "build", "-o", bin, "./"+filepath.Base(dir))
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the documentation's code does not build:\n%s\n%s", out, src)
	return bin
}

// TestReadmeQuickstart builds the README's quickstart as it stands and runs it
// against a real Redis, twice: each run takes and releases the lock and
// writes with a fencing token greater than the previous run's. The second
// run is in FIPS 140-only mode (GODEBUG=fips140=only), where Go's SHA-1
// panics: a program importing actorlock must start and lock there too.
func TestReadmeQuickstart(t *testing.T) {
	bin := buildProgram(t, readmeBlock(t, "<!-- quickstart"))
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 60*time.Second)

	var fences []int64
	for _, godebug := range []string{"", "fips140=only"} {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "REDIS_URL=redis://"+srv.Addr, "GODEBUG="+godebug)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "GODEBUG=%s: %s", godebug, out)
		assert.Equal(t, "written: true <nil>\n", string(out), "GODEBUG=%s", godebug)

		order, err := rdb.HGetAll(ctx, "order:42").Result()
		require.NoError(t, err)
		assert.Equal(t, "paid", order["state"])
		fence, err := strconv.ParseInt(order["fence"], 10, 64)
		require.NoError(t, err)
		fences = append(fences, fence)
		n, err := rdb.Exists(ctx, "orders:42").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "the quickstart left its lock held")
	}
	assert.Greater(t, fences[1], fences[0], "the second run's token must exceed the first's")
}

// TestReadmeAPI builds "The API in 20 lines" (docs/api.md) as the body of
// the function it says it is.
func TestReadmeAPI(t *testing.T) {
	src := `package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

func api(ctx context.Context, id string, work func(context.Context, int64) error) error {
` + docBlock(t, "docs/api.md", "<!-- api:") + `}

func main() { _ = api }
`
	buildProgram(t, src)
}

// TestReadmeLockWithATimeout builds the cookbook's "Lock with a timeout" as
// the body of a function that returns an error: it must return on every
// error before it defers the Unlock (it once fell through to it).
func TestReadmeLockWithATimeout(t *testing.T) {
	src := `package main

import (
	"context"
	"errors"
	"time"

	"github.com/actorlock/actorlock"
)

func withTimeout(ctx context.Context, rt *actorlock.Runtime) error {
` + readmeBlock(t, "<!-- timeout:") + `	return nil
}

func main() { _ = withTimeout }
`
	buildProgram(t, src)
}
