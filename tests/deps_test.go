package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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

// The quickstart links what docs/actors.md says, in modules and in bytes,
// so that the figure a newcomer reads is the one they get. The module
// count holds on every platform; the size is checked on the platform and Go
// release the document names (linux/amd64, go 1.26), within 3 %.
func TestQuickstartLinks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/actors.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`quickstart builds to\s+([0-9.]+) MB with (\d+) modules`).FindSubmatch(doc)
	require.NotNil(t, m, "docs/actors.md lost its figure")
	wantMB, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	wantModules, err := strconv.Atoi(string(m[2]))
	require.NoError(t, err)

	bin := buildProgram(t, readmeBlock(t, "<!-- quickstart"))
	out, err := exec.Command("go", "version", "-m", bin).Output()
	require.NoError(t, err)
	var modules []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "dep" {
			modules = append(modules, f[1])
		}
	}
	assert.Len(t, modules, wantModules, "modules linked: %v", modules)
	fi, err := os.Stat(bin)
	require.NoError(t, err)
	gotMB := float64(fi.Size()) / 1e6
	t.Logf("quickstart: %.2f MB, %d modules (%s %s/%s)", gotMB, len(modules), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && strings.HasPrefix(runtime.Version(), "go1.26") {
		assert.InEpsilon(t, wantMB, gotMB, 0.03, "binary size of %s", filepath.Base(bin))
	}
}
