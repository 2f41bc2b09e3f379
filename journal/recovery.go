package journal

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// logLocation returns the directory and base name the journal's log
// segments are named after: those of the file itself, not of a symbolic
// link to it, so that every path to one journal finds one log.
func logLocation(path string) (dir, base string) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Dir(path), filepath.Base(path)
}

// newJournalID returns a new journal id.
func newJournalID() ([16]byte, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return id, errorf("new journal id: %w", err)
	}
	return id, nil
}

// openLog reads the journal's log back (Open): every write it holds that
// the bbolt file does not goes into the overlay, where reads find it and
// from where the applier copies it into the file. Opened for writing, the
// Store then appends to a new segment and starts the applier.
func (s *Store) openLog(cfg *config) error {
	var id [16]byte
	var applied uint64
	var dep logDep
	err := viewRecovered(&s.gate, s.db, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(metaID); len(v) {
		case 0: // format version 2, read-only: no log
		case len(id):
			copy(id[:], v)
		default:
			return withKind(ErrCorrupt, "damaged (a journal id of %d bytes)", len(v))
		}
		switch v := meta.Get(metaApplied); len(v) {
		case 0:
		case 8:
			applied = binary.BigEndian.Uint64(v)
		default:
			return withKind(ErrCorrupt, "damaged (an applied log position of %d bytes)", len(v))
		}
		switch v := meta.Get(metaLogDep); len(v) {
		case 0:
		case 16:
			dep.gen, dep.applied = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		default:
			return withKind(ErrCorrupt, "damaged (a log dependency of %d bytes)", len(v))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// From the absolute path: a process that changes its working
	// directory must not start segments in the new one.
	dir, base := logLocation(cmp.Or(s.abs, s.path))
	st, err := scanLog(dir, base, id, applied)
	if err != nil {
		return err
	}
	missing := dep.check(dir, base, applied, st.maxGen)
	if missing == nil {
		missing = dep.checkSeals(dir, base, applied, st.segments)
	}
	if err := missing; err != nil {
		switch {
		case s.readOnly:
			// Nothing is changed, and the operator reads what is left;
			// Inspect reports it as a problem.
			s.logMissing = err
			if s.logger != nil {
				s.logger.Warn(err.Error(), slog.String("journal", s.path))
			}
		case !cfg.acceptLostLog:
			return err
		case s.logger != nil:
			s.logger.Warn("journal: opened without the log segments it depended on (AcceptLostLog): the acknowledged writes they held are lost", slog.String("journal", s.path), slog.String("missing", err.Error()))
		}
	}
	entries := make([]*logged, 0, len(st.entries))
	for _, e := range st.entries {
		r, err := decode(e.payload)
		if errors.Is(err, ErrVersion) {
			return errorf("log entry %d: %w; %s", e.lsn, err, newerLogAdvice)
		}
		if err != nil {
			return errorf("log entry %d: %w", e.lsn, err)
		}
		l := newLogged(string(recordKey(r.Scope, r.Key)), r, e.payload)
		l.lsn = e.lsn
		entries = append(entries, l)
	}
	s.ov.publish(entries, time.Time{})
	s.ap.applied, s.ap.opened = applied, applied
	if s.readOnly {
		return nil
	}
	// The entries read back may be in the page cache only: a process
	// killed after a round's write and before its fdatasync returned
	// leaves them there. From here on they count as written (readers see
	// them, and the next segment starts after them, voiding none), so
	// they go to the disk first. Otherwise a power cut loses them while
	// this process's later rounds, fsync'd in the new segment, survive:
	// the next Open finds a hole (ErrCorrupt), after this process may
	// have sent the requests of records that are gone.
	if !cfg.noSync {
		if err := syncRecovered(dir, st.segments, applied, cfg.failSync); err != nil {
			// Only an fdatasync that failed may have left pages marked
			// clean that the disk lacks; a segment or the directory that
			// could not be opened (EMFILE, EACCES) was synced no worse
			// than before, and its marker made the next Open write the
			// whole journal again, with warnings, for nothing.
			var sf syncFailed
			if !errors.As(err, &sf) {
				return err
			}
			return unmarked(err, markWriteFailed(dir, base, err))
		}
	}
	// A segment without a header holds nothing; left in the list, its
	// zero start would make the one before it look applied.
	segs := st.segments[:0:0]
	for _, seg := range st.segments {
		if seg.blank {
			if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return errorf("log segment %s holds nothing (a crash while it was created) but cannot be removed: %w; remove it by hand", filepath.Base(seg.path), err)
			}
			continue
		}
		segs = append(segs, seg)
	}
	s.ap.max = cmp.Or(cfg.overlayMax, overlayMax)
	s.log = &logWriter{dir: dir, base: base, id: id, noSync: cfg.noSync, next: st.next, segments: segs, failWrite: cfg.failLogWrite,
		// Past the generation the file depends on, even if its segments
		// are gone (AcceptLostLog): a new segment then satisfies it.
		gen: max(st.maxGen, dep.gen),
		// Segments small enough that the bound on the log (backPressure)
		// leaves room for several.
		maxSize: min(segmentSize, s.ap.max/2)}
	if dep.applied == applied {
		// A stale field (an earlier release applied more since) names no
		// log: the applier must not record it again (applyUpTo).
		s.ap.dep.Store(dep.gen)
	}
	s.ap.failCommit = cfg.failCommit
	s.ap.failFreelist = cfg.failFreelist
	if missing != nil {
		// Accepted (AcceptLostLog): recorded now, so that the next Open
		// does not refuse the journal again, whether or not a write
		// comes first. The file names a new segment, newer than every
		// one on disk: present, it satisfies check, and checkSeals
		// looks at no older segment, whose seal may name the one lost.
		// (Naming no log would not do: checkSeals reads seals then too,
		// as a file whose commits failed names no log while the log
		// takes writes.)
		if err := s.log.rotate(); err != nil {
			return errorf("starting the log the journal goes on with, without its missing segments, failed (nothing was changed): %w; "+
				"check that %s is writable and has space, then open the journal again with AcceptLostLog", err, dir)
		}
		gen := s.log.dep.Load()
		if err := s.commitBolt(func(tx *bolt.Tx) error { return putApplied(tx, &getter{}, applied, gen) }); err != nil {
			s.log.close()
			// The new segment satisfies the file's dependency (check): the
			// next Open goes on without AcceptLostLog.
			return errorf("recording in the journal file that it goes on without its missing log failed (%w); a new, empty log segment was started, with which the next Open goes on: "+
				"check the disk (space, errors in the system log), then open the journal again", err)
		}
		s.ap.dep.Store(gen)
	}
	s.c = newCommitter(s)
	s.ap.delay = cfg.applyDelay
	s.startApplier()
	if len(entries) > 0 {
		s.kickApplier()
	}
	return nil
}

// logDep is what the file records of the log it depends on (metaLogDep):
// gen is the generation of the segment that writes went to when the file
// last recorded applied (the LSN up to which it holds every write), 0 when
// it holds every acknowledged write. A write is acknowledged once it is
// in the log, and reaches the file up to a second later: a process killed
// in between leaves it in the log alone, and a log that then goes missing
// while the process is down (the file copied alone to another host, a
// cleanup job deleting "*.log*", a backup restored without its segments,
// a file mounted by itself where statx cannot tell, see checkMount) lost
// it. Open found no segment, went on from applied, and the write was gone
// without a word: an operation journaled, perhaps sent, never resumed.
//
// Segments are deleted only once applied, oldest first, never the one
// writes go to, so a whole log always holds a segment of generation gen
// or newer; a lost older one leaves a hole scanLog refuses. Clean Close
// and Compact's copy record 0 before the log is deleted. applied is
// metaApplied as of the same commit: an older idem, which does not know
// the field, may have applied more since, and deleted the log on its
// Close; then the field no longer says anything.
type logDep struct{ gen, applied uint64 }

// check returns an error matching ErrLogMissing when the file depends on
// a generation of the log of base in dir of which no segment, nor a newer
// one, was found (newest is the newest generation found).
func (d logDep) check(dir, base string, applied, newest uint64) error {
	if d.gen == 0 || d.applied != applied || newest >= d.gen {
		return nil
	}
	return withKind(ErrLogMissing, "the journal file depends on its log from segment %s on (the writes after entry %d), "+
		"and %s holds no such segment, nor a newer one: writes acknowledged before the process stopped may be lost "+
		"(the file copied or restored without its %s%s* segments, or the segments deleted). "+
		"Put the segments back beside the file, as they were, and open it again "+
		"(if an earlier idem release opened and closed this journal since this one stopped, it deleted them having applied them: nothing is lost, and AcceptLostLog is safe); "+
		"if they are gone for good, open it once with journal.AcceptLostLog (idem compact -accept-lost-log) to go on without them, knowing that those writes are lost",
		filepath.Base(segmentPath(dir, base, d.gen)), applied, dir, base, logInfix)
}

// checkSeals returns an error matching ErrLogMissing when a segment of the
// log of base in dir that the file depends on (check), or a later one,
// says that the log goes on in a generation of which no segment, nor a
// newer one, is in segs (those scanLog found): the file names only the
// segment writes went to when it was last written, and a process killed
// after the log moved on to a new segment, before the applier's next
// commit, left writes in that one alone. Segments are deleted oldest
// first, so a sealed one on disk without its successor is a loss (a
// backup that listed the directory before the rotation, the newer
// segment deleted). A stale field says nothing (an earlier release may
// have applied more, and numbered its own segments).
//
// A file that names no log (gen 0) is read too: it names none when it
// holds every write, but also when dependOnLog's commit failed (the file
// could not be written, a full disk, while the log took the writes, and
// rotated), and then a sealed segment without its successor lost writes
// as surely. There, a seal counts only if the successor began with an
// entry the file lacks: a file that holds everything (its active segment
// found gone, applied, and the older ones not yet deleted) lost nothing.
func (d logDep) checkSeals(dir, base string, applied uint64, segs []segment) error {
	if d.applied != applied {
		return nil
	}
	var newest uint64
	for _, seg := range segs {
		if !seg.blank {
			newest = max(newest, seg.gen)
		}
	}
	for _, seg := range segs {
		if seg.blank || seg.gen < d.gen || seg.sealed == 0 || newest >= seg.sealed || (d.gen == 0 && seg.end <= applied) {
			continue
		}
		return withKind(ErrLogMissing, "log segment %s says the log goes on in segment %s (the writes from entry %d on), "+
			"and %s holds no such segment, nor a newer one: writes acknowledged before the process stopped may be lost "+
			"(the file and its log copied or restored without their newest %s%s* segment, or that segment deleted). "+
			"Put the segments back beside the file, as they were, and open it again; "+
			"if they are gone for good, open it once with journal.AcceptLostLog (idem compact -accept-lost-log) to go on without them, knowing that those writes are lost",
			filepath.Base(seg.path), filepath.Base(segmentPath(dir, base, seg.sealed)), seg.end, dir, base, logInfix)
	}
	return nil
}

// dependOnLog makes sure, before a round is written to the log, that the
// file names a log segment it depends on (metaLogDep) of which one at
// least is on disk: the round's writes are acknowledged once logged, and
// a process killed before the applier's next commit leaves them in the
// log alone. A Store's first round, and the first after the active
// segment was found gone, start their segment here and commit its
// generation to the file first; every other round finds both set (two
// atomic loads). A later segment (one started when the last grew full,
// or after a failed write) gets no commit, which would hold a round behind
// the applier: the one the file names, or a newer one, stays on disk until
// Close, and a full segment's seal names its successor (checkSeals). The
// segment started after a failed write is not named: the window until the
// applier's next commit stays open there.
func (s *Store) dependOnLog() error {
	if s.ap.dep.Load() != 0 && s.log.dep.Load() != 0 {
		return nil
	}
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	if s.ap.closed {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	s.stopMu.Lock()
	var err error
	if s.log.dep.Load() == 0 {
		// No segment known on disk: before the first round, or the
		// active one was found gone (renew). Started here, under
		// stopMu as append's own would be; append then writes to it.
		s.log.renew.Store(false)
		if err = s.log.rotate(); err != nil {
			err = errorf("%w (%w)", err, errLogPoisoned)
		}
	}
	dep := s.log.dep.Load()
	s.stopMu.Unlock()
	if err != nil {
		return err
	}
	if s.ap.dep.Load() == dep {
		return nil
	}
	err = s.commitBolt(func(tx *bolt.Tx) error {
		return putApplied(tx, &getter{}, s.ap.applied, dep)
	})
	if err != nil {
		if ferr := s.failure(); ferr != nil {
			// The file failed once written: nothing more goes to it or
			// to the log, and this round is not written.
			return ferr
		}
		// The file cannot be written (a full disk, say) while the log
		// can: the log keeps taking writes, as it does for the applier,
		// and the applier's next commit records the segment.
		return nil
	}
	s.ap.dep.Store(dep)
	return nil
}

// syncRecovered makes durable the segments that hold entries past
// applied, which Open has read back and builds on, and those that start
// past it, which void what a failed write left in the ones before them,
// with their names; fail, when a test sets it, stands in for each
// fdatasync.
func syncRecovered(dir string, segs []segment, applied uint64, fail func(path string) error) error {
	n := 0
	for _, seg := range segs {
		if seg.blank || (seg.start <= applied && seg.end <= applied+1) {
			continue // nothing the file lacks
		}
		if err := syncFile(seg.path, fail); err != nil {
			return errorf("log segment %s: making the writes it holds durable failed (%w); nothing was changed: check the disk, then open the journal again", filepath.Base(seg.path), err)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	// A process killed in rotate, between the new segment's fdatasync
	// and the directory's, left a segment whose name a power cut undoes.
	if err := syncDir(dir); err != nil {
		return errorf("the log's directory %s: making its segments' names durable failed (%w); nothing was changed: check the disk, then open the journal again", dir, err)
	}
	return nil
}

// syncFailed is the error of an fdatasync (or fsync) itself, as against
// that of opening the file to sync: only the former may have left the
// file's pages marked clean though the disk lacks them (see
// writeFailedSuffix).
type syncFailed struct{ error }

func (e syncFailed) Unwrap() error { return e.error }

// syncFile fdatasyncs the file at path.
func syncFile(path string, fail func(path string) error) error {
	return syncOpened(path, fail, fdatasync)
}

// syncOpened opens path and syncs it with sync, whose error (or fail's,
// when a test sets it, standing in for it) it returns as syncFailed.
func syncOpened(path string, fail func(path string) error, sync func(*os.File) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fail != nil {
		if err := fail(path); err != nil {
			return syncFailed{err}
		}
	}
	if err := sync(f); err != nil {
		return syncFailed{err}
	}
	return nil
}
