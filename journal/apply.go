package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Applying the log to the bbolt file.
const (
	// applyDelay is how long the applier lets writes gather after the
	// first one it has not applied: the longer, the fewer bbolt commits
	// (each one two fsyncs), the shorter, the steadier the heap (the
	// overlay is freed a little at a time) and the shorter the disk's
	// stalls behind each commit. Records are created and settled before
	// they reach bbolt either way: young open ones are held back
	// (holdFor).
	applyDelay = 25 * time.Millisecond
	// applyEntries and applyBytes make the applier start at once when
	// this much waits, so that the overlay (memory) and the log stay
	// bounded whatever the write rate.
	applyEntries = 8192
	applyBytes   = 16 << 20
	// overlayMax is as much as the overlay may hold before a round
	// waits for the applier (backPressure): a file that cannot keep up,
	// or cannot be written at all, must not make the process's memory
	// and the log grow without bound.
	overlayMax = 4 * applyBytes
	// holdFor is how long an open record may stay out of the file after
	// its first write the file lacks: an operation settles within it, as
	// most do, and the file gets it once, settled. Scans, Checkpoint and
	// Close hold nothing back.
	holdFor = time.Second
	// applyBatch bounds the records of one bbolt transaction.
	applyBatch = 16384
	// applyRetry is the wait after a failed apply (a full disk, say)
	// before the applier tries again.
	applyRetry = time.Second
)

// applier copies the overlay into the bbolt file in the background. All
// bbolt writes go through its mutex: applies, Prune's deletions, Close.
type applier struct {
	mu      sync.Mutex
	applied uint64 // bbolt holds every write up to this LSN
	opened  uint64 // applied as Open found it
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  bool          // Close has made its last apply
	delay   time.Duration // applyDelay; tests shorten or lengthen it
	max     int64         // overlayMax; tests lower it
	// failApply, when a test sets it, stands in for the bbolt commit of an
	// apply.
	failApply func() error
	// failCommit, when a test sets it, fails the bbolt commits whose
	// function succeeded: before anything is written (written false:
	// bbolt rolls back, as after a full disk or a failed write of the
	// pages), or once everything is (written true: pages and meta page
	// written, shown through the map, perhaps not on disk, as a failed
	// final fdatasync leaves them).
	failCommit func(written bool) error
	// failFreelist, when a test sets it, stands in for the fdatasync of
	// Close's commit of the freelist (syncFreelist): an error fails it
	// once written.
	failFreelist func() error
	// dep is the log generation the file records it depends on
	// (metaLogDep); written under mu, read by rounds (dependOnLog).
	dep atomic.Uint64
}

// start runs the applier's goroutine.
func (s *Store) startApplier() {
	a := &s.ap
	a.kick = make(chan struct{}, 1)
	a.stop = make(chan struct{})
	a.done = make(chan struct{})
	if a.delay == 0 {
		a.delay = applyDelay
	}
	go s.applyLoop()
}

// kickApplier tells the applier that writes wait.
func (s *Store) kickApplier() {
	select {
	case s.ap.kick <- struct{}{}:
	default:
	}
}

func (s *Store) applyLoop() {
	a := &s.ap
	defer close(a.done)
	var timer *time.Timer
	var fire <-chan time.Time
	arm := func(d time.Duration) {
		if timer == nil {
			timer = time.NewTimer(d)
			fire = timer.C
		}
	}
	failing := false // the last apply failed: wait applyRetry, whatever piles up
	for {
		select {
		case <-a.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-a.kick:
			if failing || !s.backlog() {
				arm(a.delay)
				continue
			}
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
			timer, fire = nil, nil
		}
		var err error
		if s.backlog() {
			err = s.applyAll() // everything, young or not
		} else {
			err = s.applySettled()
		}
		if err != nil {
			// The writes are safe in the log; the next try, or Open,
			// applies them.
			failing = true
			arm(applyRetry)
		} else if failing = false; s.ov.len() > 0 {
			arm(a.delay)
		}
	}
}

// backlog reports whether so much waits in the overlay (applyEntries,
// applyBytes) that the applier copies it at once, whole.
func (s *Store) backlog() bool {
	n, b := s.ov.size()
	return n >= applyEntries || b >= applyBytes
}

// applyAll copies everything published so far into the bbolt file.
func (s *Store) applyAll() error {
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	return s.applyLocked()
}

// applySettled is applyAll but for open records written in the last
// holdFor: the applier's routine pass.
func (s *Store) applySettled() error {
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	return s.apply(time.Now().Add(-holdFor))
}

// applyLocked is applyAll with the applier's mutex held.
func (s *Store) applyLocked() error { return s.apply(time.Time{}) }

// apply copies the overlay into the file, but for the open records
// published after holdAfter (none held back when it is zero). The
// applier's mutex is held.
//
// Once the file is gone from its path (fileGone), everything goes into
// it, so that the copy the error asks the operator for holds every write
// acknowledged so far, and then the Store stops.
func (s *Store) apply(holdAfter time.Time) error {
	if s.ap.closed {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		return err // no batch to build: commitBolt would refuse it
	}
	gone := s.fileGone()
	if gone == nil {
		seg, truncated, lost := s.log.activeGone()
		if !lost {
			return s.applyUpTo(holdAfter)
		}
		// Every round from here on starts a new segment, and every round
		// before it, in the segment that is gone, goes into the file now,
		// young open records included. The file then depends on no
		// segment until the next round starts one: a crash before it
		// must not make Open refuse a journal that lost nothing.
		s.stopMu.Lock()
		first := !s.log.renew.Swap(true)
		if first {
			s.log.dep.Store(0)
		}
		s.stopMu.Unlock()
		if first {
			s.segmentLost(seg, truncated)
		}
		err := s.applyUpTo(time.Time{})
		if err == nil && truncated {
			s.log.removeDead(seg)
		}
		return err
	}
	// No round writes from here on, and what rounds published before is
	// all copied in: the file then holds every acknowledged write.
	s.stopMu.Lock()
	s.stopping = gone
	s.stopMu.Unlock()
	err := s.applyUpTo(time.Time{})
	s.failed.CompareAndSwap(nil, &gone)
	if err != nil {
		return errorf("%w; and copying the log into it failed: %w", gone, err)
	}
	return gone
}

// segmentLost tells the operator that the active log segment at path was
// lost: mended here, but whatever removed or truncated it will do it again,
// and a crash in the window before the applier's next pass (up to its
// delay) loses what only that segment held.
func (s *Store) segmentLost(path string, truncated bool) {
	s.lostSegs.Add(1)
	if s.logger == nil {
		return
	}
	how := "removed"
	if truncated {
		how = "truncated"
	}
	s.logger.Warn("journal: a log segment was "+how+" while the journal was writing to it; "+
		"its writes are being copied into the journal file and a new segment started. "+
		"Exclude the journal's log segments from log cleanup and rotation: a crash before such a copy loses acknowledged writes",
		slog.String("segment", path), slog.String("journal", s.path), slog.String("how", how))
}

// applyUpTo is apply's pass over what was published when it began.
func (s *Store) applyUpTo(holdAfter time.Time) error {
	// One pass: what was published when it began. Writes published
	// meanwhile wait for the next pass, so that a steady stream of them
	// gathers into one transaction per pass, not many small ones.
	upTo := s.ov.lastLSN()
	for {
		batch, through := s.ov.batch(applyBatch, upTo, holdAfter)
		through = max(through, s.ap.applied)
		// Read before the commit: a round after it writes to this
		// segment or a newer one. No segment of this Store yet (or the
		// active one found gone), the file depends on no log only once
		// it holds everything: writes a later batch takes are still in
		// the log alone (a backlog replayed at Open, applied in parts).
		dep := s.log.dep.Load()
		if dep == 0 && through < upTo {
			dep = s.ap.dep.Load()
		}
		if len(batch) == 0 && dep == s.ap.dep.Load() {
			return nil
		}
		err := s.commitBolt(func(tx *bolt.Tx) error {
			g := &getter{}
			// The batch's record keys, as bbolt takes them, in one
			// allocation: bbolt keeps a key it was given until the
			// transaction ends, so none of them is reused before then.
			n := 0
			for _, e := range batch {
				n += len(e.rk)
			}
			keys := make([]byte, 0, n)
			for _, e := range batch {
				keys = append(keys, e.rk...)
				if err := applyOne(tx, g, e, keys[len(keys)-len(e.rk):len(keys):len(keys)]); err != nil {
					return err
				}
			}
			return putApplied(tx, g, through, dep)
		})
		if err != nil {
			return errorf("applying the log to the journal file (the writes are safe in the log): %w", err)
		}
		s.ap.applied = through
		s.ap.dep.Store(dep)
		s.ov.drop(batch)
		// A segment that cannot be deleted now is deleted after a later
		// apply; it only takes disk space.
		_ = s.log.deleteApplied(through, false)
	}
}

// putApplied records in tx that the file holds every write up to through
// (metaApplied) and depends on the log from generation dep on (metaLogDep,
// see logDep), in one allocation: bbolt keeps both values until the
// transaction ends.
func putApplied(tx *bolt.Tx, g *getter, through, dep uint64) error {
	v := make([]byte, 24)
	binary.BigEndian.PutUint64(v, through)
	binary.BigEndian.PutUint64(v[8:], dep)
	binary.BigEndian.PutUint64(v[16:], through)
	meta := g.bucket(tx, bucketMeta)
	if err := g.put(tx, meta, metaApplied, v[:8:8]); err != nil {
		return err
	}
	return g.put(tx, meta, metaLogDep, v[8:])
}

// commitBolt runs fn in a bbolt write transaction and commits it. Only the
// holder of the applier's mutex calls it (or Open, before any write).
//
// A commit that fails after bbolt has written it (its final fdatasync
// failed, say) stays in the file bbolt maps: pages and meta page are
// written, so every later reader sees the commit, and every later commit
// builds on it and reuses the pages it freed, though the disk may not
// hold it (after a failed fsync the kernel may drop the pages it could
// not write, and report nothing the next time). A pruned record looked
// gone though a restart could bring it back, and a Create of its key
// journaled a record meanwhile. So such a failure ends the Store's use of the file
// for good, as the log's failed write ends the segment it was written to:
// the error matches ErrMaybeCommitted (the commit may be on disk or not),
// and every later call fails with the same cause (Store.failure) until
// the journal is closed and opened again, which reads the file afresh and
// applies the log on top. (A read under way as the commit fails may still
// see it, as reads see every commit a moment before its fsync returns.) A
// commit that fails before bbolt writes its meta page (a full disk, a
// failed write of its pages) leaves the file as it was, and the applier
// tries again later, as ever.
func (s *Store) commitBolt(fn func(*bolt.Tx) error) error {
	if err := s.failure(); err != nil {
		return err
	}
	if s.ap.failApply != nil {
		if err := s.ap.failApply(); err != nil {
			return err
		}
	}
	tuneFreelist(s.db)
	s.kept.suspend()
	defer s.kept.resume()
	var id int
	ran := false // fn returned nil: an error is the commit's own
	err := s.updateDamaged(func(tx *bolt.Tx) error {
		id = tx.ID()
		if err := s.runKeeping(tx, fn); err != nil {
			return err
		}
		ran = true
		if s.ap.failCommit != nil {
			return s.ap.failCommit(false)
		}
		return nil
	})
	if err == nil && s.ap.failCommit != nil {
		err = s.ap.failCommit(true)
	}
	if err != nil && ran && s.shows(id) {
		ferr := errorf("%w: %w", ErrFileFailed, err)
		s.failed.Store(&ferr)
		if merr := s.markFailed(ferr); merr != nil {
			ferr = unmarked(ferr, merr)
			s.failed.Store(&ferr)
		}
		return errorf("%w: %w", ErrMaybeCommitted, ferr)
	}
	return err
}

// runKeeping runs fn, a write's function in tx, letting the committer's
// rounds keep a read transaction of the file meanwhile (keptRead), and
// ends it again before the commit. With the kept read suspended from the
// write's begin to its commit, the rounds that ran meanwhile began a
// transaction of their own for every Create the overlay could not
// answer: about four times the CPU of the kept read's lookup (a profile
// at 64 callers, fsync off, where the applier writes a good part of the
// time).
//
// The write began with no kept read open, so bbolt freed the pages of the
// commits before it as ever. Until the commit, bbolt changes nothing of
// the file and its map (it allocates pages, growing the file and mapping
// it afresh, only in Commit): a read begun meanwhile reads the file the
// overlay assumes, the applier dropping what it copies only after the
// commit, and holds bbolt's mmap lock only until fn returns.
func (s *Store) runKeeping(tx *bolt.Tx, fn func(*bolt.Tx) error) error {
	s.kept.resume()
	defer s.kept.suspend()
	return fn(tx)
}

// updateDamaged is s.db.Update(fn), turning what bbolt does on a damaged
// page into an error matching ErrCorrupt, as readDamaged does for reads:
// bbolt trusts its pages in a write transaction too, and panics (an
// assertion on a page's id, a slice out of range) or faults on the memory
// map (an offset past the file: SIGSEGV or SIGBUS, which kills the process
// unless the goroutine asked for a panic instead). A Prune that met a
// damaged page of the settled index panicked in its caller's goroutine,
// or killed the process; in the applier's goroutine either kills it. The
// applier checks the pages it reads (vetPath); Prune, the root bucket and
// bbolt's own commit do not.
//
// Recovering is safe: bbolt's Update rolls its transaction back as the
// panic unwinds, before anything is written. But the file is known to be
// damaged, so the Store stops using it, as after a commit that failed
// once written (ErrFileFailed): every later call fails with this error,
// and Close leaves the log whole, until the journal is reopened.
//
// Only what bbolt panics with on a damaged page is taken for damage: a
// runtime error (a slice out of range, a fault) or a string (its
// assertions); any other panic goes on. A bug in fn raises runtime errors
// too, and the Store fails closed on those as well, but the error says
// what was seen: the panic's value and the function that raised it, in
// bbolt or outside it (panicSeen). Every such panic read "damaged page
// met", and an operator told to restore a sound file lost the writes
// since the backup, and the bug stayed unreported.
//
// bbolt's ErrIncompatibleValue is damage too: the journal's buckets hold
// no nested bucket, so an element flagged as one is a damaged page (a
// Prune met one and failed with bbolt's bare "incompatible value"); so is
// an ErrCorrupt from fn's own checks (a Prune whose checked path found the
// page first went on, and the next Create was acknowledged).
func (s *Store) updateDamaged(fn func(*bolt.Tx) error) error {
	err := updateRecovered(&s.gate, s.db, fn)
	if locksHeld(err) {
		return s.stopUsing(err)
	}
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		err = withKind(ErrCorrupt, "bbolt found a nested bucket where the journal keeps none, on a damaged page (%w)", err)
	}
	if errors.Is(err, ErrCorrupt) {
		// ErrCorrupt: fn's own checks (vetPath) found the damage before
		// bbolt tripped on it, or bbolt tripped; the file is as damaged
		// either way.
		ferr := withKind(ErrCorrupt, "writing the journal file %s: %v; nothing was written, "+
			"and nothing more is read from the file or written to it (acknowledged writes are safe in its log): "+
			"stop, keep a copy, and run idem check: restore the journal if it finds damage, report this message if it finds none", s.path, err)
		s.failed.Store(&ferr)
		return ferr
	}
	return err
}

// updateRecovered is db.Update(fn), with a panic of the kinds bbolt
// panics with on a damaged page (bboltPanic), or a fault on the memory
// map, turned into an error matching ErrCorrupt that says what was seen
// (see panicSeen); any other panic goes on. bbolt rolls the transaction
// back as the panic unwinds, before anything is written. It begins in
// begin: a panic there, or in the rollback (a damaged free-page list),
// leaves bbolt's writer lock held, and the error is a heldLocks.
func updateRecovered(g *gate, db *bolt.DB, fn func(*bolt.Tx) error) (err error) {
	tx, err := begin(g, db, true)
	if err != nil {
		return err
	}
	rollingBack := false
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if !bboltPanic(p) {
				panic(p) // not bbolt's: a bug in fn, the caller's to see
			}
			err = withKind(ErrCorrupt, "%s", panicSeen(p, panicSite()))
			if rollingBack {
				err = &heldLocks{err}
			}
		}
	}()
	// As bbolt's Update: rolled back however fn or the commit ends, a
	// commit that failed having rolled back already.
	defer func() {
		if tx.DB() != nil {
			rollingBack = true
			_ = tx.Rollback()
			rollingBack = false // fn's or the commit's panic, if any
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// bboltPanic reports whether p, a panic's value, is of a kind bbolt panics
// with on a damaged page.
func bboltPanic(p any) bool {
	switch p.(type) {
	case runtime.Error, string:
		return true
	}
	return false
}

// panicSeen describes the panic p, raised in the function site, for an
// operator who must tell a damaged file from a bug. A runtime error is
// what bbolt raises on a damaged page (a slice out of range, a fault on
// the memory map), but also what a bug raises: where it was raised tells
// them apart better than its kind, though not for certain (the journal's
// own code may fault on a value bbolt read from a damaged page).
func panicSeen(p any, site string) string {
	if strings.HasPrefix(site, "go.etcd.io/bbolt") {
		return fmt.Sprintf("bbolt panicked in %s: %v (as it does on a damaged page)", site, p)
	}
	return fmt.Sprintf("panic in %s, outside bbolt: %v (a bug in idem more likely than a damaged page)", site, p)
}

// panicSite returns the innermost function outside the standard library
// on the stack of the panic under way, or "an unknown function". bbolt's
// search faults inside bytes.Compare (its assembly), the journal's code
// inside the runtime's memmove: the site is their caller. Only a function
// deferred while the panic unwinds may call it: its stack then still
// holds the panicking frames, below the runtime's gopanic.
func panicSite() string {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs[:])])
	unwinding := false
	for {
		f, more := frames.Next()
		// A module's import path starts with a domain; the standard
		// library's ("bytes", "internal/bytealg", "runtime") does not.
		slash := strings.IndexByte(f.Function, '/')
		switch {
		case f.Function == "runtime.gopanic":
			unwinding = true
		case unwinding && slash > 0 && strings.Contains(f.Function[:slash], "."):
			return f.Function
		}
		if !more {
			return "an unknown function"
		}
	}
}

// failure returns the error every call fails with since a commit of the
// file failed after bbolt wrote it, or since a write met a damaged page
// (updateDamaged), or nil.
func (s *Store) failure() error {
	if f := s.failed.Load(); f != nil {
		return *f
	}
	return nil
}

// shows reports whether a reader of the file sees the transaction id (or
// a later one), as it does once bbolt has written its meta page.
func (s *Store) shows(id int) bool {
	if s.held.Load() {
		return true // cannot tell, and bbolt must not be called again
	}
	tx, err := begin(&s.gate, s.db, false)
	if err != nil {
		_ = s.stopUsing(err)
		return true // cannot tell: the worst
	}
	defer endRead(&s.gate, tx)
	return tx.ID() >= id
}

// applyOne writes the logged record e, whose key is rk, into the bbolt
// file with its key and index entries, replacing the version the file
// holds; g reads tx.
func applyOne(tx *bolt.Tx, g *getter, e *logged, rk []byte) error {
	sk, v, err := g.lookup(tx, rk)
	if err != nil {
		return err
	}
	if v == nil {
		return g.addRecord(tx, rk, e.summary(), e.enc)
	}
	old, err := decode(v)
	if err != nil {
		return errorf("record %q in the journal file: %w", rk, err)
	}
	return g.putRecord(tx, sk, rk, old, e.summary(), e.enc)
}

// backPressure makes the committer's leader copy the log into the file
// itself, before its round, when the overlay holds more than overlayMax
// or the log more than four times that (every write appends a whole
// record, and only the file's taking them lets segments go); its error
// (the file cannot be written) fails the round, unwritten.
func (s *Store) backPressure() error {
	if _, b := s.ov.size(); b < s.ap.max && s.log.bytes() < 4*s.ap.max {
		return nil
	}
	if err := s.applyAll(); err != nil {
		// A copy that failed once written (ErrMaybeCommitted) may or may
		// not hold the writes it copied, acknowledged already; nothing
		// of this round was written, and its writers are told so by the
		// Store's failure, not told that their writes may be committed.
		if ferr := s.failure(); ferr != nil && errors.Is(err, ErrMaybeCommitted) {
			err = ferr
		}
		return errorf("the journal file cannot take the log's writes, which are refused until it can: %w", err)
	}
	return nil
}

// Checkpoint copies every write acknowledged so far from the log into the
// file, fsync'd, and deletes the log segments that then hold nothing the
// file lacks. The Store does this by itself in the background, and Close
// does it for the last writes; Checkpoint is for a caller that wants the
// file current at a moment of its choosing (a benchmark that counts all
// of its writes' work, say).
func (s *Store) Checkpoint(ctx context.Context) error {
	if err := s.usable(ctx); err != nil {
		return errorf("journal: checkpoint: %w", err)
	}
	if s.readOnly {
		return errorf("journal: checkpoint: %w", ErrReadOnly)
	}
	if err := s.applyAll(); err != nil {
		return errorf("journal: checkpoint: %w", err)
	}
	return nil
}

// flush applies everything published so far, so that a scan of the bbolt
// file sees every write acknowledged before it began.
func (s *Store) flush() error {
	if s.readOnly {
		return nil
	}
	if s.ov.len() == 0 {
		return nil
	}
	return s.applyAll()
}
