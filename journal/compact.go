package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

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
// the journal's size. A journal that does not check out gives ErrCorrupt,
// or ErrLogMissing or ErrFileFailed when a missing log segment or a failed
// write (see ReadOnly) is its only problem; Inspect says what was read and
// lists every problem found.
func Check(path string, opts ...Option) error {
	_, err := Inspect(path, opts...)
	return err
}

// CheckReport says what Inspect read and found.
type CheckReport struct {
	FileSize int64 // bytes
	Pages    int64 // pages the last commit uses, all of them read
	Records  int   // records in the file, open and settled
	// Logged is how many records the journal's log holds a newer version
	// of than the file: a process stopped without closing the journal,
	// and the next Open for writing applies them. They were read back
	// whole (a damaged log fails the check).
	Logged int
	// Newer is how many records in the file a newer idem wrote, in a
	// record version this build does not read (a rollback left them):
	// not damage, and not checked beyond their first bytes; the newer
	// idem's check reads them.
	Newer int
	// NewerAt names them, in (Scope, Key) order: List leaves them out, and
	// nothing tells one of them from a record whose version byte was
	// damaged (records carry no checksum), so this is where an operator
	// finds them. A record without a key entry (a problem) is not named.
	NewerAt []Position
	// Problems lists each inconsistency found, one sentence each; it is
	// empty when the journal checks out. A file Open already refuses (not
	// a journal, truncated) gives one problem: Open's error.
	Problems []string
}

// Inspect is Check with a report: it returns the error Check returns
// (nil, or one matching ErrCorrupt when there are problems, ErrLogMissing
// or ErrFileFailed when that is the only one, or the error that kept it
// from checking, such as ErrLocked) and what it read. The
// report is filled as far as the check got.
func Inspect(path string, opts ...Option) (CheckReport, error) {
	var rep CheckReport
	s, err := Open(path, append(opts, ReadOnly())...)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			rep.Problems = []string{strings.TrimPrefix(err.Error(), prefix)}
		}
		return rep, err
	}
	defer s.Close()
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.inspectStep != nil {
		cfg.inspectStep()
	}
	if fi, err := s.file.Stat(); err == nil {
		rep.FileSize = fi.Size()
	}
	rep.Logged = s.ov.len()
	problems, err := inspectDB(s.db, s.file, &rep)
	// A bbolt panic that left its locks held (heldLocks): the deferred
	// Close must not call bbolt's Close, which would wait for them for ever.
	_ = s.stopUsing(err)
	if err != nil && len(problems) == 0 {
		problems = []error{err} // what stopped the walk
	}
	// The file may check out; the journal does not. Alone, a problem is
	// its own error (ErrFileFailed, ErrLogMissing); with others, the
	// journal is damaged. Listed even when the walk could not finish: a
	// failed write may be why the file reads damaged (the disk holds
	// what memory does not show), and an operator who restores the
	// journal must know that what this read was memory's.
	var alone error
	for _, p := range []error{s.writeFailed, s.logMissing} {
		if p != nil {
			problems = append(problems, errors.New(strings.TrimPrefix(p.Error(), prefix)))
			alone = p
		}
	}
	if err == nil && len(problems) == 1 {
		err = alone
	}
	if err == nil {
		err = damaged(problems)
	}
	if err != nil {
		for _, p := range problems {
			rep.Problems = append(rep.Problems, p.Error())
		}
		return rep, errorf("journal: check %s: %w", path, err)
	}
	return rep, nil
}

// checkDB checks db, whose file is f, and returns an error matching
// ErrCorrupt that lists every problem, if it found any.
func checkDB(db *bolt.DB, f *os.File) error {
	problems, err := inspectDB(db, f, nil)
	if err != nil {
		return err
	}
	return damaged(problems)
}

// damaged returns an error matching ErrCorrupt that lists problems, or nil.
func damaged(problems []error) error {
	if len(problems) == 0 {
		return nil
	}
	return withKind(ErrCorrupt, "damaged: %v", errors.Join(problems...))
}

// inspectDB runs checkTx in a read transaction of db, whose file is f,
// turning bbolt's panics and faults on a damaged page into ErrCorrupt (see
// readDamaged). It returns the problems it found, and an error when it
// could not look (a damaged page that stops the walk is one).
func inspectDB(db *bolt.DB, f *os.File, rep *CheckReport) (problems []error, err error) {
	err = viewRecovered(nil, db, func(tx *bolt.Tx) error {
		problems, err = checkTx(tx, f, rep)
		return err
	})
	return problems, err
}

// checkTx checks the pages, then the records and indexes, of tx, whose
// file is f, and counts what it read in rep (which may be nil).
func checkTx(tx *bolt.Tx, f *os.File, rep *CheckReport) ([]error, error) {
	// The pages first, read from the file rather than the memory map:
	// bbolt's check and the journal's own trust the page headers and the
	// element offsets and lengths, which pageHeaders does not. A damaged
	// key length made the journal's check format a gigabyte-long key, and
	// bbolt's check runs on a goroutine of its own, where a fault would
	// kill the process.
	if rep != nil {
		rep.Pages = tx.Size() / int64(tx.DB().Info().PageSize)
	}
	if err := pageHeaders(tx, f); err != nil {
		return nil, withKind(ErrCorrupt, "damaged: %v", err)
	}
	var errs []error
	newer, newerAt, err := check(tx)
	if rep != nil {
		rep.Newer, rep.NewerAt = newer, newerAt
	}
	if err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, j.Unwrap()...)
		} else {
			errs = append(errs, err)
		}
	}
	for err := range tx.Check() {
		errs = append(errs, err)
	}
	if rep != nil {
		for _, name := range [][]byte{bucketOpen, bucketDone} {
			rep.Records += tx.Bucket(name).Stats().KeyN
		}
	}
	return errs, nil
}

// compactSuffix ends the name of Compact's temporary copy, which is the
// journal's name, this suffix, and a random part.
const compactSuffix = ".compact-"

// Compact rewrites the journal at path into a new file that holds only the
// pages in use, checks the copy, and atomically replaces the journal with
// it. A journal whose settled records were pruned keeps their pages as free
// pages (commits do not pay for them, see freelist.go, but the file stays
// as large as it ever was): compacting makes the file small again. It also
// migrates a journal in an older format version, as Open does.
//
// It holds the journal's lock throughout (the application must be stopped;
// otherwise ErrLocked). It refuses a journal that does not check out
// (ErrCorrupt, nothing changed). The copy replaces the file a symbolic
// link points to, not the link, and takes the journal's owner, group and
// mode. A crash at any point leaves either the old journal or the new one,
// never a mix: the copy is written to a new temporary file beside the
// journal, synced, and renamed over it; a copy a killed Compact left
// behind is removed by the next one.
//
// The temporary file is created exclusively under a random name and never
// opened again by name, so a symbolic link planted in the journal's
// directory is never followed: Compact, run as root, cannot be made to
// create or hand over a file elsewhere.
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
		return st, errorf("journal: compact %s: %w", path, ErrReadOnly)
	}
	// What the log holds (a process that stopped without closing the
	// journal left it) goes into the file first: the copy is of the file
	// alone, and Close deletes the log.
	if err := src.flush(); err != nil {
		return st, errorf("journal: compact %s: nothing changed: %w", path, err)
	}
	fi, err := src.file.Stat()
	if err != nil {
		return st, errorf("journal: compact %s: %w", path, err)
	}
	st.Before = fi.Size()
	// A damaged journal is left alone, as it is: bbolt's copy would fault
	// on its bad pages, or copy only what it can read, and the original is
	// what a person needs to recover the rest.
	if err := checkDB(src.db, src.file); err != nil {
		return st, withKind(ErrCorrupt, "journal: compact %s: the journal does not check out, nothing changed: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// Only a Compact holding the journal's lock writes a copy of it, and
	// this one holds it: a copy already there is a killed run's.
	removeStaleCopies(dir, base, fi)

	tmp, err := newCopyFile(dir, base, fi)
	if err != nil {
		return st, errorf("journal: compact %s: the journal is unchanged: %w", path, err)
	}
	tmpID, err := tmp.Stat()
	if err != nil {
		_ = tmp.Close()
		_ = removeCopy(tmp.Name(), nil)
		return st, errorf("journal: compact %s: %w", path, err)
	}
	// bbolt opens its file by name; the hook gives it the descriptor
	// created above instead, so no name lookup can be redirected. It
	// gives it once: bbolt closes what it opened.
	given := false
	dst, err := bolt.Open(tmp.Name(), 0o600, &bolt.Options{
		NoSync: true, // synced once, whole, below, before it can replace anything
		OpenFile: func(name string, _ int, _ os.FileMode) (*os.File, error) {
			if given {
				return nil, errorf("open %s: Compact's copy is opened once", name)
			}
			given = true
			return tmp, nil
		},
	})
	if err != nil {
		_ = tmp.Close()
		_ = removeCopy(tmp.Name(), tmpID)
		return st, errorf("journal: compact %s: %w", path, err)
	}
	cleanup := func() { _ = dst.Close(); _ = removeCopy(tmp.Name(), tmpID) }
	if err := bolt.Compact(dst, src.db, compactTxSize); err != nil {
		cleanup()
		return st, errorf("journal: compact %s: copy: %w", path, err)
	}
	// bbolt opens a file whose newest meta page is damaged as its other
	// one describes it (a commit a crash tore), and after a copy of one
	// commit (any journal under compactTxSize) that was the empty file
	// bbolt made: Open made a new journal over the copy. A commit more
	// leaves both meta pages describing the whole copy. The copy holds
	// every write (flushed above, and no other Store can write): that
	// commit records that it depends on no log, and src's Close deletes
	// the log. It records so as of the copy's applied position, as a
	// clean Close does (retireLog): without the field, the copy read as
	// a file an earlier release left (logDep), and Open read no seal of
	// the log its next process writes before its file names one.
	if err := dst.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		dep := make([]byte, 16)
		copy(dep[8:], meta.Get(metaApplied)) // 8 bytes, or none: 0
		return meta.Put(metaLogDep, dep)
	}); err != nil {
		cleanup()
		return st, errorf("journal: compact %s: copy: %w", path, err)
	}
	// And one more, so that the older meta page says so too: the copy's
	// first commit carries src's dependency on a log src's Close deletes.
	if err := dst.Update(func(*bolt.Tx) error { return nil }); err != nil {
		cleanup()
		return st, errorf("journal: compact %s: copy: %w", path, err)
	}
	if err := checkDB(dst, tmp); err != nil {
		cleanup()
		return st, errorf("journal: compact %s: the copy does not check out, the journal is unchanged: %w", path, err)
	}
	if err := dst.Sync(); err != nil {
		cleanup()
		return st, errorf("journal: compact %s: sync: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		_ = removeCopy(tmp.Name(), tmpID)
		return st, errorf("journal: compact %s: %w", path, err)
	}
	// The name must still be the file written: only someone who may
	// rename files of this directory could have swapped it, and they
	// could replace the journal itself.
	if now, err := os.Lstat(tmp.Name()); err != nil || !os.SameFile(now, tmpID) {
		return st, errorf("journal: compact %s: the copy %s was replaced behind Compact's back; the journal is unchanged", path, tmp.Name())
	}
	src.replaced.Store(true) // by its copy, on purpose: not fileGone's case
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = removeCopy(tmp.Name(), tmpID)
		return st, errorf("journal: compact %s: replace: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return st, errorf("journal: compact %s: the new journal is in place, but syncing its directory failed: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil {
		st.After = fi.Size()
	}
	return st, nil
}

// newCopyFile creates, exclusively and under a random name, the file in
// dir that Compact writes the copy of the journal base into, and gives it,
// through its descriptor, the journal's owner, group and mode (fi): the
// copy replaces the journal, and a compact run as root (sudo idem compact)
// must not leave a journal the application, running as its own user, can
// no longer open.
func newCopyFile(dir, base string, fi os.FileInfo) (*os.File, error) {
	f, err := os.CreateTemp(dir, base+compactSuffix+"*")
	if err != nil {
		return nil, err
	}
	if err = sameOwner(f, fi); err != nil {
		err = errorf("cannot give the copy the journal's owner (run compact as the user the application runs as): %w", err)
	} else if err = f.Chmod(fi.Mode().Perm()); err != nil {
		err = errorf("cannot give the copy the journal's mode %v: %w", fi.Mode().Perm(), err)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// removeStaleCopies removes the copies of the journal base (whose file fi
// describes) that killed runs of Compact left in dir: regular files named
// as Compact names its copies (and as it named its one copy before,
// base.compact), owned by this process's user or the journal's, never a
// symbolic link or anything else, and never through one.
func removeStaleCopies(dir, base string, journal os.FileInfo) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // a leftover costs disk space, nothing more
	}
	for _, e := range entries {
		name := e.Name()
		if name != base+".compact" && !strings.HasPrefix(name, base+compactSuffix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && ownCopy(fi, journal) {
			_ = removeCopy(filepath.Join(dir, name), fi)
		}
	}
}

// removeCopy removes the file at path if it is a regular file and, when
// id is not nil, the very file id describes. The removal of a name never
// follows a symbolic link; the check keeps Compact from removing what it
// did not make.
func removeCopy(path string, id os.FileInfo) error {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errorf("%s is not a regular file, left alone", path)
	case id != nil && !os.SameFile(fi, id):
		return errorf("%s is not the copy Compact wrote, left alone", path)
	}
	return unlinkName(path)
}

// syncDir makes a rename in dir durable. The fsync's own error is a
// syncFailed (syncOpened), which only syncRecovered's caller tells apart.
func syncDir(dir string) error {
	return syncOpened(dir, nil, (*os.File).Sync)
}
