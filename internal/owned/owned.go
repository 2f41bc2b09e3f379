// Package owned lets the client tell the bbolt journal that a record it
// hands to Create is its own: built for that one call, its Body a private
// copy already hashed into BodySHA. The journal then takes the digest as
// given and shares the body and header with the record it returns rather
// than copying them again. Records built anywhere else (by a user, for
// PrepareIn, or in a test) are never marked and are checked in full.
//
// The client also marks the lease's context it makes for one of its own
// Updates (journal.WithLease's): the journal then hands that Update's fn
// the stored body itself and the record back with its new encoding's body
// rather than a copy, the client's fns and drive never changing a record's
// Body.
//
// The mark goes through this package, not an exported method, so that the
// journal's public API keeps one contract for every caller.
package owned

// mark is package journal's marking function. It is set at journal's init,
// which happens before any code that could call Mark runs, and never again.
var mark func(any)

// Register sets the function that marks a record. Package journal calls it
// once, at init.
func Register(f func(any)) { mark = f }

// Mark marks rec (a *journal.Record) as built by the client for one Create,
// or a context journal.WithLease made for one of the client's Updates, if
// package journal registered a marker; otherwise it does nothing and rec
// is checked (or copied) in full.
func Mark(rec any) {
	if mark != nil {
		mark(rec)
	}
}
