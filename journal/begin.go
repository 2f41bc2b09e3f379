package journal

import (
	"errors"
	"os"
	"runtime/debug"
	"sync/atomic"

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
//
// A call already inside bbolt when another's Begin panics is past that
// check: a read whose transaction was open waited for the meta lock to
// end it, the applier's commit for it to write its meta page (or for the
// map's lock to grow the file), for ever, and Close waited for the
// applier. So a read of the Store's looks again before it ends its
// transaction, and leaves it open if bbolt's locks are held (Store.held);
// and a commit, which takes long (its pages' writes and fdatasync), runs
// on a goroutine of its own (unlessHeld), which the applier stops waiting
// for once the Store stops using bbolt (Store.heldStop closes). Either
// call then fails with the Store's error.

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
			err = &heldLocks{withKind(ErrCorrupt, "%s, with its locks held", bboltPanicSeen(p))}
		}
	}()
	return db.Begin(writable)
}

// viewRecovered is db.View(fn), begun in begin, with what bbolt does on a
// damaged page turned into ErrCorrupt (readDamaged). If held is set once
// fn returns, the transaction is left open (ending it would wait for the
// locks for ever), and the error is a heldLocks.
func viewRecovered(db *bolt.DB, held *atomic.Bool, fn func(*bolt.Tx) error) error {
	tx, err := begin(db, false)
	if err != nil {
		return err
	}
	return readDamaged(func() (err error) {
		// A read: nothing to lose; and rolled back before readDamaged
		// recovers, as View does.
		defer func() {
			switch {
			case held == nil || !held.Load():
				_ = tx.Rollback()
			case err == nil:
				err = errHeldMeanwhile
			}
		}()
		return fn(tx)
	})
}

// errHeldMeanwhile is the error of a call that bbolt's locks, held by
// another call's panic, kept from ending: the Store's stopUsing gives the
// words to act on. errCommitLeft is a commit's: its goroutine is left
// using the file (see Store.Close).
var (
	errHeldMeanwhile error = &heldLocks{withKind(ErrCorrupt, "bbolt's locks were left held by a panic while this call was inside bbolt")}
	errCommitLeft    error = &heldLocks{withKind(ErrCorrupt, "bbolt's locks were left held by a panic while this commit was under way")}
)

// unlessHeld runs op, a call into bbolt that may wait for one of its
// locks, and reports whether it returned. With stop nil it runs op as any
// call (Open, before any other call can begin; Close's last commit, once
// every other call is done). Otherwise op runs on a goroutine of its own,
// and unlessHeld stops waiting for it once stop is closed: a bbolt panic
// left a lock held for good (heldLocks), and op may be waiting for it for
// ever. op is then left running, and the caller must not touch what op
// uses.
func unlessHeld(stop <-chan struct{}, op func()) bool {
	if stop == nil {
		op()
		return true
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	select {
	case <-done:
		return true
	case <-stop:
		select {
		case <-done: // both: op returned, and nothing waits for it
			return true
		default:
			return false
		}
	}
}

// closeFile closes a database whose locks a bbolt panic left held: bbolt's
// Close would wait for them for ever. The lock on the file is released
// first, since the memory map, which stays (bbolt alone could unmap it),
// keeps the open file alive after its descriptor is closed. With inUse
// (a commit left on its goroutine: errCommitLeft) the descriptor stays
// open: the commit may still be writing through it, or syncing it by its
// number, which a file opened next could reuse.
func closeFile(file *os.File, inUse bool) error {
	unlockFile(file)
	if inUse {
		return nil
	}
	return file.Close()
}

// closeOpened closes db, whose file is file, after err ended an Open:
// without bbolt's Close if err says bbolt's locks are held.
func closeOpened(db *bolt.DB, file *os.File, err error) {
	if locksHeld(err) {
		_ = closeFile(file, false)
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
		close(s.heldStop)
		s.kept.abandon()
	}
	return s.failure()
}
