package journal

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
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
	err := readDamaged(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
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
			return nil
		})
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
	entries := make([]*logged, 0, len(st.entries))
	for _, e := range st.entries {
		r, err := decode(e.payload)
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
			return err
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
	s.log = &logWriter{dir: dir, base: base, id: id, noSync: cfg.noSync, next: st.next, gen: st.maxGen, segments: segs,
		// Segments small enough that the bound on the log (backPressure)
		// leaves room for several.
		maxSize: min(segmentSize, s.ap.max/2)}
	s.c = newCommitter(s)
	s.ap.delay = cfg.applyDelay
	s.startApplier()
	if len(entries) > 0 {
		s.kickApplier()
	}
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

// syncFile fdatasyncs the file at path.
func syncFile(path string, fail func(path string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fail != nil {
		if err := fail(path); err != nil {
			return err
		}
	}
	return fdatasync(f)
}
