package journal

import (
	"errors"
	"os"
	"runtime/debug"
	"sync"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Every transaction of the journal's file begins in begin, and every read
// and write runs through viewRecovered and updateRecovered, which begin
// there: bbolt's Begin can panic in a way no later call survives.
//
// bbolt's Begin reads the newest valid meta page, and panics ("invalid
// meta pages") when neither is valid any more: both were checked when the
// file was mapped, and a disk fault or a stray write through another
// descriptor damaged them since (the map is shared, so the Store sees the
// file's bytes as they are now). It panics holding its locks: a read's
// meta and mmap locks, a write's writer lock (and a damaged free-page list
// panics in a write's Begin too, under the writer lock). Recovering the
// panic leaves them held: every later transaction, and bbolt's Close,
// waited for them for ever, and a payment process that hangs holds its
// callers for ever and never reaches Resume.
//
// So a panic in Begin is a heldLocks error, and a Store that meets one
// (Store.stopUsing) fails every call from then on without touching bbolt,
// and its Close closes the file without bbolt's Close.
//
// That stops the calls that begin later, not the ones already in bbolt: a
// read that found the Store usable a moment before the panic, queued on
// the meta lock in Begin or in its Rollback (which takes the lock to end
// the transaction), waited for ever. So a Store's Begins and read
// Rollbacks pass through its gate, which admits one at a time, and which
// a heldLocks shuts before the next is admitted: a call queued there is
// told the error, and none waits on a lock of bbolt's that no one will
// release.
//
// A Rollback must not queue on the gate, though: a read's Begin waits in
// it, holding it, for the mmap lock while a write's commit remaps the
// file it grew, and the remap waits for every open read to end. bbolt's
// Rollback lets go of the mmap lock before it takes the meta lock so that
// it never waits for such a Begin; a Rollback queued on the gate did, and
// the Begin, the remap (under the applier's mutex) and every later call
// waited for ever. So a Rollback that finds the gate taken is left to a
// goroutine of its own, outside the gate, and its caller goes on: it ends
// once the Begin in the gate has, or, if that Begin panics, waits for
// ever on the meta lock where nothing waits for it.

// heldLocks is the error of a bbolt panic that left bbolt's locks held:
// nothing may call bbolt on that database again. It matches ErrCorrupt.
type heldLocks struct{ err error }

func (e *heldLocks) Error() string { return e.err.Error() }
func (e *heldLocks) Unwrap() error { return e.err }

// locksHeld reports whether err is, or wraps, a heldLocks.
func locksHeld(err error) bool {
	if err == nil {
		return false // As allocates its target: stopUsing asks of every call's error, nil mostly
	}
	var h *heldLocks
	return errors.As(err, &h)
}

// gate admits a Store's calls into the parts of bbolt that take its meta
// lock, one at a time, until a panic leaves bbolt's locks held (see
// above). A read pays one uncontended lock more at each end. A write's
// Begin takes bbolt's writer lock in the gate, which never waits there:
// the Store's writes are one at a time already (the applier's mutex). A
// nil gate, for a db that one goroutine uses (Open's, Compact's,
// Inspect's), admits every call.
//
// The meta lock's other taker, a write's Commit writing its meta page,
// cannot pass through it without holding it for the whole commit.
type gate struct {
	mu     sync.Mutex
	held   error // the heldLocks that shut it: nothing enters bbolt
	closed bool  // Close closes the db: no Begin enters, Rollbacks do
}

// shut shuts g with err, a heldLocks, unless it is shut already.
func (g *gate) shut(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = err
	}
}

// closeBegins admits no Begin from now on, so that no panic can leave
// bbolt's locks held for its Close to wait on, and returns the heldLocks
// that shut g, if one did.
func (g *gate) closeBegins() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return g.held
}

// begin is db.Begin(writable), through the gate g, with a panic of
// bbolt's kinds (bboltPanic) turned into a heldLocks error, which shuts g.
func begin(g *gate, db *bolt.DB, writable bool) (*bolt.Tx, error) {
	if g == nil {
		return beginOnce(db, writable)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.held != nil:
		return nil, g.held
	case g.closed:
		return nil, berrors.ErrDatabaseNotOpen // as bbolt's Begin after Close
	}
	tx, err := beginOnce(db, writable)
	if locksHeld(err) {
		g.held = err
	}
	return tx, err
}

// endRead rolls back tx, a read begun through the gate g; unless a panic
// shut g, when the Rollback would wait for ever for the meta lock (and
// nothing waits for tx to end: bbolt's Close is not called). When g is
// taken, by a Begin that may be waiting for a remap that waits for tx
// (see above), the Rollback goes on in a goroutine, outside g.
func endRead(g *gate, tx *bolt.Tx) {
	if g == nil {
		_ = tx.Rollback()
		return
	}
	if !g.mu.TryLock() {
		go func() { _ = tx.Rollback() }()
		return
	}
	defer g.mu.Unlock()
	if g.held == nil {
		_ = tx.Rollback()
	}
}

// beginOnce is db.Begin(writable), with a panic of bbolt's kinds
// (bboltPanic) turned into a heldLocks error.
func beginOnce(db *bolt.DB, writable bool) (tx *bolt.Tx, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if !bboltPanic(p) {
				panic(p)
			}
			err = &heldLocks{withKind(ErrCorrupt, "%s, with its locks held", panicSeen(p, panicSite()))}
		}
	}()
	return db.Begin(writable)
}

// viewRecovered is db.View(fn), begun and ended through the gate g, with
// what bbolt does on a damaged page turned into ErrCorrupt (readDamaged).
func viewRecovered(g *gate, db *bolt.DB, fn func(*bolt.Tx) error) error {
	tx, err := begin(g, db, false)
	if err != nil {
		return err
	}
	return readDamaged(func() error {
		// A read: nothing to lose; and rolled back before readDamaged
		// recovers, as View does.
		defer endRead(g, tx)
		return fn(tx)
	})
}

// closeFile closes a database whose locks a bbolt panic left held: bbolt's
// Close would wait for them for ever. The lock on the file is released
// first, since the memory map, which stays (bbolt alone could unmap it),
// keeps the open file alive after its descriptor is closed.
func closeFile(file *os.File) error {
	unlockFile(file)
	return file.Close()
}

// closeOpened closes db, whose file is file, after err ended an Open:
// without bbolt's Close if err says bbolt's locks are held.
func closeOpened(db *bolt.DB, file *os.File, err error) {
	if locksHeld(err) {
		_ = closeFile(file)
		return
	}
	_ = db.Close()
}

// stopUsing returns err, unless err says bbolt's locks are held
// (heldLocks): then the Store stops using bbolt for good, every later call
// fails with the error returned (Store.failure), and Close closes the file
// without bbolt's Close.
func (s *Store) stopUsing(err error) error {
	if !locksHeld(err) {
		return err
	}
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if !s.held.Load() {
		var ferr error = &heldLocks{withKind(ErrCorrupt, "the journal file %s: %w; nothing more is read from the file or written to it, "+
			"and Close leaves it as it is: stop the process, keep a copy of the journal and its log segments, and run idem check: "+
			"restore the journal if it finds damage, report this message if it finds none", s.path, err)}
		if prev := s.failure(); prev != nil {
			ferr = &heldLocks{errorf("%w; and then %w", prev, ferr)}
		}
		s.failed.Store(&ferr)
		s.held.Store(true)
		s.gate.shut(ferr)
		s.kept.abandon()
	}
	return s.failure()
}
