package tests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemo builds cmd/demo and runs it as a user would: under the lock its
// verdict passes; with --unsafe (no lock) the same checks must catch the lost
// updates; a Ctrl-C stops it early, still with a verdict. The runs overlap.
func TestDemo(t *testing.T) {
	bin := buildDemo(t)

	t.Run("PassesUnderTheLock", func(t *testing.T) {
		t.Parallel()
		res := runDemo(t, bin, "--duration", "3s")
		require.Equal(t, 0, res.code, res)
		assert.Empty(t, res.stderr, "the demo is quiet apart from its own output")
		assert.Contains(t, res.stdout, "acquisitions", "progress lines")
		v := parseVerdict(t, res.stdout)
		assert.Greater(t, v.recorded, int64(1000), "3 s of contention make many critical sections")
		assert.Equal(t, v.recorded, v.inRedis)
		assert.Zero(t, v.overlaps)
		assert.Zero(t, v.inversions)
		assert.Contains(t, res.stdout, "by 12 owners in 3 processes")
		for _, check := range []string{"counter in Redis = its recorded acquisitions", "no overlapping critical sections", "fencing tokens strictly increase"} {
			assert.Regexp(t, regexp.MustCompile(`(?m)^check: .*`+check+`.*\sPASS\s`), res.stdout)
		}
		assert.Contains(t, res.stdout, "VERDICT: PASS")
		assertRedisStopped(t, res.stdout)
	})

	t.Run("UnsafeLosesUpdatesAndFails", func(t *testing.T) {
		t.Parallel()
		srv := startRedis(t)
		res := runDemo(t, bin, "--redis", srv.Addr, "--unsafe", "--duration", "2s")
		require.Equal(t, 1, res.code, res)
		assert.Contains(t, res.stdout, "VERDICT: FAIL")
		v := parseVerdict(t, res.stdout)
		assert.Greater(t, v.recorded, v.inRedis, "updates were lost")
		assert.Positive(t, v.overlaps)
		// The demo's numbers are Redis's own, not made up.
		assert.Equal(t, v.inRedis, sumCounters(t, srv.Addr))
	})

	t.Run("CtrlCStopsWithAVerdict", func(t *testing.T) {
		t.Parallel()
		res := interruptDemo(t, bin, 1500*time.Millisecond, "--duration", "60s")
		require.Equal(t, 0, res.code, res)
		assert.Empty(t, res.stderr)
		v := parseVerdict(t, res.stdout)
		assert.Positive(t, v.recorded)
		assert.Equal(t, v.recorded, v.inRedis)
		assert.Contains(t, res.stdout, "VERDICT: PASS")
		assertRedisStopped(t, res.stdout)
	})
}

func buildDemo(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the demo with")
	}
	bin := filepath.Join(t.TempDir(), "demo")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/actorlock/actorlock/cmd/demo").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

type demoResult struct {
	code           int
	stdout, stderr string
}

func runDemo(t *testing.T, bin string, args ...string) demoResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return demoResult{code: exitCode(t, cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
}

// interruptDemo starts the demo in a process group of its own and, once it
// has run for after, sends SIGINT to the whole group, as a terminal's Ctrl-C
// does: the workers get it too.
func interruptDemo(t *testing.T, bin string, after time.Duration, args ...string) demoResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout lockedBuffer
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "actorlock demo:") },
		10*time.Second, 10*time.Millisecond, "the demo did not start")
	time.Sleep(after)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		return demoResult{code: exitCode(t, err), stdout: stdout.String(), stderr: stderr.String()}
	case <-time.After(10 * time.Second):
		t.Fatalf("the demo did not stop within 10s of Ctrl-C; output:\n%s", stdout.String())
		return demoResult{}
	}
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// demoVerdict is the "total" row of the verdict table.
type demoVerdict struct {
	inRedis, recorded, overlaps, inversions int64
}

var totalRow = regexp.MustCompile(`(?m)^total\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)

func parseVerdict(t *testing.T, stdout string) demoVerdict {
	t.Helper()
	m := totalRow.FindStringSubmatch(stdout)
	require.NotNil(t, m, "no verdict table in:\n%s", stdout)
	n := make([]int64, 4)
	for i := range n {
		var err error
		n[i], err = strconv.ParseInt(m[i+1], 10, 64)
		require.NoError(t, err)
	}
	return demoVerdict{inRedis: n[0], recorded: n[1], overlaps: n[2], inversions: n[3]}
}

// sumCounters adds up the demo's counters, straight from Redis.
func sumCounters(t *testing.T, addr string) int64 {
	t.Helper()
	rdb := client(t, addr)
	keys, err := rdb.Keys(context.Background(), "actorlock-demo:account:*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	var sum int64
	for _, k := range keys {
		n, err := rdb.Get(context.Background(), k).Int64()
		require.NoError(t, err)
		sum += n
	}
	return sum
}

var ownRedisAddr = regexp.MustCompile(`redis (127\.0\.0\.1:\d+) \(own redis-server\)`)

// assertRedisStopped checks that the redis-server the demo started is gone.
func assertRedisStopped(t *testing.T, stdout string) {
	t.Helper()
	m := ownRedisAddr.FindStringSubmatch(stdout)
	require.NotNil(t, m, "no address of the demo's own redis-server in:\n%s", stdout)
	c, err := net.DialTimeout("tcp", m[1], time.Second)
	if err == nil {
		_ = c.Close()
	}
	assert.Error(t, err, "redis-server %s still runs after the demo", m[1])
}

// lockedBuffer is a bytes.Buffer that the test may read while the process
// writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
