package tests

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoFiles lists the repository's files whose names end in ext, as paths
// from the module's root, skipping hidden directories and the temporary
// ones tests create (leading "_").
func repoFiles(t *testing.T, ext string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ext) {
			rel, err := filepath.Rel("..", path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading  = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence      = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	// A document named in a Go comment: a path ending in .md, maybe with
	// an anchor, maybe followed by the quoted title of a section.
	goDocRef = regexp.MustCompile(`([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)(#[A-Za-z0-9_-]+)?(?:,? "([^"]+)")?`)
)

// markdownDoc is a document's headings, as GitHub renders them.
type markdownDoc struct {
	titles  []string
	anchors map[string]bool
}

func readMarkdown(t *testing.T, path string) markdownDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	require.NoError(t, err)
	doc := markdownDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	for _, m := range mdHeading.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
		doc.titles = append(doc.titles, strings.ReplaceAll(m[1], "`", ""))
		slug := headingSlug(m[1])
		if n := seen[slug]; n > 0 {
			doc.anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			doc.anchors[slug] = true
		}
		seen[slug]++
	}
	return doc
}

// headingSlug is GitHub's anchor for a heading: lower case, punctuation
// other than '-' and '_' dropped, spaces made '-'.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link of every Markdown file in the repository leads to a
// file that exists, and its anchor, if any, to a heading of that file.
func TestDocumentLinksResolve(t *testing.T) {
	t.Parallel()
	docs := map[string]markdownDoc{}
	doc := func(path string) markdownDoc {
		d, ok := docs[path]
		if !ok {
			d = readMarkdown(t, path)
			docs[path] = d
		}
		return d
	}
	files := repoFiles(t, ".md")
	require.Contains(t, files, "README.md")
	require.Contains(t, files, "docs/design.md")
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join("..", file))
		require.NoError(t, err)
		text := inlineCode.ReplaceAllString(fence.ReplaceAllString(string(b), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, anchor, _ := strings.Cut(target, "#")
			if path == "" {
				path = file
			} else {
				path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
			}
			if !assert.FileExists(t, filepath.Join("..", path), "%s links to %s, which does not exist", file, target) {
				continue
			}
			if anchor != "" {
				assert.True(t, strings.HasSuffix(path, ".md") && doc(path).anchors[anchor],
					"%s links to %s: %s has no heading with anchor #%s", file, target, path, anchor)
			}
		}
	}
	assert.Greater(t, links, 50, "the front page links its documents")
}

// Every document a Go comment or string names (docs/design.md,
// README.md#quickstart, docs/security.md "ACL") exists, from the module's root
// or from the Go file's directory, with the anchor or the section named.
func TestDocumentsNamedInGoExist(t *testing.T) {
	t.Parallel()
	refs := 0
	for _, file := range repoFiles(t, ".go") {
		b, err := os.ReadFile(filepath.Join("..", file))
		require.NoError(t, err)
		for _, m := range goDocRef.FindAllStringSubmatch(string(b), -1) {
			refs++
			path := ""
			for _, candidate := range []string{m[1], filepath.Join(filepath.Dir(file), m[1])} {
				candidate = filepath.ToSlash(filepath.Clean(candidate))
				if _, err := os.Stat(filepath.Join("..", candidate)); err == nil {
					path = candidate
					break
				}
			}
			if !assert.NotEmpty(t, path, "%s names %s, which does not exist", file, m[1]) {
				continue
			}
			d := readMarkdown(t, path)
			if anchor := strings.TrimPrefix(m[2], "#"); anchor != "" {
				assert.True(t, d.anchors[anchor], "%s names %s%s: no such heading", file, m[1], m[2])
			}
			if section := m[3]; section != "" {
				found := false
				for _, title := range d.titles {
					found = found || strings.Contains(strings.ToLower(title), strings.ToLower(section))
				}
				assert.True(t, found, "%s names section %q of %s: no heading has it", file, section, path)
			}
		}
	}
	assert.Greater(t, refs, 10)
}

// go doc shows what the root package's errors say and what the constants
// (package primitive's) are worth, not the machinery they come from (issue 26).
func TestGoDocShowsErrorTextsAndConstantValues(t *testing.T) {
	t.Parallel()
	var doc string
	for _, pkg := range []string{"github.com/actorlock/actorlock", "github.com/actorlock/actorlock/primitive"} {
		cmd := exec.Command("go", "doc", "-all", pkg)
		cmd.Dir = ".."
		out, err := cmd.Output()
		require.NoError(t, err)
		doc += string(out)
	}
	for _, want := range []string{
		`ErrNotAcquired\s+error = sentinelError\("actorlock: lock not acquired"\)`,
		`ErrLost\s+error = sentinelError\("actorlock: lock lost"\)`,
		`var ErrPermitExpired error = sentinelError\("actorlock: permit expired"\)`,
		`var ErrWrongKind error = sentinelError\("actorlock: the name holds another kind of object"\)`,
		`const MaxPermitsPerCall = 1000`,
	} {
		assert.Regexp(t, want, doc)
	}
	assert.NotRegexp(t, `(?m)^\s*(var|const)?\s*\w+\s*(\w+\s*)?= (actors|inspect|scripts)\.`, doc,
		"a declaration go doc shows refers to the machinery")
}

// ./dev.sh demo says, before go run builds anything, that the first build
// takes minutes: a newcomer would otherwise watch a silent terminal.
func TestDevShDemoSaysTheFirstBuildIsSlow(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	cmd := exec.CommandContext(ctx, "./dev.sh", "demo", "--help")
	cmd.Dir = ".."
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	first, _, _ := strings.Cut(stderr.String(), "\n")
	assert.Contains(t, first, "the first build downloads and compiles the dependencies and takes a few minutes")
	assert.Contains(t, stderr.String(), "Usage: demo", "then the demo's own help")
}

// Every cookbook entry of the README names Example functions that exist and
// run under go test (they have an Output comment), in the root package or,
// qualified, in the package named.
func TestCookbookExamplesExistAndRun(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	s := string(readme)
	start := strings.Index(s, "## Cookbook")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(s[start+1:], "\n## ")
	require.Greater(t, end, 0)
	cookbook := s[start : start+1+end]
	entries := regexp.MustCompile(`(?m)^\*\*(.+?)\*\* \(([^)]*)\)`).FindAllStringSubmatch(cookbook, -1)
	require.GreaterOrEqual(t, len(entries), 11, "the cookbook's entries")
	name := regexp.MustCompile("`((?:\\w+\\.)?Example\\w*)`")
	for _, e := range entries {
		refs := name.FindAllStringSubmatch(e[2], -1)
		assert.NotEmpty(t, refs, "cookbook entry %q names no example", e[1])
		for _, r := range refs {
			dir, fn := "..", r[1]
			if pkg, f, ok := strings.Cut(r[1], "."); ok {
				dir, fn = filepath.Join("..", pkg), f
			}
			files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
			require.NoError(t, err)
			found := false
			for _, f := range files {
				src, err := os.ReadFile(f)
				require.NoError(t, err)
				body := regexp.MustCompile(`(?s)\nfunc ` + regexp.QuoteMeta(fn) + `\(\) \{\n(.*?)\n\}\n`).FindSubmatch(src)
				if body != nil {
					found = true
					assert.Contains(t, string(body[1]), "// Output:", "%s runs under go test only with an Output comment", r[1])
				}
			}
			assert.True(t, found, "cookbook entry %q: no %s in %s", e[1], fn, dir)
		}
	}
}

// A promise in the docs names the test behind it: every test a document
// names exists, so a renamed or removed test cannot leave a promise
// backed by nothing.
func TestTestsNamedInDocsExist(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+|Example\w*|Fuzz\w+)\(`)
	for _, file := range repoFiles(t, "_test.go") {
		b, err := os.ReadFile(filepath.Join("..", file))
		require.NoError(t, err)
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
	}
	named := regexp.MustCompile("`(Test[A-Z]\\w*)(?:/[^`]*)?`")
	refs := 0
	for _, file := range repoFiles(t, ".md") {
		b, err := os.ReadFile(filepath.Join("..", file))
		require.NoError(t, err)
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			refs++
			assert.True(t, defined[m[1]], "%s names %s, which no test file defines", file, m[1])
		}
	}
	assert.Greater(t, refs, 50, "the docs name the tests behind their promises")
}
