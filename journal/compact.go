package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// compactTxSize bounds one transaction of Compact's copy, so that a large
// journal is copied in pieces rather than held in memory at once.
const compactTxSize = 64 << 20

// CompactStats says what Compact did.
type CompactStats struct {
	Before, After int64 // file sizes in bytes
}

// Check verifies the journal at path without changing it: bbolt's page-level
// consistency check, then the journal's own (every record decodes, and each
// index holds exactly the records that belong in it). It takes the lock in
// read-only mode, so the application must be stopped. Its cost grows with
// the journal's size.
func Check(path string, opts ...Option) error {
	s, err := Open(path, append(opts, ReadOnly())...)
	if err != nil {
		return err
	}
	defer s.Close()
	return checkDB(s.db)
}

// checkDB runs checkTx in a read transaction of db, turning bbolt's panics
// and faults on a damaged page into ErrCorrupt (see readDamaged).
func checkDB(db *bolt.DB) error {
	return readDamaged(func() error { return db.View(checkTx) })
}

func checkTx(tx *bolt.Tx) error {
	var errs []error
	// The journal's own check first: it reads every record and index
	// entry on this goroutine, where readDamaged turns a wild read into
	// ErrCorrupt. bbolt's check runs on a goroutine of its own, where a
	// fault on a damaged page would kill the process: by the time it runs,
	// the pages it reads have been read once already, and their headers
	// checked.
	if err := check(tx); err != nil {
		errs = append(errs, err)
	}
	// bbolt's check trusts the page headers; pageHeaders does not, and a
	// file whose headers it refuses is not given to bbolt's check.
	if err := pageHeaders(tx); err != nil {
		errs = append(errs, err)
	} else {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

// Compact rewrites the journal at path into a new file that holds only the
// pages in use, checks the copy, and atomically replaces the journal with
// it. A journal whose settled records were pruned keeps their pages as free
// pages, which bbolt rewrites on every commit: compacting makes commits
// cheap again and the file small.
//
// It holds the journal's lock throughout (the application must be stopped;
// otherwise ErrLocked). It refuses a journal that does not check out
// (ErrCorrupt, nothing changed). The copy replaces the file a symbolic
// link points to, not the link, and takes the journal's owner and group.
// A crash at any point leaves either the old journal or the new one, never
// a mix: the copy is written to a temporary file beside the journal,
// synced, and renamed over it.
func Compact(path string, opts ...Option) (CompactStats, error) {
	var st CompactStats
	// The copy is renamed over the journal itself, not over a symbolic
	// link to it: renaming over the link would replace the link with a
	// regular file and leave the journal it points to as it was, two
	// journals from then on.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	src, err := Open(path, opts...)
	if err != nil {
		return st, err
	}
	defer src.Close()
	if src.readOnly {
		return st, fmt.Errorf("journal: compact %s: %w", path, ErrReadOnly)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return st, fmt.Errorf("journal: compact %s: %w", path, err)
	}
	st.Before = fi.Size()
	// A damaged journal is left alone, as it is: bbolt's copy would fault
	// on its bad pages, or copy only what it can read, and the original is
	// what a person needs to recover the rest.
	if err := checkDB(src.db); err != nil {
		return st, fmt.Errorf("journal: compact %s: the journal does not check out, nothing changed: %w", path, err)
	}

	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("journal: compact %s: remove a leftover copy: %w", path, err)
	}
	// No fsync per commit of the copy: it is synced once, whole, below,
	// before it can replace anything.
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return st, fmt.Errorf("journal: compact %s: %w", path, err)
	}
	cleanup := func() { _ = dst.Close(); _ = os.Remove(tmp) }
	// The copy replaces the journal: it must be the journal's owner's, or
	// a compact run as root (sudo idem compact) leaves a journal the
	// application, running as its own user, can no longer open.
	if err := sameOwner(tmp, fi); err != nil {
		cleanup()
		return st, fmt.Errorf("journal: compact %s: cannot give the copy the journal's owner, the journal is unchanged (run compact as the user the application runs as): %w", path, err)
	}
	if err := bolt.Compact(dst, src.db, compactTxSize); err != nil {
		cleanup()
		return st, fmt.Errorf("journal: compact %s: copy: %w", path, err)
	}
	if err := checkDB(dst); err != nil {
		cleanup()
		return st, fmt.Errorf("journal: compact %s: the copy does not check out, the journal is unchanged: %w", path, err)
	}
	if err := dst.Sync(); err != nil {
		cleanup()
		return st, fmt.Errorf("journal: compact %s: sync: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		_ = os.Remove(tmp)
		return st, fmt.Errorf("journal: compact %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return st, fmt.Errorf("journal: compact %s: replace: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return st, fmt.Errorf("journal: compact %s: the new journal is in place, but syncing its directory failed: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil {
		st.After = fi.Size()
	}
	return st, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
