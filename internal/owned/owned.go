// Package owned lets the client tell the bbolt journal that a record it
// hands to Create is its own: built for that one call, its Body a private
// copy already hashed into BodySHA. The journal then takes the digest as
// given and returns that very record, in stored form, rather than a copy
// of it. Records built anywhere else (by a user, for
// PrepareIn, or in a test) are never marked and are checked in full.
//
// The client also marks the lease's context it makes for one of its own
// Updates (journal.WithLease's): the journal then hands that Update's fn
// the stored body itself and the record back with its new encoding's body
// rather than a copy, the client's fns and drive never changing a record's
// Body. With the context it may name the record the client holds of the
// one that Update writes (Like): the journal then gives the record it
// decodes that record's strings and header map, where the stored bytes
// hold the same, rather than copies of them.
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

// like is package journal's function that names, for a context Mark
// marked, the client's copy of the record its Update writes. Set at
// journal's init, as mark is.
var like func(ctx, rec any)

// RegisterLike sets the function Like calls. Package journal calls it
// once, at init.
func RegisterLike(f func(ctx, rec any)) { like = f }

// Like tells the journal that rec (a *journal.Record) is the client's
// latest copy of the record the Update under ctx (a context Mark marked)
// writes. The journal compares rec's request strings and header with the
// stored bytes and, where they are the same, gives the record it decodes
// rec's own (strings are immutable; the client never changes a record's
// Header map, which the journal's rules keep the same for a record's
// life); where they differ it decodes its own, as without rec. The
// journal reads rec only while the Update runs, on whichever goroutine
// leads its commit: the client must not change rec until Update returns.
func Like(ctx, rec any) {
	if like != nil {
		like(ctx, rec)
	}
}
