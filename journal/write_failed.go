package journal

import (
	"cmp"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// After a failed fsync, Linux does not keep the pages it could not write
// dirty: it marks them clean, reports the error once, to the descriptors
// open at the time, and serves the pages from memory until they are
// evicted. A process that opens the file afterwards reads what failed to
// reach the disk, and its own fsync succeeds, as nothing is dirty. A Store
// whose commit failed once written (ErrFileFailed) stops using the file,
// but the next Open, in the same boot, read the failed commit back as if
// it were on disk: its applied position past writes whose log segments
// that Store then deleted, and its B+tree pointing at pages the disk may
// hold older contents of. A reboot or an eviction later, the records it
// showed were gone or as they were before, with nothing left to restore
// them from. The same holds for a log segment whose write's fdatasync
// failed and which no later segment voided (ErrMaybeCommitted), and for
// the segments a failed Open could not make durable (syncRecovered). A
// write cut short (a full disk) leaves no marker: no fsync failed
// (logWriter.fail).
//
// So a Store that meets such a failure leaves a marker beside the journal,
// not synced: it lives in the same memory as the pages it warns of, and a
// reboot that drops them may drop it too. An Open for writing that finds
// it writes the journal file and every log segment again, as memory shows
// them, so that their pages are dirty once more, and syncs them: only
// once that succeeds is the marker removed and the journal used.
const writeFailedSuffix = ".write-failed"

// writeFailedPath names the marker of the journal base in dir.
func writeFailedPath(dir, base string) string {
	return filepath.Join(dir, base+writeFailedSuffix)
}

// markWriteFailed leaves the marker of the journal base in dir, saying
// what failed. A marker already there keeps the first failure's words; a
// name already taken is never followed (created exclusively: Compact may
// run as root). A marker that cannot be created (a full disk, or one
// remounted read-only after the error) is an error to add to the failure
// reported: without a marker, the next Open in this boot trusts what
// memory shows, and only the operator can keep it from doing so.
func markWriteFailed(dir, base string, cause error) error {
	marker := writeFailedPath(dir, base)
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return errorf("and its marker %s could not be written (%w), so the next open in this boot would take what memory shows for what the disk holds: %s",
			marker, err, unmarkedAdvice(runtime.GOOS))
	}
	_, _ = f.WriteString(time.Now().UTC().Format(time.RFC3339) + " " + cause.Error() + "\n")
	_ = f.Close()
	return nil
}

// markAt is markWriteFailed for the journal at path, beside its absolute
// path (markerLocation), or the error saying that cannot be found.
func markAt(path string, cause error) error {
	dir, base, err := markerLocation(path)
	if err != nil {
		return err
	}
	return markWriteFailed(dir, base, cause)
}

// unmarkedAdvice is what to do, on the system goos, when the marker of a
// failed write could not be left. Dropping the page cache is Linux's way
// (/proc/sys/vm/drop_caches); elsewhere there is no such file, and a
// reboot is the one way named.
func unmarkedAdvice(goos string) string {
	if goos != "linux" {
		return "do not open the journal again before the machine is rebooted, after the disk is checked"
	}
	return "do not open the journal again before the machine is rebooted, or, once every process that had the journal open has stopped (the pages a process maps are not dropped), " +
		"its page cache dropped (echo 1 > /proc/sys/vm/drop_caches), after the disk is checked"
}

// unmarked is err, a failure that left the marker of a failed write,
// with what markWriteFailed said if it could not leave it.
func unmarked(err, merr error) error {
	if merr == nil {
		return err
	}
	return errorf("%w; %v", err, merr)
}

// openCommit is how Open commits to the journal db at path before a
// Store exists (the freelist after rewriteAfterFailure, a new journal's
// metadata, a migration): updateRecovered, and, when the commit fails
// once bbolt has written its meta page (its fdatasync failed), the marker
// a Store's failed commit leaves (commitBolt). Without it the next Open,
// in the same boot, read the failed commit back as if it were on disk,
// built on it, and a reboot later the file named pages the disk never
// held (a migration's whole tree; a new journal's id, which its log's
// segments carry). fail, when a test sets it, stands in for the
// fdatasync of each commit, called once the commit succeeded.
//
// bbolt's own first commit (bolt.Open making a new file's first pages)
// leaves the marker too (openOnce), for its fdatasync's error
// (initUnsynced): the journal's first commit (initMeta's) writes anew all
// but the second meta page, which only the journal's second commit
// rewrites, and until then a reboot that took it back to zeros left a
// journal idem check called damaged.
type openCommit struct {
	db   *bolt.DB
	g    *gate // the Store's, once there is one (Close's commit)
	path string
	fail func() error
}

// update runs fn in a write transaction and commits it (see openCommit).
func (o openCommit) update(fn func(*bolt.Tx) error) error {
	before, err := txOf(o.g, o.db)
	if err != nil {
		return err // bbolt's locks are held: nothing was written, nor can be
	}
	err = updateRecovered(o.g, o.db, fn)
	if locksHeld(err) {
		// Nothing more can be read to tell whether the commit was
		// written: the words say to stop and check the file.
		return err
	}
	if err == nil && o.fail != nil {
		err = o.fail()
	}
	if err == nil {
		return nil
	}
	now, herr := txOf(o.g, o.db)
	if herr == nil && before >= 0 && now == before {
		return err // nothing written: the file is as it was
	}
	// An Open for writing has found the marker's place already
	// (rewriteAfterFailure).
	merr := markAt(o.path, errorf("%w: %w", ErrFileFailed, err))
	werr := unmarked(withKind(ErrFileFailed, "a commit was written but not synced (%w), so the disk may not hold it; "+
		"check the disk, then open the journal again, which writes it again and syncs it first", err), merr)
	if herr != nil {
		// Reading whether it was written left bbolt's locks held: the
		// caller must not call bbolt again.
		return &heldLocks{errorf("%w; and then %w", werr, herr)}
	}
	return werr
}

// initUnsynced reports whether err, bolt.Open's for the new (empty) file
// at path, may leave bbolt's first pages written but not on disk: its
// fdatasync's error (a bare errno on Linux, os.File.Sync's "sync"
// *fs.PathError elsewhere), once the file holds the pages. A write cut
// short (a full disk) is a "write" *fs.PathError, and no fsync failed:
// what it wrote is still dirty, and a marker would say a failed write,
// tell a reader not to trust the journal, have the next Open write it
// all again, and, on a disk too full for the marker, tell the operator
// not to open it before a reboot. The lock's error, a bare errno too,
// comes before any write, the file still empty. The map's, after the
// sync, cannot be told from the sync's: its marker costs the next Open a
// write of four pages.
func initUnsynced(path string, err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	if errors.As(err, &pe) {
		if pe.Op != "sync" {
			return false
		}
	} else if !errors.As(err, &errno) {
		return false
	}
	fi, serr := os.Stat(path)
	return serr != nil || fi.Size() > 0
}

// txOf returns the id of the newest commit a reader of db sees, or -1
// when it cannot tell (taken for a commit that may have been written),
// with a heldLocks error when bbolt panicked holding its locks.
func txOf(g *gate, db *bolt.DB) (int, error) {
	tx, err := begin(g, db, false)
	if err != nil {
		if locksHeld(err) {
			return -1, err
		}
		return -1, nil
	}
	defer endRead(g, tx)
	return tx.ID(), nil
}

// markFailed is markWriteFailed for s's journal.
func (s *Store) markFailed(cause error) error {
	dir, base := logLocation(cmp.Or(s.abs, s.path))
	return markWriteFailed(dir, base, cause)
}

// rewriteAfterFailure writes the journal file (open as file, locked) and
// its log segments again and syncs them, if a Store left the marker of a
// failed write beside it; fail, when a test sets it, stands in for each
// fdatasync. On error the marker stays, and the next Open tries again.
func rewriteAfterFailure(path string, file *os.File, fail func(path string) error) error {
	dir, base, err := markerLocation(path)
	if err != nil {
		return err
	}
	marker := writeFailedPath(dir, base)
	cause, found, err := markerCause(marker)
	if !found {
		return err
	}
	refused := func(what string, err error) error {
		return errorf("a write to this journal failed before (%s: %q), and writing %s again, so that the disk holds what memory shows of it, failed too (%w); nothing was changed: "+
			"check the disk, then open the journal again", filepath.Base(marker), strings.TrimSpace(string(cause)), what, err)
	}
	if file == nil { // not opened through the hook: by name, locked
		if file, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			return refused("the journal file", err)
		}
		defer file.Close()
	}
	if err := rewriteFile(file, path, fail); err != nil {
		return refused("the journal file", err)
	}
	segs, err := segmentPaths(dir, base)
	if err != nil {
		return refused("the log", err)
	}
	for _, seg := range segs {
		if err := rewriteSegment(seg, fail); err != nil {
			return refused("log segment "+filepath.Base(seg), err)
		}
	}
	if err := syncDir(dir); err != nil {
		return refused("the journal's directory", err)
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errorf("the journal was written again after a failed write, but its marker %s cannot be removed (%w): remove it by hand", marker, err)
	}
	return nil
}

// markerLocation returns where the marker of the journal at path lies
// (writeFailedPath), and its log: beside the journal's absolute path (a
// process may change its working directory after Open). A path that
// cannot be made absolute (the working directory removed, or outside
// the process's root) gives an error that says so: the marker went
// unseen, and a reader took what memory shows for what the disk holds.
func markerLocation(path string) (dir, base string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", errorf("whether a write to this journal failed before cannot be told: its marker (%s) lies beside the journal's absolute path, and %s cannot be made absolute (%w): "+
			"open the journal by its absolute path", filepath.Base(path)+writeFailedSuffix, path, err)
	}
	dir, base = logLocation(abs)
	return dir, base, nil
}

// markerCause reports whether the marker at path is there and, if so,
// what it says ("?" when it cannot be read).
func markerCause(marker string) (cause []byte, found bool, err error) {
	fi, err := os.Lstat(marker)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, errorf("%s: %w", marker, err)
	}
	cause = []byte("?")
	if fi.Mode().IsRegular() {
		cause = readMarker(marker, fi)
	}
	return cause, true, nil
}

// writeFailedRead is a read-only Open's word on the marker of a failed
// write beside the journal at path: nil without one, else an error
// matching ErrFileFailed that says what the reader sees may not be on
// disk and how to have it written again. A read-only Open changes
// nothing, so it cannot write the journal again itself; what it shows
// is what memory holds, the failed write's pages included, which a
// reboot may take back to what the disk holds. A marker that cannot be
// looked at, or looked for (markerLocation), is reported as one that may be
// there.
func writeFailedRead(path string) error {
	dir, base, err := markerLocation(path)
	if err != nil {
		return withKind(ErrFileFailed, "%w", err)
	}
	marker := writeFailedPath(dir, base)
	cause, found, err := markerCause(marker)
	if err != nil {
		cause, found = []byte(err.Error()), true
	}
	if !found {
		return nil
	}
	// Open prefixes "journal: open PATH: " to a warning's reader.
	return withKind(ErrFileFailed, "a write to this journal failed (%s: %q), and the disk may not hold what it shows: "+
		"what is read here may be gone, or as it was before, after a reboot. "+
		"Do not rely on it: open it for writing once (start the application, or run idem compact), which writes the journal again and syncs it, or refuses if the disk still fails, then read it again",
		filepath.Base(marker), strings.TrimSpace(string(cause)))
}

// rewriteSegment writes the log segment at path again (rewriteFile), if
// it is a regular file, and never through a symbolic link: the journal's
// directory may be writable by the application's user, and Compact may
// run as root, which a link planted under a segment's name, to a disk,
// would have read the whole disk and write it back under the file systems
// mounted on it. What is not a regular file is left to the reading of the
// log (scanLog), which refuses it.
func rewriteSegment(path string, fail func(path string) error) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// Replaced by a link since Lstat: not written.
	if now, err := f.Stat(); err != nil || !os.SameFile(fi, now) {
		return errorf("%s was replaced while the journal was opened", path)
	}
	return rewriteFile(f, path, fail)
}

// readMarker reads what the marker at path (fi, as Lstat saw it) says:
// not through a link swapped in since (the file opened must be the one
// Lstat saw: Compact may run as root), nor more than a marker ever holds.
func readMarker(path string, fi os.FileInfo) []byte {
	f, err := os.Open(path)
	if err != nil {
		return []byte("?")
	}
	defer f.Close()
	if now, err := f.Stat(); err != nil || !os.SameFile(fi, now) {
		return []byte("?")
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4<<10))
	return b
}

// rewriteFile writes every byte of f (named path) back where it is, then
// fdatasyncs it.
func rewriteFile(f *os.File, path string, fail func(path string) error) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			if _, werr := f.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if fail != nil {
		if err := fail(path); err != nil {
			return err
		}
	}
	return fdatasync(f)
}
