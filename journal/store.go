package journal

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// openPage is how many open records ForEachOpen reads per transaction.
const openPage = 256

// pruneChunk is how many records Prune deletes per commit, so that pruning
// a large backlog neither builds one huge transaction nor holds up other
// writers for long.
const pruneChunk = 10000

// Store is a journal of operations in a bbolt file and its log (see the
// package documentation). It is safe for concurrent use by many
// goroutines; only one process may have the journal open for writing at a
// time.
//
// Every write (Create, Update, Resolve, Confirm, Prune) is committed and,
// unless WithUnsafeNoSync was given, fsync'd when it returns without
// error. Concurrent writes share commits. Once a write has been queued it
// is carried out even if its context is cancelled, so an error means "not
// written", except one matching ErrMaybeCommitted: the disk failed the
// write and the step that would have made sure of it, and the write may
// or may not be in the journal. A commit of the file itself that fails
// once written makes every later call fail until the journal is reopened
// (see Prune), and so does a write of the file that meets a damaged page
// (ErrCorrupt). Every *Record a Store returns is the caller's own deep
// copy.
//
// The Store never reads the clock: the caller sets every time in a record.
type Store struct {
	db       *bolt.DB
	file     *os.File    // the file bbolt opened (bbolt's to close)
	id       os.FileInfo // which file that is, for openFiles
	path     string
	abs      string      // path made absolute at Open, for fileGone; "" if that failed
	gone     atomic.Bool // fileGone found the file gone from its path
	replaced atomic.Bool // Compact renames its copy over the file: fileGone is off
	// stopping, once set (under stopMu, which a round holds from its
	// check of it to its publication), is the error of every round: the
	// file is gone (apply).
	stopMu   sync.Mutex
	stopping error
	readOnly bool
	c        *committer // nil when read-only
	closed   atomic.Bool
	leases   leases // in memory: see lease.go
	// claimStep, when a test sets it, runs inside Claim between its
	// taking of the lease and its reading of the record.
	claimStep func()

	log  *logWriter // nil when read-only
	ov   overlay    // logged writes the file does not hold yet (overlay.go)
	ap   applier    // copies them into the file
	kept keptRead   // the committer's read transaction of the file

	// failed, once set, is the error of every call: a commit of the file
	// failed after bbolt had written it (see commitBolt).
	failed atomic.Pointer[error]
	// held: a bbolt panic left bbolt's locks held, and nothing may call
	// bbolt again, its Close included (stopUsing).
	held atomic.Bool
	// gate: every Begin on db passes through it, and every read's
	// Rollback that finds it free, so none waits for ever on locks a
	// panic left held (begin.go).
	gate gate

	logger *slog.Logger // WithLogger's; nil: silent
	// toldNewer: Prune has logged that it kept records from a newer idem.
	toldNewer atomic.Bool
	newer     newerSkips // open records from a newer idem the scans skipped
	// logMissing, in a read-only Store, says which log segments the file
	// depends on are missing (logDep): Inspect reports it.
	logMissing error
	// writeFailed, in a read-only Store, says that a write to the file
	// or its log failed and the disk may not hold what it shows
	// (writeFailedRead): Inspect reports it.
	writeFailed error
	lostSegs    atomic.Int64 // log segments found lost (apply), for Stats
}

// openFiles holds every Store of this process that is open, so that an
// Open that finds the file locked can tell whether the lock is held here
// (bbolt's lock is per open file, so a second Open in one process waits
// for the first to close like any other process would).
var openFiles struct {
	sync.Mutex
	stores map[*Store]struct{}
}

// register adds s to openFiles.
func (s *Store) register() {
	openFiles.Lock()
	defer openFiles.Unlock()
	if openFiles.stores == nil {
		openFiles.stores = make(map[*Store]struct{})
	}
	openFiles.stores[s] = struct{}{}
}

// unregister removes s from openFiles.
func (s *Store) unregister() {
	openFiles.Lock()
	defer openFiles.Unlock()
	delete(openFiles.stores, s)
}

// heldHere reports whether a Store of this process holds the file id in a
// mode that keeps an Open for readOnly out, and whether that Store writes.
func heldHere(id os.FileInfo, readOnly bool) (held, writer bool) {
	openFiles.Lock()
	defer openFiles.Unlock()
	for s := range openFiles.stores {
		if (!s.readOnly || !readOnly) && os.SameFile(s.id, id) {
			held = true
			writer = writer || !s.readOnly
		}
	}
	return held, writer
}

// openTries bounds how often Open starts again because the file at its
// path was replaced while it waited for the lock (see Open).
const openTries = 8

// Open opens the journal at path, creating it (mode 0600) unless ReadOnly
// is given. It waits a bounded time for another process to release the
// file (see WithLockTimeout), then fails with an error matching ErrLocked;
// the error says whether the holder is another process or a Store still
// open in this one. A file that is not an idem journal, or is damaged, or
// is shorter than its last commit needs (truncated), gives ErrCorrupt
// without being changed, read-only or not; one written by a newer format
// version gives ErrVersion. One written in an older format version is
// migrated to the current one when opened for writing, in a single
// transaction (a crash leaves it as it was; the next Open starts again);
// opened read-only it gives ErrOldFormat. A file that depends on log
// segments that are not beside it (a process stopped without closing it,
// and the file was copied alone or its segments deleted) gives
// ErrLogMissing when opened for writing, unless AcceptLostLog is given;
// read-only, it opens and warns. Every error names the path.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := config{lockTimeout: DefaultLockTimeout}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.readOnly {
		// bbolt would try to initialise an empty file, and the operator
		// deserves better than a bare ENOENT.
		fi, err := os.Stat(path)
		if err != nil {
			return nil, errorf("journal: open %s read-only: no journal there (read-only mode never creates one): %w", path, err)
		}
		if fi.Size() == 0 {
			return nil, withKind(ErrCorrupt, "journal: open %s: empty file, not a journal", path)
		}
	}
	timeout := cfg.lockTimeout
	if timeout <= 0 {
		timeout = time.Nanosecond // one try; bbolt's zero means forever
	}
	for range openTries {
		s, err := openOnce(path, &cfg, timeout)
		if s != nil || err != nil {
			return s, err
		}
	}
	return nil, errorf("journal: open %s: the file was replaced %d times while Open waited for its lock; is something rewriting it?", path, openTries)
}

// openOnce opens the file at path, or returns neither a Store nor an error
// when the file it opened is no longer the one at path: Compact renames
// its copy over the journal while this Open may wait for the lock on the
// file it opened, and then the lock protects nothing.
func openOnce(path string, cfg *config, timeout time.Duration) (*Store, error) {
	var file *os.File
	var id os.FileInfo
	o := &bolt.Options{
		Timeout:  timeout,
		ReadOnly: cfg.readOnly,
		NoSync:   cfg.noSync,
		// The array freelist merges its whole list into a new slice on
		// every commit; the map keeps spans (see freelist.go).
		FreelistType: bolt.FreelistMapType,
		// bolt.Open commits when the last commit skipped the freelist
		// (freelist.go): a new meta page over the tree memory shows,
		// fsync'd. After a failed write that tree may not be on disk,
		// and the commit would make it durable before
		// rewriteAfterFailure writes its pages again. Open writes the
		// freelist itself once that is done (flushFreelist).
		NoFreelistSync: true,
		// bbolt opens the file by path; the hook keeps what Open needs
		// of it, and refuses a truncated file before bbolt maps it.
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			if cfg.mustExist && file == nil {
				flag &^= os.O_CREATE
			}
			f, err := os.OpenFile(name, flag, perm)
			if err != nil || file != nil {
				if file == nil && cfg.mustExist && errors.Is(err, fs.ErrNotExist) {
					err = noJournal(path, "no file there")
				}
				return f, err // a second file: bbolt's own copy of the journal
			}
			fi, err := f.Stat()
			switch {
			case err == nil && fi.Size() > 0:
				err = fileFits(f, fi.Size())
			case err == nil && cfg.mustExist && !cfg.readOnly:
				err = noJournal(path, "an empty file there")
			}
			if err == nil {
				if err = checkFileSystem(f, path, cfg); err != nil && fi.Size() == 0 {
					// Made by this Open, most likely: a refusal leaves
					// nothing behind for the next start to take for a
					// journal.
					_ = os.Remove(name)
				}
			}
			if err == nil && !cfg.readOnly {
				err = checkMount(f, name)
			}
			if err == nil {
				warnOthersMayRead(fi, path, cfg.logger)
			}
			if err == nil && fi.Size() == 0 && !cfg.readOnly {
				err = reserveNew(f, cfg.fallocate)
			}
			if err != nil {
				_ = f.Close()
				return nil, err
			}
			file, id = f, fi
			return f, nil
		},
	}
	db, err := openBolt(path, o, &file)
	if created := file != nil && id != nil && id.Size() == 0 && !cfg.readOnly; created {
		if err == nil && cfg.failInit != nil {
			if err = cfg.failInit(); err != nil {
				_ = db.Close()
			}
		}
		if err != nil && initUnsynced(path, err) {
			// bbolt's first commit, a new file's first pages, may be
			// written and its fdatasync failed: see openCommit.
			merr := markAt(path, errorf("%w: making a new journal: %w", ErrFileFailed, err))
			err = unmarked(errorf("making a new journal failed (%w): check the disk, then open the journal again", err), merr)
		}
	}
	var kind *kindError
	var missing *missingJournal
	switch {
	case errors.As(err, &missing):
		return nil, err
	case errors.Is(err, berrors.ErrTimeout):
		if held, writer := heldHere(id, cfg.readOnly); held {
			how := "read-only"
			if writer {
				how = "for writing"
			}
			return nil, withKind(ErrLocked, "journal: open %s: already open %s in this process; use that Store, or close it first", path, how)
		}
		return nil, withKind(ErrLocked, "journal: open %s: another process (probably the running application) holds the journal's lock; stop it, or wait for it to exit, and retry", path)
	case errors.As(err, &kind):
		return nil, withKind(kind.kind, "journal: open %s: %w", path, err)
	case err != nil && systemError(err):
		return nil, errorf("journal: open %s: %w", path, err)
	case err != nil:
		// bbolt reports a bad file in several ways, some of them
		// untyped ("file size too small"): whatever is not the system's
		// complaint is the file's.
		return nil, withKind(ErrCorrupt, "journal: open %s: not an idem journal, or damaged (%v)", path, err)
	}
	if now, serr := os.Stat(path); serr == nil && !os.SameFile(id, now) {
		_ = db.Close()
		return nil, nil
	}
	commit := openCommit{db: db, path: path, fail: cfg.failOpenCommit}
	if !cfg.readOnly {
		if err := rewriteAfterFailure(path, file, cfg.failSync); err != nil {
			_ = db.Close()
			return nil, errorf("journal: open %s: %w", path, err)
		}
		if err := flushFreelist(db, file, commit); err != nil {
			closeOpened(db, file, err)
			if errors.Is(err, ErrFileFailed) { // openCommit's words say what to do
				return nil, errorf("journal: open %s: writing the freelist, which the last commit skipped: %w", path, err)
			}
			return nil, errorf("journal: open %s: writing the freelist, which the last commit skipped, failed (%w): check the disk, then open the journal again", path, err)
		}
	}
	if err := initMeta(db, file, cfg.readOnly, commit); err != nil {
		closeOpened(db, file, err)
		if errors.As(err, &kind) {
			return nil, withKind(kind.kind, "journal: open %s: %w", path, err)
		}
		return nil, errorf("journal: open %s: %w", path, err)
	}
	s := &Store{db: db, file: file, id: id, path: path, readOnly: cfg.readOnly, logger: cfg.logger}
	s.kept.gate = &s.gate
	s.abs, _ = filepath.Abs(path) // before the process changes its directory
	if cfg.readOnly {
		// Under the shared lock: a writer that met the failure has let
		// go, and one that writes the journal again takes the marker
		// away before it lets go.
		if s.writeFailed = writeFailedRead(path); s.writeFailed != nil && s.logger != nil {
			s.logger.Warn(errorf("journal: open %s: %w", path, s.writeFailed).Error(), slog.String("journal", path))
		}
	}
	if err := s.openLog(cfg); err != nil {
		closeOpened(db, file, err)
		var kind *kindError
		if errors.As(err, &kind) {
			return nil, withKind(kind.kind, "journal: open %s: %w", path, err)
		}
		return nil, errorf("journal: open %s: %w", path, err)
	}
	s.register()
	return s, nil
}

// warnOthersMayRead warns of a journal whose mode lets users other than
// its owner and group read or write it: 0644, say, that an older tool,
// a copy (cp without -p) or a umask of 022 left. The journal holds every
// request's body (card tokens, names, addresses; never a credential, which
// is added at send time), and a write could plant an order that Run
// sends. Open does not change the mode: group access (0640, 0660) may be
// the operator's choice for a group that reads the journal (idem's CLI
// beside the service), and Compact keeps it; the mode is theirs to fix.
func warnOthersMayRead(fi os.FileInfo, path string, logger *slog.Logger) {
	// Windows reports 0666 for every writable file: no mode to read.
	if logger == nil || runtime.GOOS == "windows" || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o006 == 0 {
		return
	}
	logger.Warn("journal: the file can be read or written by every user of this machine; it holds the request bodies: "+
		"chmod 600 it (640 to share it with a group)", slog.String("path", path), slog.String("mode", fi.Mode().Perm().String()))
}

// noJournal is Open's error, under MustExist, for a journal that is not
// there. It matches fs.ErrNotExist.
func noJournal(path, what string) error {
	return &missingJournal{path: path, what: what}
}

type missingJournal struct{ path, what string }

func (e *missingJournal) Error() string {
	return "journal: open " + e.path + ": " + e.what + ", and journal.MustExist forbids creating a journal. " +
		"Is the journal's volume mounted, and is this the path the service used before? " +
		"To start a new journal on purpose, open it once without MustExist"
}

func (e *missingJournal) Unwrap() error { return fs.ErrNotExist }

// systemError reports whether err comes from the operating system (no such
// file, permission denied, …) rather than from the file's content.
func systemError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// openBolt opens the bbolt file, turning a panic or a fault on a damaged
// file into ErrCorrupt. *file is the file o.OpenFile opened, unlocked and
// closed here if bbolt panics. The memory map bbolt may have made is lost
// with the DB that never came back: fileFits refuses beforehand what is
// known to make bbolt panic while opening, so that this is rare.
func openBolt(path string, o *bolt.Options, file **os.File) (db *bolt.DB, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if *file != nil {
				// The memory map keeps the open file, and its lock, alive
				// after the descriptor is closed: unlock it first.
				unlockFile(*file)
				_ = (*file).Close()
			}
			db, err = nil, withKind(ErrCorrupt, "damaged file (bbolt: %v)", p)
		}
	}()
	return bolt.Open(path, 0o600, o)
}

// rootBuckets are the top-level buckets Open reads, of this format
// (bucketKeyIgnoring only once a write made it) and of version 1, which
// it migrates: vetRootBuckets checks them first.
var rootBuckets = slices.Concat([][]byte{bucketMeta}, dataBuckets, [][]byte{bucketKeyIgnoring}, v1Buckets)

// initMeta checks that db is an idem journal this build can read, and
// makes a new file one. A file whose root holds no bucket at all is new
// (or was created by a process that died before its first commit);
// anything else without the journal's meta bucket is not a journal.
//
// A file of format version 1 is migrated to the current layout in one
// write transaction (see migrateV1) when it is opened for writing; opened
// read-only, it gives ErrOldFormat. Its commits go through o.
func initMeta(db *bolt.DB, file *os.File, readOnly bool, o openCommit) (err error) {
	empty := false
	var old byte
	err = viewRecovered(nil, db, func(tx *bolt.Tx) error {
		// Checked again now that the lock is held: the file bbolt mapped
		// must hold every page its meta page names (see fileFits).
		fi, err := file.Stat()
		if err != nil {
			return err
		}
		if fi.Size() < tx.Size() {
			return truncated(fi.Size(), tx.Size())
		}
		if err := vetRootBuckets(tx, rootBuckets); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			k, _ := tx.Cursor().First()
			empty = k == nil
			if empty && !readOnly {
				return nil
			}
			return withKind(ErrCorrupt, "not an idem journal (no journal metadata)")
		}
		if !bytes.Equal(meta.Get(metaMagic), magicValue) {
			return withKind(ErrCorrupt, "not an idem journal, or damaged (bad journal magic)")
		}
		v := meta.Get(metaVersion)
		switch {
		case len(v) != 1:
			// Not formatted: a damaged page can make it gigabytes long.
			return withKind(ErrCorrupt, "damaged (a format version of %d bytes)", len(v))
		case v[0] == 0:
			return withKind(ErrCorrupt, "damaged (format version 0)")
		case v[0] > formatVersion:
			return withKind(ErrVersion, "written by a newer idem (format version %d; this build reads up to %d): upgrade idem to read it", v[0], formatVersion)
		case v[0] == 2 && readOnly:
			// Version 3 only adds the log: a version 2 file reads
			// as it is, and has none.
		case v[0] < formatVersion && readOnly:
			return withKind(ErrOldFormat, "format version %d, written by an older idem: open it for writing once to migrate it to version %d (start the application, or run idem compact), then read it", v[0], formatVersion)
		case v[0] < formatVersion:
			old = v[0]
			return nil
		}
		for _, name := range dataBuckets {
			if tx.Bucket(name) == nil {
				return withKind(ErrCorrupt, "damaged (bucket %q missing)", name)
			}
		}
		return nil
	})
	if err == nil && old != 0 {
		if err = migrate(db, file, old, o); errors.Is(err, ErrFileFailed) {
			return errorf("migrate from format version %d to %d: %w", old, formatVersion, err)
		}
		if err != nil {
			return errorf("migrate from format version %d to %d (the file is unchanged): %w", old, formatVersion, err)
		}
	}
	if err != nil || !empty {
		return err
	}
	return o.update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(metaMagic, magicValue); err != nil {
			return err
		}
		if err := meta.Put(metaVersion, []byte{formatVersion}); err != nil {
			return err
		}
		id, err := newJournalID()
		if err != nil {
			return err
		}
		if err := meta.Put(metaID, id[:]); err != nil {
			return err
		}
		for _, name := range dataBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
}

// retireLog records in the file that it depends on no log (metaLogDep),
// once everything is applied and no round can run, before Close deletes
// the log: deleted first, a crash would leave a file naming segments
// that are gone, and Open would refuse a journal that lost nothing. If
// it fails, the log stays; the next Open finds it whole.
func (s *Store) retireLog() error {
	if s.ap.dep.Load() == 0 {
		return nil
	}
	err := s.commitBolt(func(tx *bolt.Tx) error {
		return putApplied(tx, &getter{}, s.ap.applied, 0)
	})
	if err == nil {
		s.ap.dep.Store(0)
	}
	return err
}

// Path returns the journal file's path, as given to Open.
func (s *Store) Path() string { return s.path }

// Close waits for queued writes to commit, copies the log into the file,
// then closes the file. It is safe to call more than once; every other
// method returns ErrClosed afterwards. If the copy fails, nothing is
// lost: the writes stay in the log, and the next Open applies them. After
// a commit of the file failed once written (the Store's calls have failed
// since), Close writes nothing to the file, keeps the log whole, and
// returns that failure. Close's own last commit (of the free-page list)
// failing once written is such a failure too: its error matches
// ErrFileFailed and says what to do.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var aerr, ferr error
	if s.c != nil {
		s.c.stop()
		close(s.ap.stop)
		<-s.ap.done
		// For good: no round runs now, and db.Close waits for every read
		// transaction to end.
		s.kept.suspend()
		s.ap.mu.Lock()
		aerr = s.failure()
		if aerr == nil {
			aerr = s.applyLocked()
		}
		s.log.close()
		retired := aerr == nil
		if retired && (s.ap.applied != s.ap.opened || s.ap.dep.Load() != 0) {
			// The file records that it depends on no log (retireLog), then
			// a commit more: bbolt opens a file whose newest meta page is
			// damaged as the other one describes it, a commit older, and
			// with the log gone that one would lose the last round's
			// writes without a word, or say the file depends on a log no
			// longer there. Both then describe everything, and no log. A
			// Store that applied and wrote nothing leaves the file as it
			// found it (a damaged journal among others).
			if retired = s.retireLog() == nil; retired {
				aerr = s.commitBolt(func(*bolt.Tx) error { return nil })
				retired = aerr == nil
			}
		}
		if retired {
			// Everything is in the file, which says so: the log is no
			// longer needed.
			_ = s.log.deleteApplied(s.ap.applied, true)
		}
		if s.failure() == nil {
			ferr = syncFreelist(openCommit{db: s.db, g: &s.gate, path: cmp.Or(s.abs, s.path), fail: s.ap.failFreelist})
			if locksHeld(ferr) {
				aerr = s.stopUsing(ferr)
			}
		}
		s.ap.closed = true
		s.ap.mu.Unlock()
	}
	defer s.unregister()
	if herr := s.gate.closeBegins(); herr != nil {
		// A read's Begin panicked a moment ago: its error may not have
		// reached stopUsing yet.
		_ = s.stopUsing(herr)
	}
	if s.held.Load() {
		// bbolt's Close would wait for the locks its panic left held.
		if cerr := closeFile(s.file); cerr != nil {
			return errorf("journal: close: %w; and closing the file: %w", s.failure(), cerr)
		}
		return errorf("journal: close: %w", s.failure())
	}
	err := closeResult(aerr, ferr, s.gone.Load())
	if cerr := s.db.Close(); cerr != nil {
		if err == nil {
			return errorf("journal: close: %w", cerr)
		}
		// What the copy and the freelist's commit did (a commit the disk
		// may not hold, its marker, the words if none could be left)
		// must reach the caller whatever the file's closing does.
		return errorf("journal: %w; and closing the file: %w", err, cerr)
	}
	return err
}

// closeResult is Close's error, given the copy of the log's failure
// (aerr), the commit of the free-page list's (ferr), and whether the
// journal's file is gone.
func closeResult(aerr, ferr error, gone bool) error {
	if aerr != nil && gone {
		return errorf("journal: close: %w", aerr)
	}
	if aerr != nil && errors.Is(ferr, ErrFileFailed) {
		// The copy failed with nothing written, the freelist's commit once
		// written: its marker, or the words saying none could be left,
		// must reach the caller too.
		return errorf("journal: close: %w; the next Open applies them; and writing the free-page list: %w", aerr, ferr)
	}
	if aerr != nil {
		return errorf("journal: close: %w; the next Open applies them", aerr)
	}
	if errors.Is(ferr, ErrFileFailed) { // openCommit's words say what to do
		return errorf("journal: close: writing the free-page list: %w", ferr)
	}
	if errors.Is(ferr, ErrCorrupt) {
		// bbolt panicked on the file's pages, as it does on a damaged
		// file: nothing was written, but the file is not known intact.
		return withKind(ErrCorrupt, "journal: close: writing the free-page list failed, nothing written (%w): "+
			"the journal may be damaged: stop, keep a copy, and run idem check before it is opened again", ferr)
	}
	if ferr != nil {
		// Nothing was written: every record is intact; only the next
		// Open's start-up is slower.
		return errorf("journal: close: writing the free-page list failed (the journal is intact; the next Open rebuilds the list): %w", ferr)
	}
	return nil
}

// write queues run for the committer and waits for its commit.
func (s *Store) write(ctx context.Context, run func(*view, *request) error) error {
	return s.do(ctx, &request{run: run})
}

// do queues r for the committer and waits for its commit.
func (s *Store) do(ctx context.Context, r *request) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.failure(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Once queued, the write is carried out even if ctx ends: it may
	// already be committed.
	if err := s.c.do(r); err != nil {
		return err
	}
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.err
}

// view runs fn in a read transaction.
func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.stopUsing(viewRecovered(&s.gate, s.db, fn))
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed // Close won the race
	}
	return err
}

// readDamaged runs a read of the file, turning what bbolt does on a damaged
// page into an error matching ErrCorrupt (promise 10: a damaged file fails
// closed with a clear error). bbolt trusts its pages: a bad page makes it
// panic (an assertion, an index out of range) or read through a wild
// pointer into the memory map, a fault that kills the process unless the
// goroutine asked for a panic instead. Both were seen from List, Get and
// Stats, so the operator tool crashed where it should say "damaged".
// Recovering is safe for a read: bbolt's View rolls its transaction back
// as the panic unwinds, and nothing was written. (Writes: updateDamaged.)
func readDamaged(read func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if !bboltPanic(p) {
				panic(p) // not of bbolt's kinds: the caller's to see
			}
			// Where, as a write says it (panicSeen): an operator must
			// tell a damaged file from a bug.
			err = withKind(ErrCorrupt, "reading the journal file: %s", panicSeen(p, panicSite()))
		}
	}()
	return read()
}

// Create stores a new record, which must satisfy the journal's rules (see
// ErrInvalid). When a record with the same Scope and Key exists, nothing is
// written and Create returns the stored record with an error matching
// ErrExists, so the caller can compare bodies. Otherwise it returns the
// record as stored.
func (s *Store) Create(ctx context.Context, rec *Record) (*Record, error) {
	stored, _, err := s.create(ctx, rec, nil)
	return stored, err
}

// create is Create, and CreateClaimed when claim is set: the lease is
// granted with the commit, before any reader can see the record.
func (s *Store) create(ctx context.Context, rec *Record, claim *Lease) (*Record, Lease, error) {
	if rec == nil {
		return nil, Lease{}, errorf("journal: create: nil record: %w", ErrInvalid)
	}
	// The copy is the committer's to index and then the caller's: exactly
	// what a later Get would return. Validating the copy rather than rec
	// means what is checked is what is written. A record the client
	// marked as its own (ownership) was hashed when it was built and is
	// shared with nobody: its digest is taken as given, and it is not
	// copied at all (adopt).
	owned := rec.clientOwned()
	var stored *Record
	if owned {
		stored = adopt(rec)
	} else {
		stored = clone(rec)
	}
	if err := validateRecord(stored, !owned); err != nil {
		return nil, Lease{}, errorf("journal: create: %w", err)
	}
	w := &createOp{stored: stored}
	if claim != nil {
		// In the op's allocation: CreateClaimed's own stays on its stack.
		w.claimRoom = *claim
		w.claim = &w.claimRoom
	}
	w.rk = recordKeyIn(&w.rkRoom, stored.Scope, stored.Key)
	w.enc = encode(nil, stored)
	w.op = w
	err := s.do(ctx, &w.request)
	stored = w.stored
	// w lives on in the overlay (entry) until the applier has copied the
	// record into the file: it keeps nothing of the caller's. Its request
	// is left as the round released it.
	w.stored, w.claim, w.claimRoom = nil, nil, Lease{}
	if errors.Is(err, ErrExists) {
		old, derr := decode(w.existing)
		if derr != nil {
			return nil, Lease{}, errorf("journal: create: existing record: %w", derr)
		}
		return old, Lease{}, errorf("journal: create %q: %w", rec.Key, ErrExists)
	}
	if err != nil {
		return nil, Lease{}, errorf("journal: create: %w", err)
	}
	return stored, w.granted, nil
}

// createOp is a create's write: the request, what its run reads, and what
// it hands back, in one allocation.
type createOp struct {
	request
	rk     []byte
	rkRoom [rkRoom]byte // rk's bytes, when they fit
	stored *Record
	enc    []byte
	claim  *Lease
	// claimRoom is what claim points at, a copy of create's.
	claimRoom Lease
	// existing is a copy of the record already stored under rk
	// (ErrExists); granted is the lease the commit granted with claim.
	existing []byte
	granted  Lease
	// entry is the write staged for the overlay (view.putIn), in the
	// op's allocation rather than one of its own: once published, the
	// overlay holds it (and so the op) until the applier has copied it
	// into the file, so create drops what else the op points at.
	entry logged
}

func (w *createOp) run(v *view, req *request) error {
	req.claim = nil
	cur, err := v.getNew(w.rk)
	if err != nil {
		return err
	}
	if cur != nil {
		w.existing = slices.Clone(cur)
		return ErrExists
	}
	v.putIn(&w.entry, opKey(w.rk), w.stored, w.enc)
	if w.claim != nil {
		req.claim, req.lease = w.claim, &w.granted
	}
	return nil
}

// Get returns the record with the given scope and key, or an error
// matching ErrNotFound.
func (s *Store) Get(ctx context.Context, scope, key string) (*Record, error) {
	if err := validateID(scope, key); err != nil {
		return nil, errorf("journal: get: %w", err)
	}
	r, err := s.get(ctx, recordKey(scope, key))
	if err != nil {
		return nil, errorf("journal: get %q: %w", key, err)
	}
	return r, nil
}

// get returns the record rk: its latest logged version, or the file's.
func (s *Store) get(ctx context.Context, rk []byte) (*Record, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	v, err := s.latest(rk)
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return nil, ErrClosed // Close won the race
		}
		return nil, err
	}
	if v == nil {
		return nil, ErrNotFound
	}
	return decode(v)
}

// Update applies fn to a copy of the stored record and commits the result
// with its index entries, atomically. If fn returns an error nothing is
// written and Update returns that error, wrapped. If the record is
// succeeded or failed, fn is not called and the error matches ErrTerminal.
// If fn breaks the journal's rules (changes Scope, Key, Method, URL or
// Body, or makes the record invalid), nothing is written and the error
// matches ErrInvalid. A panic in fn is re-raised in the caller.
// Otherwise it returns the record as committed: the very record fn was
// given and changed, in the form Get returns (times in UTC). The Store
// keeps none of it, so it shares nothing with the journal, only with
// what fn kept of it or put in it. The one exception is an Update under a
// context the idem Client made for its own writes (internal/owned): its fn
// is given the stored body and the record returned holds the new
// encoding's body, neither copied, so a Store wrapping this one that
// passes the Client's context on must not write into a record's Body;
// the record's request strings and Header map are those of the Client's
// own copy of the record where the stored bytes hold the same, so such a
// Store must not change that map in place either.
//
// fn runs inside the commit that it shares with other writers, on the
// goroutine of whichever writer leads that commit (the caller's own when
// it writes alone): it must be quick and must not call the Store's write
// methods, nor Claim, which would wait for that very commit.
func (s *Store) Update(ctx context.Context, scope, key string, fn func(*Record) error) (*Record, error) {
	if err := validateID(scope, key); err != nil {
		return nil, errorf("journal: update: %w", err)
	}
	if fn == nil {
		return nil, errorf("journal: update: nil function: %w", ErrInvalid)
	}
	// fenced's check, made here rather than by wrapping fn: the wrapper
	// was an allocation per write.
	lease, leased, err := s.fence(ctx, scope, key)
	if err != nil {
		return nil, errorf("journal: update %q: %w", key, err)
	}
	var u *updateOp
	if ownedUpdate(ctx) {
		o := new(ownedUpdateOp) // the op and the record it decodes, in one allocation
		u = &o.updateOp
		u.block = &o.block
		u.like = ownedLike(ctx)
	} else {
		u = new(updateOp)
	}
	u.s, u.fn, u.lease, u.leased = s, fn, lease, leased
	u.rk = recordKeyIn(&u.rkRoom, scope, key)
	u.op = u
	err = s.do(ctx, &u.request)
	stored := u.stored
	u.fn, u.stored, u.like = nil, nil, nil // as create's: u lives on in the overlay
	if err != nil {
		return nil, errorf("journal: update %q: %w", key, err)
	}
	s.settledUnder(ctx, stored)
	// The record fn changed is the caller's: the Store kept only its
	// encoding (v.putIn), so it is handed back rather than copied again.
	return asStored(stored), nil
}

// updateOp is an Update's write: the request, what its run reads, and the
// record it stored, in one allocation.
type updateOp struct {
	request
	s      *Store
	rk     []byte
	rkRoom [rkRoom]byte // rk's bytes, when they fit
	fn     func(*Record) error
	lease  Lease // the caller's, checked in the commit when leased
	leased bool
	stored *Record
	entry  logged // as createOp's
	// block, set only for the client's own Update (ownedUpdate, in an
	// ownedUpdateOp), is what run decodes the record into, the record fn
	// changes and Update hands back; nil for the others, whose run
	// allocates it. Such an Update's fn neither changes the record's
	// Body nor keeps it, and its caller never changes the Body of the
	// record handed back: run gives fn the stored body itself, and the
	// record its new encoding's, rather than a copy of 1 KiB or so per
	// write.
	block *recordBlock
	// like, only ever set with block, is the client's copy of the record
	// (internal/owned.Like): run decodes its request strings and header
	// as like's own where the stored bytes hold the same. Read only in
	// run, while its caller waits.
	like *Record
}

// ownedUpdateOp is an owned Update's op and the record it decodes, in one
// allocation rather than two. The record handed back keeps the op alive,
// which holds nothing of the caller's (fn and stored are cleared) but the
// encoding the record's body is a slice of already. Other callers' records
// may be kept for long: they keep only a block of their own alive, not an
// op and an encoding too.
type ownedUpdateOp struct {
	updateOp
	block recordBlock
}

func (u *updateOp) run(v *view, req *request) error {
	cur, err := v.get(u.rk)
	if err != nil {
		return err
	}
	if cur == nil {
		return ErrNotFound
	}
	blk, owned := u.block, u.block != nil
	if !owned {
		blk = new(recordBlock)
	}
	r, body, header, err := decodeStoredIn(blk, cur, owned, u.like)
	if err != nil {
		return err
	}
	if r.State.Terminal() {
		return ErrTerminal
	}
	was := *r       // shallow: fields fn could change in place are copied next
	was.Body = body // the stored bytes, valid until the round ends
	if r.Resolved != nil {
		res := *r.Resolved
		was.Resolved = &res
	}
	was.Confirmations = slices.Clone(r.Confirmations)
	if u.leased {
		if err := u.s.leases.checkInRound(u.lease); err != nil {
			return err
		}
	}
	if req.panicked, err = protect(u.fn, r); err != nil {
		return err
	}
	// The header is checked on the encodings, which sort it, rather
	// than on a copy of the map taken before fn (which may change the
	// map in place): equal encoded headers are equal headers. Only
	// when they differ is the stored one decoded again, so that
	// validateChange reports the first rule broken, as ever.
	//
	// A map that is still the client's copy's, which decode took because
	// the stored bytes held it (requestLike), is written as those bytes
	// when they hold it still: fn had that very map, and one changing it
	// in place (a wrapping Store's scrubbing a header) would otherwise
	// have the old header journaled and the Update succeed, the client's
	// copy holding a header the journal does not. Reading the bytes
	// against the map costs no walk of the map, sort or allocation.
	var known []byte
	if u.like != nil && len(r.Header) > 0 && sameHeaderMap(r.Header, u.like.Header) && headerHolds(header, r.Header) {
		known = header
	}
	enc, encHeader, encBody := encodeHeaderAs(nil, r, known)
	if bytes.Equal(encHeader, header) {
		was.Header = r.Header
	} else if old, err := decode(cur); err == nil {
		was.Header = old.Header
	} else {
		return err
	}
	if err := validateChange(&was, r); err != nil {
		return err
	}
	if owned && len(body) > 0 && &r.Body[0] == &body[0] {
		// cur's bytes live no longer than the round (bbolt's, or an
		// earlier write's the applier may drop): the record keeps the
		// same bytes in its own encoding, which nothing changes.
		r.Body = encBody
	}
	v.putIn(&u.entry, opKey(u.rk), r, enc)
	u.stored = r
	return nil
}

// Resolve settles a record by hand, as m says: it sets the state, the
// result's resource id and reason (keeping the status code and body the
// server last sent), clears the review reason, sets Settled and Updated to
// m.At, and records m and the previous state in Resolved. Unlike Update it
// also accepts a terminal record: it is the explicit, recorded way to
// correct one.
func (s *Store) Resolve(ctx context.Context, scope, key string, m Manual) (*Record, error) {
	if err := validateID(scope, key); err != nil {
		return nil, errorf("journal: resolve: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, errorf("journal: resolve: %w: %w", err, ErrInvalid)
	}
	check, err := s.fenced(ctx, scope, key, func(*Record) error { return nil })
	if err != nil {
		return nil, errorf("journal: resolve %q: %w", key, err)
	}
	stored, err := s.rewrite(ctx, recordKey(scope, key), func(r *Record) (bool, error) {
		if err := check(r); err != nil {
			return false, err
		}
		if err := CheckResolve(r, m); err != nil {
			return false, err
		}
		m.resolve(r)
		return true, nil
	})
	if err != nil {
		return nil, errorf("journal: resolve %q: %w", key, err)
	}
	s.settledUnder(ctx, stored)
	return stored, nil
}

// ForEachOpen calls fn for every open record, soonest NextDue first, and
// stops at the first error fn returns. It reads the open index a page at a
// time and calls fn outside any transaction, so fn may call Update. Its
// cost grows with the number of open records, not with the journal's size.
//
// Each record is visited at most once. A record created, or moved to an
// earlier NextDue than the walk has reached, while ForEachOpen runs may be
// missed; Due finds it later. A damaged page of the index ends the walk
// with an error matching ErrCorrupt: no record is skipped silently. An
// open record written by a newer idem (in a record version this build
// does not read, left by a rollback) is skipped, and WithLogger's logger
// names it once: failing on it would stop Client.Resume and Client.Run
// from settling every other record. Stats counts it (Newer).
func (s *Store) ForEachOpen(ctx context.Context, fn func(*Record) error) error {
	if over := s.overlaid(); over != nil {
		return s.forEachOpenOverlaid(ctx, over, fn)
	}
	var after []byte
	seen := make(map[string]struct{})
	for {
		var page []*Record
		read := 0 // index entries, those skipped included
		err := s.scan(ctx, func(tx *bolt.Tx) error {
			due := tx.Bucket(bucketDue)
			c, err := newScanCursor(tx, due, bucketDue)
			if err != nil {
				return err
			}
			var k []byte
			if after == nil {
				k, _, err = c.first()
			} else if k, _, err = c.seek(after); err == nil && bytes.Equal(k, after) {
				k, _, err = c.next()
			}
			if err != nil {
				return err
			}
			records := tx.Bucket(bucketOpen)
			ix := indexReader{records, mappedOf(tx, due), mappedOf(tx, records)}
			var newer [][]byte
			for read = 0; k != nil && read < openPage; {
				r, err := ix.read(k)
				switch {
				case errors.Is(err, ErrVersion):
					newer = append(newer, k[timeKeySize:])
				case err != nil:
					return err
				default:
					page = append(page, r)
				}
				after = slices.Clone(k)
				if read++; read == openPage {
					break // the next page's transaction reads on
				}
				if k, _, err = c.next(); err != nil {
					return err
				}
			}
			s.skippedNewer(tx, newer)
			return nil
		})
		if err != nil {
			return errorf("journal: for each open: %w", err)
		}
		for _, r := range page {
			id := r.Scope + "\x00" + r.Key
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
			if err := fn(r); err != nil {
				return err
			}
		}
		if read < openPage {
			return nil
		}
	}
}

// indexReader reads the open records the due index points at.
type indexReader struct {
	records       *bolt.Bucket
	index, values mapped // the bounds of the index's keys and the records
}

// check checks the due-index key k.
func (ix indexReader) check(k []byte) error {
	if err := ix.index.check(k); err != nil {
		return err
	}
	if len(k) < timeKeySize {
		return withKind(ErrCorrupt, "damaged index: entry %q too short", k)
	}
	return nil
}

// read decodes the open record the due-index key k points at.
func (ix indexReader) read(k []byte) (*Record, error) {
	if err := ix.check(k); err != nil {
		return nil, err
	}
	v := ix.records.Get(k[timeKeySize:])
	if v == nil {
		return nil, withKind(ErrCorrupt, "damaged index: entry %q without record", k)
	}
	if err := ix.values.check(v); err != nil {
		return nil, err
	}
	r, err := decode(v)
	switch {
	case err != nil:
		return nil, err
	case !r.Open() || timeKey(r.NextDue) != binary.BigEndian.Uint64(k):
		// A damaged key that names another record: the one it should
		// name would be missed.
		return nil, withKind(ErrCorrupt, "damaged index: entry %x names record %q, %s and due at %s", k, r.Key, r.State, r.NextDue)
	}
	return r, nil
}

// Due returns open records whose NextDue is not after by, soonest first, at
// most limit of them (limit <= 0 means all). A zero NextDue is always due.
// It skips a record written by a newer idem, as ForEachOpen does, and
// reads on past it for the limit's worth.
func (s *Store) Due(ctx context.Context, by time.Time, limit int) ([]*Record, error) {
	over := s.overlaid()
	out, seqs, err := s.due(ctx, by, widen(limit, over))
	if err != nil {
		return nil, errorf("journal: due: %w", err)
	}
	if over != nil {
		order, err := s.dueOrder(ctx, out, seqs, over)
		if err != nil {
			return nil, errorf("journal: due: %w", err)
		}
		bound := timeKey(by)
		out = merge(out, over, func(r *Record) bool {
			return r.Open() && timeKey(r.NextDue) <= bound
		}, order, limit)
	}
	return out, nil
}

// due is Due from the file alone; it also returns each record's sequence
// number, which orders records due at the same time.
func (s *Store) due(ctx context.Context, by time.Time, limit int) ([]*Record, []uint64, error) {
	var out []*Record
	var seqs []uint64
	bound := timeKey(by)
	err := s.scan(ctx, func(tx *bolt.Tx) error {
		var newer [][]byte
		due, records := tx.Bucket(bucketDue), tx.Bucket(bucketOpen)
		ix := indexReader{records, mappedOf(tx, due), mappedOf(tx, records)}
		c, err := newScanCursor(tx, due, bucketDue)
		if err != nil {
			return err
		}
		k, _, err := c.first()
		for ; k != nil && err == nil; k, _, err = c.next() {
			if err := ix.check(k); err != nil {
				return err
			}
			if binary.BigEndian.Uint64(k) > bound || limit > 0 && len(out) == limit {
				break
			}
			r, err := ix.read(k)
			if errors.Is(err, ErrVersion) {
				// Not one of the limit's: a due record this build reads
				// behind it would wait for good.
				newer = append(newer, k[timeKeySize:])
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, r)
			seqs = append(seqs, binary.BigEndian.Uint64(k[timeKeySize:]))
		}
		if err == nil {
			s.skippedNewer(tx, newer)
		}
		return err
	})
	return out, seqs, err
}

// List returns the records f selects, in (Scope, Key) order. A filter on
// open states only reads the open records; any other filter walks the key
// index (only the scope's part of it when f names one, from f.After on
// when f has one) and reads each record it selects. A record written by a
// newer idem (a rollback left it) is left out, without a place in
// f.Limit: Stats counts those (Newer, NewerOpen), and Inspect names them
// (CheckReport.NewerAt). A damaged one still fails the call with
// ErrCorrupt, unless the damage raised its version byte: records carry no
// checksum, so it reads as a newer idem's and is left out too.
func (s *Store) List(ctx context.Context, f Filter) ([]*Record, error) {
	if err := f.checkAfter(); err != nil {
		return nil, errorf("journal: list: %w", err)
	}
	over := s.overlaid()
	wide := f
	wide.Limit = widen(f.Limit, over)
	out, err := s.list(ctx, wide)
	if err != nil {
		return nil, errorf("journal: list: %w", err)
	}
	if over != nil {
		out = merge(out, over, func(r *Record) bool {
			return f.matchScope(recordKey(r.Scope, r.Key)) && f.matchAfter(r.Scope, r.Key) && f.matchState(r.State, r.Review) && f.matchCreated(r)
		}, byKey, f.Limit)
	}
	return out, nil
}

// list is List from the file alone.
func (s *Store) list(ctx context.Context, f Filter) ([]*Record, error) {
	var out []*Record
	err := s.scan(ctx, func(tx *bolt.Tx) error {
		if f.openOnly() {
			return listOpen(tx, &f, &out)
		}
		keys, open, done := tx.Bucket(bucketKeys), tx.Bucket(bucketOpen), tx.Bucket(bucketDone)
		km, om, dm := mappedOf(tx, keys), mappedOf(tx, open), mappedOf(tx, done)
		c, err := newScanCursor(tx, keys, bucketKeys)
		if err != nil {
			return err
		}
		var prefix, start []byte
		if f.Scope != "" {
			prefix = recordKey(f.Scope, "")
			start = prefix
		}
		if f.After != (Position{}) {
			// The least key above the bound's: no stored key holds a NUL
			// byte past its scope's, and the index is in byte order,
			// which is (Scope, Key) order.
			if after := append(recordKey(f.After.Scope, f.After.Key), 0); bytes.Compare(after, start) > 0 {
				start = after
			}
		}
		var k, sk []byte
		if start == nil {
			k, sk, err = c.first()
		} else {
			k, sk, err = c.seek(start)
		}
		// Keys and values stay valid until the transaction ends.
		for ; err == nil && k != nil && bytes.HasPrefix(k, prefix); k, sk, err = c.next() {
			if err := km.checkKV(k, sk); err != nil {
				return err
			}
			v := open.Get(sk)
			m := om
			if v == nil {
				v, m = done.Get(sk), dm
			}
			if v == nil {
				return withKind(ErrCorrupt, "damaged key index: entry %q without record", k)
			}
			if err := m.check(v); err != nil {
				return err
			}
			more, err := listOne(&f, k, v, &out)
			if err != nil || !more {
				return err
			}
		}
		return err
	})
	return out, err
}

// listOpen is List for a filter that selects only open records: it reads
// the open bucket (in sequence order) and sorts what it selects.
func listOpen(tx *bolt.Tx, f *Filter, out *[]*Record) error {
	open := tx.Bucket(bucketOpen)
	om := mappedOf(tx, open)
	c, err := newScanCursor(tx, open, bucketOpen)
	if err != nil {
		return err
	}
	k, v, err := c.first()
	for ; err == nil && k != nil; k, v, err = c.next() {
		if err := om.checkKV(k, v); err != nil {
			return err
		}
		st, review, err := decodeState(v)
		if errors.Is(err, ErrVersion) {
			continue // as listOne skips it
		}
		if err != nil {
			return errorf("record %x: %w", k, err)
		}
		if !f.matchState(st, review) {
			continue
		}
		r, err := decode(v)
		if err != nil {
			return errorf("record %x: %w", k, err)
		}
		if f.matchScope(recordKey(r.Scope, r.Key)) && f.matchAfter(r.Scope, r.Key) && f.matchCreated(r) {
			*out = append(*out, r)
		}
	}
	if err != nil {
		return err
	}
	slices.SortFunc(*out, func(a, b *Record) int {
		return cmp.Or(strings.Compare(a.Scope, b.Scope), strings.Compare(a.Key, b.Key))
	})
	if f.Limit > 0 && len(*out) > f.Limit {
		*out = (*out)[:f.Limit]
	}
	return nil
}

// listOne appends the record in v to out if f selects it, and reports
// whether List should go on.
func listOne(f *Filter, rk, v []byte, out *[]*Record) (bool, error) {
	if !f.matchScope(rk) {
		return true, nil
	}
	st, review, err := decodeState(v)
	if errors.Is(err, ErrVersion) {
		// Written by a newer idem: not listed, and no place in the
		// limit, so that the operator's list still works during a
		// rollback (Stats counts it in Newer).
		return true, nil
	}
	if err != nil {
		return false, errorf("record %q: %w", rk, err)
	}
	if !f.matchState(st, review) {
		return true, nil
	}
	r, err := decode(v)
	if err != nil {
		return false, errorf("record %q: %w", rk, err)
	}
	if f.matchCreated(r) {
		*out = append(*out, r)
	}
	return f.Limit <= 0 || len(*out) < f.Limit, nil
}

// Prune deletes the terminal records settled before settledBefore and
// returns how many it deleted. It never deletes an open record, nor one
// flagged for review (a confirmation contradicted it: see Prunable), nor
// one written since the log was last copied into the file (its latest
// version decides, once copied), nor one whose other times say it settled
// later than its Settled time (the clock was stepped back: see
// Record.Prunable).
// A record it cannot read whole is damaged, not judged: the prune fails
// with ErrCorrupt, as on a damaged page. One written by a newer idem (in
// a record version this build does not read, left by a rollback) is kept
// as it is, for that idem to prune, and WithLogger's logger hears of it
// once: failing on it would stop Client.Run for good. It reads only the settled index,
// so its cost grows with what it deletes (and the few records such a
// clock keeps), and it commits in chunks: if it fails, the chunks before
// the failure stay deleted, and the count says how many records that was. An error matching ErrMaybeCommitted means the
// chunk that failed was written but its fsync failed: its deletions may be
// on disk or not, and from then on every call of the Store fails, reads
// included, until the journal is closed and opened again, rather than show
// records as deleted that may come back.
func (s *Store) Prune(ctx context.Context, settledBefore time.Time) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, errorf("journal: prune: %w", err)
	}
	if s.readOnly {
		return 0, errorf("journal: prune: %w", ErrReadOnly)
	}
	total, newer := 0, 0
	var after []byte
	for {
		n, nw, more, err := s.pruneChunk(settledBefore, &after)
		if err != nil {
			return total, errorf("journal: prune: %w", err)
		}
		total += n
		newer += nw
		if !more {
			s.keptNewer(newer)
			return total, nil
		}
	}
}

// keptNewer tells WithLogger's logger, the first time a Prune keeps
// records written by a newer idem, how many it kept: once, since every
// later Prune keeps them again until that idem runs here once more.
func (s *Store) keptNewer(n int) {
	if n == 0 || s.logger == nil || !s.toldNewer.CompareAndSwap(false, true) {
		return
	}
	s.logger.Warn("journal: prune kept settled records written by a newer idem, which this build cannot read; "+
		"the newer idem prunes them once it runs on this journal again",
		slog.Int("records", n), slog.String("journal", s.path))
}

// pruneChunk deletes up to pruneChunk records of the settled index after
// *after and settled before settledBefore, in one commit, and moves *after
// past them.
func (s *Store) pruneChunk(settledBefore time.Time, after *[]byte) (n, newer int, more bool, err error) {
	bound := timeKey(settledBefore)
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	if s.closed.Load() {
		return 0, 0, false, ErrClosed
	}
	// Everything acknowledged so far goes into the file first, so that
	// the settled index is current.
	if err := s.applyLocked(); err != nil {
		return 0, 0, false, err
	}
	start := *after
	err = s.commitBolt(func(tx *bolt.Tx) error {
		n, newer, more, *after = 0, 0, false, start // a retried run starts afresh
		// Through a getter: bbolt writes a damaged page it deletes from,
		// or merges a page left small with, back as a sound one (vetPath).
		g := &getter{}
		records, settled, index := g.bucket(tx, bucketDone), g.bucket(tx, bucketSettled), g.bucket(tx, bucketKeys)
		// An entry of the settled index: its key, its value (the
		// record key), and whether its record goes with it.
		type entry struct {
			ik, rk     []byte
			drop, keep bool // keep: neither the record nor its entry
		}
		var entries []entry
		// The walk reads the index's pages checked, as a scan does: bbolt's
		// cursor handed out the keys of a damaged page as its offsets
		// said, and copying one faulted here, a fault that read as a bug
		// in idem (panicSeen). Nothing is changed yet, so the file's
		// pages are the transaction's.
		c, err := g.walk(tx, settled, bucketSettled)
		if err != nil {
			return err
		}
		var k, rk []byte
		if *after == nil {
			k, rk, err = c.first()
		} else if k, rk, err = c.seek(*after); err == nil && bytes.Equal(k, *after) {
			k, rk, err = c.next()
		}
		// A key too short to hold a time is damage the checks below name.
		for ; err == nil && k != nil && (len(k) < timeKeySize || binary.BigEndian.Uint64(k) < bound); k, rk, err = c.next() {
			if len(entries) == pruneChunk {
				more = true
				break
			}
			entries = append(entries, entry{ik: slices.Clone(k), rk: slices.Clone(rk)})
		}
		if err != nil {
			return err
		}
		// Decide everything before deleting anything, so an error
		// leaves the transaction untouched.
		for i := range entries {
			e := &entries[i]
			if len(e.ik) != timeKeySize+seqKeySize {
				return withKind(ErrCorrupt, "damaged settled index: entry %x", e.ik)
			}
			v, err := g.get(tx, records, e.ik[timeKeySize:])
			if err != nil {
				return err
			}
			if v == nil {
				continue // stray index entry: drop it alone
			}
			if s.ov.get(e.rk) != nil {
				// Written again since the file was brought up to
				// date (a manual resolution, a confirmation): its
				// copy moves it where it now belongs.
				e.keep = true
				continue
			}
			// One read of the whole record: the retention rule needs
			// its times, and a record that does not read whole is
			// damaged, not to be judged by its first bytes.
			r, err := decode(v)
			if errors.Is(err, ErrVersion) {
				// Written by a newer idem, the one rolled back from: not
				// this build's to judge, and failing here would stop
				// Run for good. It stays, entry and all, for that build.
				e.keep = true
				newer++
				continue
			}
			if err != nil {
				return errorf("record %q: %w", e.rk, err)
			}
			if !r.State.Terminal() {
				continue // an open record is never pruned: its stray entry goes alone
			}
			e.drop = r.Prunable(settledBefore)
			// Not Prunable: settled while the clock was behind, or
			// flagged for review; it keeps its entry, where the next
			// Prune finds it again.
			e.keep = !e.drop
		}
		for _, e := range entries {
			if e.keep {
				continue
			}
			if e.drop {
				sk := e.ik[timeKeySize:]
				if err := g.del(tx, records, sk); err != nil {
					return err
				}
				cur, err := g.get(tx, index, e.rk)
				if err != nil {
					return err
				}
				if bytes.Equal(cur, sk) {
					if err := g.del(tx, index, e.rk); err != nil {
						return err
					}
				}
				n++
			}
			if err := g.del(tx, settled, e.ik); err != nil {
				return err
			}
		}
		if len(entries) > 0 {
			*after = entries[len(entries)-1].ik
		}
		return nil
	})
	if err != nil {
		*after = start
		return 0, 0, false, err
	}
	return n, newer, more, nil
}

// Stats counts the journal's records by state. It reads every record (only
// its first bytes), so it is for the operator tool, not for a hot path.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByState: make(map[State]int)}
	over := s.overlaid()
	add := func(state State, review string, n int) {
		st.ByState[state] += n
		st.Total += n
		if !state.Terminal() {
			st.Open += n
		}
		if review != "" {
			st.Review += n
		}
	}
	err := s.scan(ctx, func(tx *bolt.Tx) error {
		st.FileSize = tx.Size()
		var inOpen bool
		count := func(k, v []byte) error {
			state, review, err := decodeState(v)
			if errors.Is(err, ErrVersion) {
				st.Newer++
				st.Total++
				if inOpen {
					st.NewerOpen++
				}
				return nil
			}
			if err != nil {
				return errorf("record %q: %w", k, err)
			}
			add(state, review, 1)
			return nil
		}
		for _, name := range [][]byte{bucketOpen, bucketDone} {
			inOpen = bytes.Equal(name, bucketOpen)
			if err := eachStored(tx, name, count); err != nil {
				return err
			}
		}
		// A logged write the file does not hold yet replaces the
		// file's version of its record, if the file has one.
		for _, r := range over {
			_, v, err := lookup(tx, recordKey(r.Scope, r.Key))
			if err != nil {
				return err
			}
			if v != nil {
				state, review, err := decodeState(v)
				if err != nil {
					return errorf("record %q: %w", r.Key, err)
				}
				add(state, review, -1)
			}
			add(r.State, r.Review, 1)
		}
		return nil
	})
	if err != nil {
		return Stats{}, errorf("journal: stats: %w", err)
	}
	for state, n := range st.ByState {
		if n == 0 {
			delete(st.ByState, state)
		}
	}
	if fi, err := os.Stat(s.path); err == nil {
		st.FileSize = fi.Size()
	}
	st.LostLogSegments = int(s.lostSegs.Load())
	return st, nil
}

// NewerOpen counts the open records written by a newer idem (Stats'
// NewerOpen; a rollback left them), reading the open records only, so
// that a damaged page of the settled ones, which Stats fails on, does
// not fail it, and its cost grows with the open operations, not with the
// journal's size (idem.NewerOpenCounter: idem.RemoveKeyIgnoring asks it).
// A damaged open record fails it: it may be one of them.
func (s *Store) NewerOpen(ctx context.Context) (int, error) {
	n := 0
	err := s.scan(ctx, func(tx *bolt.Tx) error {
		n = 0
		return eachStored(tx, bucketOpen, func(k, v []byte) error {
			_, _, err := decodeState(v)
			switch {
			case errors.Is(err, ErrVersion):
				n++
			case err != nil:
				return errorf("record %q: %w", k, err)
			}
			return nil
		})
	})
	if err != nil {
		return 0, errorf("journal: count newer open records: %w", err)
	}
	return n, nil
}

// eachStored calls fn with each entry of tx's bucket name (bucketOpen or
// bucketDone), its pages checked as it reads them (scanCursor) and the
// entry within the file (mapped.checkKV), in key order.
func eachStored(tx *bolt.Tx, name []byte, fn func(k, v []byte) error) error {
	b := tx.Bucket(name)
	m := mappedOf(tx, b)
	c, err := newScanCursor(tx, b, name)
	if err != nil {
		return err
	}
	k, v, err := c.first()
	for ; err == nil && k != nil; k, v, err = c.next() {
		if err := m.checkKV(k, v); err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return err
}

func validateID(scope, key string) error {
	switch {
	case scope == "":
		return errorf("empty scope: %w", ErrInvalid)
	case key == "":
		return errorf("empty key: %w", ErrInvalid)
	case strings.IndexByte(scope, 0) >= 0:
		return errorf("NUL byte in scope: %w", ErrInvalid)
	case strings.IndexByte(key, 0) >= 0:
		return errorf("NUL byte in key: %w", ErrInvalid)
	case timeKeySize+len(scope)+1+len(key) > bolt.MaxKeySize:
		return errorf("scope and key longer than %d bytes: %w", bolt.MaxKeySize-timeKeySize-1, ErrInvalid)
	}
	return nil
}

// validate checks the rules every stored record obeys.
func validate(r *Record) error { return validateRecord(r, true) }

// validateRecord is validate, without the body digest unless hash is
// set: for a record whose body and digest equal ones already validated.
func validateRecord(r *Record, hash bool) error {
	if err := validateID(r.Scope, r.Key); err != nil {
		return err
	}
	switch {
	case !r.State.Valid():
		return errorf("invalid state %q: %w", r.State, ErrInvalid)
	case hash && r.BodySHA != sha256.Sum256(r.Body):
		return errorf("BodySHA is not the SHA-256 of Body: %w", ErrInvalid)
	case r.State.Terminal() && r.Settled.IsZero():
		return errorf("%s record without a Settled time: %w", r.State, ErrInvalid)
	case r.Resolved != nil && r.Resolved.From != "" && !r.Resolved.From.Valid():
		return errorf("invalid resolution state %q: %w", r.Resolved.From, ErrInvalid)
	}
	return nil
}

// sameResolution is reflect.DeepEqual(a, b), without reflection for the
// nil that nearly every record holds: DeepEqual of a nil and a non-nil
// pointer is false, of two nils true.
func sameResolution(a, b *Resolution) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// validateChange checks what Update's fn did: the record must stay valid
// and keep what identifies the operation on the wire (promise: same key,
// same bytes, same URL on every attempt). was.Body must be the stored
// bytes, not the copy fn was given: comparing with them also catches a
// Body changed in place, without hashing the body on every update.
func validateChange(was, r *Record) error {
	switch {
	case r.Scope != was.Scope || r.Key != was.Key:
		return errorf("update changed Scope or Key: %w", ErrInvalid)
	case r.Method != was.Method || r.URL != was.URL:
		return errorf("update changed Method or URL: %w", ErrInvalid)
	case r.BodySHA != was.BodySHA || !bytes.Equal(r.Body, was.Body):
		return errorf("update changed Body: %w", ErrInvalid)
	case r.QueryURL != was.QueryURL || !maps.EqualFunc(r.Header, was.Header, slices.Equal[[]string]):
		// Promise 2: the same request, headers included, on every attempt.
		return errorf("update changed Header or QueryURL: %w", ErrInvalid)
	case !r.Created.Equal(was.Created):
		return errorf("update changed Created: %w", ErrInvalid)
	case r.Trace != was.Trace:
		return errorf("update changed Trace: %w", ErrInvalid)
	case r.KeyPlacement != was.KeyPlacement:
		return errorf("update changed KeyPlacement: %w", ErrInvalid)
	case !sameResolution(r.Resolved, was.Resolved):
		return errorf("update changed Resolved: only Resolve records a manual resolution: %w", ErrInvalid)
	case !slices.Equal(r.Confirmations, was.Confirmations):
		return errorf("update changed Confirmations: only Confirm records a confirmation: %w", ErrInvalid)
	}
	// The stored body and digest were validated when the record was
	// created, and neither has changed since.
	return validateRecord(r, false)
}
