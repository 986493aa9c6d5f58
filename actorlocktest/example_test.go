package actorlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorlocktest"
)

// Your test gets a fresh redis-server and a runtime on it in one line; both
// are closed when the test ends, and the test fails if actorlock goroutines
// outlive the runtime. In a _test.go file that is
//
//	func TestReport(t *testing.T) {
//		rt := actorlocktest.Runtime(t)
//		...
//	}
//
// An example gets no *testing.T from go test, so this one runs the test's
// body with a stand-in (exampleT) that runs the cleanups at the end, as go
// test would.
func Example() {
	t := &exampleT{}
	defer t.finish()

	rt := actorlocktest.Runtime(t) // or RuntimeOn(t, srv.Client(t)) on a Redis(t) you can Kill, Pause, Restart
	ctx := context.Background()
	held, err := rt.Lock("report").Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	// The code under test would run here; a second caller must wait:
	_, err = rt.Lock("report").TryAcquire(ctx)
	fmt.Println("second caller refused:", errors.Is(err, actorlock.ErrNotAcquired))
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	// Output:
	// second caller refused: true
}

// exampleT stands in for the *testing.T go test gives a test: it keeps the
// cleanups the package registers, runs them in reverse at finish, and
// prints what would fail the test.
type exampleT struct {
	testing.TB // methods actorlocktest does not call: unused
	cleanups   []func()
}

func (t *exampleT) Helper()           {}
func (t *exampleT) Cleanup(fn func()) { t.cleanups = append(t.cleanups, fn) }
func (t *exampleT) Errorf(format string, a ...any) {
	fmt.Printf("FAIL: "+format+"\n", a...)
}
func (t *exampleT) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (t *exampleT) Skipf(format string, a ...any)  { panic(fmt.Sprintf("skip: "+format, a...)) }

func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
