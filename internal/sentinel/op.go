package sentinel

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Prefix starts the text of every error actorlock returns, once.
const Prefix = "actorlock: "

// OpError is an error of a public call, in actorlock's one shape:
//
//	actorlock: <op> "<name>": <cause>
//
// or, for a call on no name (New, Close, a MultiLock),
// "actorlock: <op>: <cause>". The cause stays matchable with errors.Is and
// errors.As through Unwrap.
type OpError struct {
	Op   string // what was called: "acquire", "unlock", "release permits"
	Name string // the object's name; "" for a call on no name
	Err  error  // the cause
}

// Op wraps err, a failure of op on name ("" for none), in an OpError; nil
// stays nil. An err that already is an OpError of the same name is returned
// as it is: the call that made it said what failed (the actors wrap their
// replies, the root its calls), and wrapping it again would repeat the
// prefix and the name.
func Op(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if oe, ok := err.(*OpError); ok && oe.Name == name && (name != "" || oe.Op == op) {
		return err
	}
	return &OpError{Op: op, Name: name, Err: err}
}

// Member names the member of a group (a MultiLock, a RedLock) whose call
// failed; wrapped in the group's OpError it reads
// `actorlock: acquire MultiLock: member "acct:2": lock not acquired`.
func Member(name string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) && oe.Name == name {
		// The member's own call named it already: keep its cause only,
		// the group's operation says what was called.
		err = &causeOf{err: err, text: Text(oe.Err)}
	}
	return &OpError{Op: "member", Name: name, Err: err}
}

// causeOf is err told by the text of its cause only.
type causeOf struct {
	err  error
	text string
}

func (c *causeOf) Error() string { return c.text }
func (c *causeOf) Unwrap() error { return c.err }

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString(Prefix)
	b.WriteString(e.Op)
	if e.Name != "" {
		b.WriteByte(' ')
		b.WriteString(Quote(e.Name))
	}
	b.WriteString(": ")
	cause := Text(e.Err)
	var named *namedError
	if e.Name != "" && errors.As(e.Err, &named) && named.name == e.Name {
		cause = strings.Replace(cause, Text(named), strings.TrimPrefix(named.unnamed(), Prefix), 1)
	}
	b.WriteString(cause)
	return b.String()
}

func (e *OpError) Unwrap() error { return e.Err }

// Text is err's text without actorlock's prefix at the start of each of its
// parts: a cause composed of sentinels ("lock not acquired: a read holder
// cannot take the write lock (upgrade)") reads once inside an OpError. A
// nested OpError loses its prefix the same way: inside a group's error a
// member's reads `member "a": lock not acquired`.
func Text(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, Prefix)
	s = strings.ReplaceAll(s, ": "+Prefix, ": ")
	return strings.ReplaceAll(s, "\n"+Prefix, "\n")
}

// Clean is err's text with actorlock's prefix once, at the start, for
// messages that carry an error's text without its type (the actor
// protocol's errors).
func Clean(err error) string {
	if errors.As(err, new(*OpError)) {
		return err.Error()
	}
	return Prefix + Text(err)
}

// List is the failures of several members told in one line, each without
// actorlock's prefix, "; " between them; nil ones are left out, and nil is
// returned when none is left. It does not unwrap to them: it tells why each
// member failed, while the error it is part of says what the group's call
// returns (a RedLock member's attempt timeout is not the caller's context
// ending).
func List(errs ...error) error {
	var parts []string
	for _, err := range errs {
		if err != nil {
			parts = append(parts, Text(err))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return listError(strings.Join(parts, "; "))
}

type listError string

func (e listError) Error() string { return string(e) }

// With is err, told more precisely by cause, both matchable with errors.Is
// and the prefix told once: With(ErrNotAcquired, ErrUpgrade) reads
// "actorlock: lock not acquired: a read holder cannot take the write lock
// (upgrade)".
func With(err, cause error) error { return &withError{err: err, cause: cause} }

type withError struct{ err, cause error }

func (w *withError) Error() string   { return w.err.Error() + ": " + Text(w.cause) }
func (w *withError) Unwrap() []error { return []error{w.err, w.cause} }

// Named is err about the object name, told by detail: alone it reads
// `<err>: "<name>" is a string` (for a caller that says no name itself, as
// the command line does), inside an OpError on the same name, which says the
// name already, `<err>: is a string`. A detail that starts with ": " follows
// the name directly (`"<name>": mode is "x"`).
func Named(err error, name, detail string) error {
	return &namedError{err: err, name: name, detail: detail}
}

type namedError struct {
	err          error
	name, detail string
}

func (e *namedError) Error() string {
	sep := " "
	if e.detail == "" || strings.HasPrefix(e.detail, ": ") {
		sep = ""
	}
	return e.err.Error() + ": " + Quote(e.name) + sep + e.detail
}

// maxQuoted is how much of a name an error shows: enough to recognise it,
// where a whole name (up to 64 KiB) would make every error and log line
// that long.
const maxQuoted = 100

// Quote is name quoted for an error's text; a name longer than 100 bytes is
// cut there (at a character's start) and its length told:
// "orders:aaaa…" (70000 bytes).
func Quote(name string) string {
	if len(name) <= maxQuoted {
		return strconv.Quote(name)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]+"…") + " (" + strconv.Itoa(len(name)) + " bytes)"
}

// unnamed is e's text without its name.
func (e *namedError) unnamed() string {
	if e.detail == "" {
		return e.err.Error()
	}
	return e.err.Error() + ": " + strings.TrimPrefix(e.detail, ": ")
}

func (e *namedError) Unwrap() error { return e.err }
