package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// now is CLOCK_MONOTONIC in ns: one clock for every process on the machine,
// so events of the workers and the faults of the parent compare directly,
// and no wall-clock step can reorder them.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot fail on Linux
	}
	return ts.Nano()
}

// never stands for "no return observed": the operation may take effect at
// any time after its call.
const never = math.MaxInt64

// event is one line of a worker's history. Kinds, each by one client
// (a goroutine of a worker process) in this order per critical section:
// acq (Acquire called), got (granted, Tok) or nogot (Err), rd/rdr (fenced
// read of the resource: Ok, Val), wr/wrr (fenced write of Val), unl/unlr
// (Unlock called/returned, Err), lost (Done closed with ErrLost, from a
// watcher goroutine), stop/cont (the worker stops itself between the read
// and the write, and runs again).
type event struct {
	K    string `json:"k"`
	C    int    `json:"c"`           // client id, unique in the run
	P    int    `json:"p"`           // worker process id, unique in the run
	T    int64  `json:"t"`           // CLOCK_MONOTONIC ns
	N    string `json:"n,omitempty"` // lock name
	Tok  int64  `json:"tok,omitempty"`
	Val  int64  `json:"v,omitempty"`
	Ok   bool   `json:"ok,omitempty"`
	Err  string `json:"err,omitempty"`
	Wait int64  `json:"w,omitempty"` // wait time of an acq, ns
}

// eventLog appends events to a file, one write(2) per event, so that a
// SIGKILL loses at most the event being written.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*eventLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &eventLog{f: f}, nil
}

func (l *eventLog) emit(e event) {
	b, _ := json.Marshal(e)
	b = append(b, '\n')
	l.mu.Lock()
	_, _ = l.f.Write(b)
	l.mu.Unlock()
}

func (l *eventLog) close() { _ = l.f.Close() }

// readLog reads a worker's events; a torn last line (SIGKILL) is dropped.
func readLog(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}
