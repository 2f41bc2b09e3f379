package journal

import (
	"errors"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
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

// heldLocks is the error of a bbolt panic that left bbolt's locks held:
// nothing may call bbolt on that database again. It matches ErrCorrupt.
type heldLocks struct{ err error }

func (e *heldLocks) Error() string { return e.err.Error() }
func (e *heldLocks) Unwrap() error { return e.err }

// locksHeld reports whether err is, or wraps, a heldLocks.
func locksHeld(err error) bool {
	var h *heldLocks
	return errors.As(err, &h)
}

// begin is db.Begin(writable), with a panic of bbolt's kinds (bboltPanic)
// turned into a heldLocks error.
func begin(db *bolt.DB, writable bool) (tx *bolt.Tx, err error) {
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

// viewRecovered is db.View(fn), begun in begin, with what bbolt does on a
// damaged page turned into ErrCorrupt (readDamaged).
func viewRecovered(db *bolt.DB, fn func(*bolt.Tx) error) error {
	tx, err := begin(db, false)
	if err != nil {
		return err
	}
	return readDamaged(func() error {
		// A read: nothing to lose; and rolled back before readDamaged
		// recovers, as View does.
		defer func() { _ = tx.Rollback() }()
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
		s.kept.abandon()
	}
	return s.failure()
}
