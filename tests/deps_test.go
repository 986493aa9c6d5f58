package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A program that only locks must not link the network stack: gRPC and
// protoactor remote belong to package remoting (a lock-only program is
// half the size without them).
func TestRootPackageDoesNotLinkTheRemote(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "github.com/actorlock/actorlock")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/asynkron/protoactor-go/actor")
	for _, d := range deps {
		assert.False(t, strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "github.com/asynkron/protoactor-go/remote"),
			"the root package links %s", d)
	}
}

// The quickstart links what docs/production.md says ("Dependencies"), in
// modules and in bytes, and so does the go-redis-only program it is
// compared with, so that the figures a newcomer reads are the ones they
// get; every module the quickstart adds is named in its table of what pulls
// in what. The module counts hold on every platform; the sizes are checked
// on the platform and Go release the document names (linux/amd64, go
// 1.26), within 3 %.
func TestQuickstartLinks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/production.md")
	require.NoError(t, err)
	figure := func(re string) (int, float64) {
		m := regexp.MustCompile(re).FindSubmatch(doc)
		require.NotNil(t, m, "docs/production.md lost its figure %s", re)
		modules, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		mb, err := strconv.ParseFloat(string(m[2]), 64)
		require.NoError(t, err)
		return modules, mb
	}
	check := func(what, src string, wantModules int, wantMB float64) []string {
		bin := buildProgram(t, src)
		out, err := exec.Command("go", "version", "-m", bin).Output()
		require.NoError(t, err)
		var modules []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "dep" {
				modules = append(modules, f[1])
			}
		}
		assert.Len(t, modules, wantModules, "%s: modules linked: %v", what, modules)
		fi, err := os.Stat(bin)
		require.NoError(t, err)
		gotMB := float64(fi.Size()) / 1e6
		t.Logf("%s: %.2f MB, %d modules (%s %s/%s)", what, gotMB, len(modules), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && strings.HasPrefix(runtime.Version(), "go1.26") {
			assert.InEpsilon(t, wantMB, gotMB, 0.03, "%s: binary size of %s", what, filepath.Base(bin))
		}
		return modules
	}
	qsModules, qsMB := figure(`quickstart links \*\*(\d+) modules\s+and ([0-9.]+) MB\*\*`)
	grModules, grMB := figure(`go-redis alone \(below\) links \*\*(\d+)\s+modules and ([0-9.]+) MB\*\*`)
	quickstart := check("quickstart", readmeBlock(t, "<!-- quickstart"), qsModules, qsMB)
	goRedis := check("go-redis only", docBlock(t, "docs/production.md", "<!-- go-redis-only:"), grModules, grMB)
	table := string(doc[strings.Index(string(doc), "## Dependencies"):])
	for _, m := range quickstart {
		if slices.Contains(goRedis, m) {
			continue
		}
		short := strings.TrimPrefix(strings.TrimPrefix(m, "github.com/"), "go.opentelemetry.io/")
		assert.Contains(t, table, "`"+short+"`", "docs/production.md does not say what pulls in %s", m)
	}
}
