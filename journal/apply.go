package journal

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Applying the log to the bbolt file.
const (
	// applyDelay is how long the applier lets writes gather after the
	// first one it has not applied: the longer, the more records are
	// created and settled before they reach bbolt, which then writes each
	// once, and the fewer bbolt commits (each one two fsyncs).
	applyDelay = 100 * time.Millisecond
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
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  bool          // Close has made its last apply
	delay   time.Duration // applyDelay; tests shorten or lengthen it
	max     int64         // overlayMax; tests lower it
	// failApply, when a test sets it, stands in for the bbolt commit of an
	// apply.
	failApply func() error
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
			if n, b := s.ov.size(); failing || n < applyEntries && b < applyBytes {
				arm(a.delay)
				continue
			}
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
			timer, fire = nil, nil
		}
		if err := s.applyAll(); err != nil {
			// The writes are safe in the log; the next try, or Open,
			// applies them.
			failing = true
			arm(applyRetry)
		} else if failing = false; s.ov.len() > 0 {
			arm(a.delay)
		}
	}
}

// applyAll copies everything published so far into the bbolt file.
func (s *Store) applyAll() error {
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	return s.applyLocked()
}

// applyLocked is applyAll with the applier's mutex held.
func (s *Store) applyLocked() error {
	if s.ap.closed {
		return ErrClosed
	}
	for {
		batch, through := s.ov.batch(applyBatch)
		if through <= s.ap.applied {
			return nil
		}
		err := s.commitBolt(func(tx *bolt.Tx) error {
			for _, e := range batch {
				if err := applyOne(tx, e); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(metaApplied, binary.BigEndian.AppendUint64(nil, through))
		})
		if err != nil {
			return errorf("applying the log to the journal file (the writes are safe in the log): %w", err)
		}
		s.ap.applied = through
		s.ov.drop(batch)
		// A segment that cannot be deleted now is deleted after a later
		// apply; it only takes disk space.
		_ = s.log.deleteApplied(through, false)
	}
}

// commitBolt runs fn in a bbolt write transaction and commits it. Only the
// holder of the applier's mutex calls it (or Open, before any write).
func (s *Store) commitBolt(fn func(*bolt.Tx) error) error {
	if s.ap.failApply != nil {
		if err := s.ap.failApply(); err != nil {
			return err
		}
	}
	tuneFreelist(s.db)
	return s.db.Update(fn)
}

// applyOne writes the logged record e into the bbolt file with its key
// and index entries, replacing the version the file holds.
func applyOne(tx *bolt.Tx, e *logged) error {
	rk := []byte(e.rk)
	sk, v, err := lookup(tx, rk)
	if err != nil {
		return err
	}
	if v == nil {
		return addRecord(tx, rk, e.summary(), e.enc)
	}
	old, err := decode(v)
	if err != nil {
		return errorf("record %q in the journal file: %w", rk, err)
	}
	return putRecord(tx, sk, rk, old, e.summary(), e.enc)
}

// backPressure makes the committer's leader copy the log into the file
// itself, before its round, when the overlay holds more than overlayMax;
// its error (the file cannot be written) fails the round, unwritten.
func (s *Store) backPressure() error {
	if _, b := s.ov.size(); b < s.ap.max {
		return nil
	}
	if err := s.applyAll(); err != nil {
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
