package actorlock_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/internal/apidecl"
	"github.com/actorlock/actorlock/observe"
	"github.com/actorlock/actorlock/primitive"
)

// Issue 32 item 2: no exported method panics on a nil or zero receiver.
// Each returns an error wrapping ErrInvalidArgument, or is a documented
// no-op: zero values, a hold that has ended (Done closed, Err
// ErrInvalidArgument), a handle that refuses every call; a nil Locker's
// Lock blocks for good, as after Close. The methods are read from the
// types by reflection and the types from the packages' sources, so a
// method or type added later without an entry here fails the test. It
// lives here, not in tests/, whose goroutine leak check would flag the
// blocked Lock.
func TestNilAndZeroReceiversNeverPanic(t *testing.T) {
	// Pointer receivers are called nil and zero; value receivers zero.
	types := []reflect.Type{
		reflect.TypeFor[*actorlock.Runtime](),
		reflect.TypeFor[*actorlock.Lock](),
		reflect.TypeFor[*actorlock.Held](),
		reflect.TypeFor[*actorlock.ReadWriteLock](),
		reflect.TypeFor[*actorlock.Group](),
		reflect.TypeFor[*actorlock.GroupHeld](),
		reflect.TypeFor[*actorlock.Locker](),
		reflect.TypeFor[*primitive.Semaphore](),
		reflect.TypeFor[*primitive.PermitExpirableSemaphore](),
		reflect.TypeFor[*primitive.CountDownLatch](),
		reflect.TypeFor[*primitive.DelayedQueue](),
		reflect.TypeFor[*primitive.BlockingQueue](),
		reflect.TypeFor[*actorkit.Keep](),
		reflect.TypeFor[*actorkit.Unkeep](),
		reflect.TypeFor[observe.LockInfo](),
		reflect.TypeFor[observe.EventKind](),
	}
	zero := func(t *testing.T, out []reflect.Value) {
		for _, v := range out {
			assert.True(t, v.IsZero(), "%v is not zero", v)
		}
	}
	ended := func(t *testing.T, out []reflect.Value) {
		switch x := out[0].Interface().(type) {
		case context.Context:
			assert.ErrorIs(t, context.Cause(x), actorlock.ErrInvalidArgument, "an ended hold's context")
		case <-chan struct{}:
			select {
			case <-x:
			default:
				t.Error("Done is not closed")
			}
		}
	}
	refuses := func(t *testing.T, out []reflect.Value) { assertRefuses(t, out[0]) }
	anything := func(*testing.T, []reflect.Value) {}
	noOps := map[string]func(*testing.T, []reflect.Value){
		"Runtime.ID": zero, "Runtime.Held": zero,
		"Runtime.Lock": refuses, "Runtime.FairLock": refuses, "Runtime.ReadWriteLock": refuses,
		"Runtime.Semaphore": refuses, "Runtime.PermitExpirableSemaphore": refuses, "Runtime.CountDownLatch": refuses,
		"Runtime.DelayedQueue": refuses, "Runtime.BlockingQueue": refuses,
		"Lock.Name": zero, "Lock.Owner": zero,
		"Held.Name": zero, "Held.Owner": zero, "Held.Token": zero, "Held.Lease": zero, "Held.ValidUntil": zero,
		"Held.Done": ended, "Held.Context": ended,
		"GroupHeld.Members": anything, "GroupHeld.Done": ended, "GroupHeld.Context": ended,
		"ReadWriteLock.Name": zero, "ReadWriteLock.ReadLocker": refuses, "ReadWriteLock.WriteLocker": refuses,
		"Locker.Context": zero, "Locker.Unlock": zero,
		"Semaphore.Name": zero, "PermitExpirableSemaphore.Name": zero, "CountDownLatch.Name": zero,
		"DelayedQueue.Name": zero, "BlockingQueue.Name": zero,
		"Keep.LogValue": anything, "Unkeep.LogValue": anything,
		"LockInfo.Locked": zero, "EventKind.String": anything,
	}
	blocks := map[string]bool{"Locker.Lock": true}
	seen := map[string]bool{}
	for _, typ := range types {
		recvs := map[string]reflect.Value{}
		if typ.Kind() == reflect.Pointer {
			recvs["nil"] = reflect.Zero(typ)
			recvs["zero"] = reflect.New(typ.Elem())
		} else {
			recvs["zero"] = reflect.Zero(typ)
		}
		name := strings.TrimPrefix(typ.String(), "*")
		name = name[strings.IndexByte(name, '.')+1:]
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			key := name + "." + m.Name
			seen[key] = true
			for which, recv := range recvs {
				t.Run(key+"/"+which, func(t *testing.T) {
					fn := recv.Method(i)
					args := argsFor(t, fn.Type())
					if blocks[key] {
						returned := make(chan struct{})
						go func() { fn.Call(args); close(returned) }()
						select {
						case <-returned:
							t.Error("returned: it must block for good (never return unprotected)")
						case <-time.After(100 * time.Millisecond):
						}
						return
					}
					var out []reflect.Value
					require.NotPanics(t, func() { out = fn.Call(args) })
					if check, ok := noOps[key]; ok {
						check(t, out)
						return
					}
					require.NotEmpty(t, out, "a method with no result must be listed as a no-op")
					last := out[len(out)-1]
					require.True(t, last.Type() == reflect.TypeFor[error](), "a method without an error must be listed as a no-op")
					err, _ := last.Interface().(error)
					assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
				})
			}
		}
	}
	for key := range noOps {
		assert.True(t, seen[key], "noOps lists %s, which no type has", key)
	}
	assert.Equal(t, typesWithMethods(t), typeNames(types), "every exported type with methods is in the table")
}

// assertRefuses checks that h, a handle a nil Runtime made, refuses its
// calls with ErrInvalidArgument: its first method taking only a context
// and returning an error (a ReadWriteLock: its read locker's).
func assertRefuses(t *testing.T, h reflect.Value) {
	t.Helper()
	if rw, ok := h.Interface().(*actorlock.ReadWriteLock); ok {
		h = reflect.ValueOf(rw.ReadLocker())
	}
	ctxType := reflect.TypeFor[context.Context]()
	for i := range h.NumMethod() {
		ft := h.Method(i).Type()
		if ft.NumIn() == 1 && ft.In(0) == ctxType && ft.NumOut() > 0 && ft.Out(ft.NumOut()-1) == reflect.TypeFor[error]() {
			out := h.Method(i).Call([]reflect.Value{reflect.ValueOf(context.Background())})
			err, _ := out[len(out)-1].Interface().(error)
			assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "%s.%s", h.Type(), h.Type().Method(i).Name)
			return
		}
	}
	t.Errorf("%s has no method to try", h.Type())
}

// argsFor makes arguments for a method of type ft: plausible values, none
// for a variadic parameter.
func argsFor(t *testing.T, ft reflect.Type) []reflect.Value {
	n := ft.NumIn()
	if ft.IsVariadic() {
		n--
	}
	args := make([]reflect.Value, n)
	for i := range n {
		in := ft.In(i)
		switch {
		case in == reflect.TypeFor[context.Context]():
			args[i] = reflect.ValueOf(context.Background())
		case in == reflect.TypeFor[time.Duration]():
			args[i] = reflect.ValueOf(time.Second)
		case in.Kind() == reflect.String:
			args[i] = reflect.ValueOf("0123456789abcdef0123456789abcdef").Convert(in)
		case in.Kind() == reflect.Int || in.Kind() == reflect.Int64:
			args[i] = reflect.ValueOf(int64(1)).Convert(in)
		case in == reflect.TypeFor[[]byte]():
			args[i] = reflect.ValueOf([]byte("x"))
		case in.Kind() == reflect.Func:
			args[i] = reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, in.NumOut())
				for j := range out {
					out[j] = reflect.Zero(in.Out(j))
				}
				return out
			})
		default:
			t.Fatalf("no argument of type %s: add it to argsFor", in)
		}
	}
	return args
}

func typeNames(types []reflect.Type) []string {
	var out []string
	for _, typ := range types {
		out = append(out, strings.TrimPrefix(typ.String(), "*"))
	}
	sort.Strings(out)
	return out
}

// typesWithMethods lists, from the sources, the exported types that have
// exported methods in the packages users see.
func typesWithMethods(t *testing.T) []string {
	t.Helper()
	var out []string
	for dir, pkg := range map[string]string{".": "actorlock", "primitive": "primitive", "actorkit": "actorkit", "observe": "observe"} {
		decls, err := apidecl.Exported(dir)
		require.NoError(t, err)
		for _, typ := range decls.TypesWithMethods() {
			out = append(out, pkg+"."+typ)
		}
	}
	sort.Strings(out)
	return out
}
