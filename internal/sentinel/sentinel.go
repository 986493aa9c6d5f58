// Package sentinel is the type of actorlock's sentinel errors. The root
// package declares them for its users, with their text, and the actors and
// internal/inspect declare the same constants to return them: constants of
// one type with one text are one value, so errors.Is matches across the
// packages, and nothing can reassign them.
package sentinel

// Error is a sentinel error: a constant whose text is its identity.
type Error string

func (e Error) Error() string { return string(e) }
