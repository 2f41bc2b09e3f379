package journal

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// logged is a record as a write left it: durable in the log, and in the
// bbolt file only once the applier has copied it there. It never changes
// after it is published; a later write of the record publishes another.
type logged struct {
	rk  string // record key (scope, NUL, key)
	lsn uint64
	enc []byte // the record's encoding, the Store's own
	// What the indexes need of the record, so that applying it decodes
	// nothing.
	open    bool
	nextDue time.Time
	settled time.Time
	// since is when the record's oldest version not yet in the file was
	// published (zero for what Open read back from the log): the applier
	// holds a young open record back, so that an operation created and
	// settled within holdFor reaches the file once, settled.
	since time.Time
}

func newLogged(rk string, r *Record, enc []byte) *logged {
	return &logged{rk: rk, enc: enc, open: r.Open(), nextDue: r.NextDue, settled: r.Settled}
}

// summary is the part of the record putRecord reads.
func (e *logged) summary() *Record {
	r := &Record{State: StatePending, NextDue: e.nextDue, Settled: e.settled}
	if !e.open {
		r.State = StateSucceeded // any terminal state: putRecord only asks Open
	}
	return r
}

// overlay holds the latest logged version of every record written since the
// applier last copied the log into the bbolt file: reads look here first.
//
// The applier removes an entry only after the bbolt transaction holding it
// has committed, and only if it is still the record's latest; a reader
// that misses here and then opens a bbolt transaction (in that order)
// therefore always finds the latest version in one of the two.
type overlay struct {
	mu    sync.RWMutex
	m     map[string]*logged
	bytes int64  // the encodings' total size
	last  uint64 // the highest LSN published
}

// get returns the record's latest logged version, or nil.
func (o *overlay) get(rk []byte) *logged {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.m[string(rk)]
}

// publish makes a round's entries, now durable, visible to readers; at is
// when (zero for entries read back from the log).
func (o *overlay) publish(entries []*logged, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]*logged)
	}
	for _, e := range entries {
		e.since = at
		if old := o.m[e.rk]; old != nil {
			o.bytes -= int64(len(old.enc))
			e.since = old.since
		}
		o.m[e.rk] = e
		o.bytes += int64(len(e.enc))
		o.last = max(o.last, e.lsn)
	}
}

// lastLSN returns the highest LSN published.
func (o *overlay) lastLSN() uint64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.last
}

// len returns how many records the overlay holds.
func (o *overlay) len() int {
	n, _ := o.size()
	return n
}

// size returns how many records and bytes the overlay holds.
func (o *overlay) size() (int, int64) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return len(o.m), o.bytes
}

// batch returns up to limit entries, oldest LSN first, and the LSN through
// which bbolt holds every write once they are applied: every entry at or
// below it is in the batch or was superseded by a later version of its
// record, which a later batch applies (and which replaces it on recovery).
// Only entries up to LSN upTo are taken, and open records whose oldest
// unapplied version was published after holdAfter are held back (none
// with a zero holdAfter): the LSN the batch covers then stops below the
// first of them.
func (o *overlay) batch(limit int, upTo uint64, holdAfter time.Time) ([]*logged, uint64) {
	o.mu.RLock()
	out := make([]*logged, 0, min(len(o.m), limit))
	through := min(o.last, upTo)
	for _, e := range o.m {
		if e.lsn > upTo {
			// Published since the pass began: the next pass's.
			continue
		}
		if e.open && !holdAfter.IsZero() && e.since.After(holdAfter) {
			through = min(through, e.lsn-1)
			continue
		}
		out = append(out, e)
	}
	o.mu.RUnlock()
	slices.SortFunc(out, func(a, b *logged) int { return cmp.Compare(a.lsn, b.lsn) })
	if len(out) > limit {
		out = out[:limit]
		through = min(through, out[limit-1].lsn)
	}
	return out, through
}

// drop removes the applied entries that are still their records' latest.
func (o *overlay) drop(applied []*logged) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range applied {
		if o.m[e.rk] == e {
			delete(o.m, e.rk)
			o.bytes -= int64(len(e.enc))
		}
	}
}

// all returns the overlay's entries, in no order.
func (o *overlay) all() []*logged {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]*logged, 0, len(o.m))
	for _, e := range o.m {
		out = append(out, e)
	}
	return out
}

// view is what one round of writes reads and stages: each request reads
// the latest version of a record from the round's own staged writes, the
// overlay or the bbolt file, in that order, and stages at most one write
// as its last step.
type view struct {
	s     *Store
	order []*logged // the staged writes, in order
	// index finds a record's latest staged write once the round has more
	// than stagedScan of them; a smaller round is searched in order, and
	// builds no map (most rounds carry a few writes).
	index   map[string]*logged
	pending *logged // the current request's write, until it returns nil
	// read is the record key of the last write get found, which put
	// reuses rather than convert rk again.
	read string
	// first holds order's first writes: most rounds stage a few.
	first [8]*logged
}

// stagedScan is how many staged writes a view searches one by one before
// it indexes them.
const stagedScan = 16

// reset makes v an empty view of s, keeping nothing of its last round
// but its first array (cleared).
func (v *view) reset(s *Store) {
	*v = view{s: s}
	v.order = v.first[:0]
}

// get returns the current encoding of the record rk, or nil; the caller
// must not change it.
func (v *view) get(rk []byte) ([]byte, error) { return v.getAs(rk, false) }

// getNew is get of a record key that is likely absent, a create's: the
// file is looked up by lookupNew.
func (v *view) getNew(rk []byte) ([]byte, error) { return v.getAs(rk, true) }

// getAs is get and getNew: fresh says rk is a key being created, whose
// miss in the file lookupNew may take without bbolt's search.
func (v *view) getAs(rk []byte, fresh bool) ([]byte, error) {
	if e := v.staged(rk); e != nil {
		v.read = e.rk
		return e.enc, nil
	}
	enc, key, err := v.s.latestKeyed(rk, true, fresh)
	if key != "" {
		v.read = key
	}
	return enc, err
}

// staged returns the round's latest staged write of the record rk, or nil.
func (v *view) staged(rk []byte) *logged {
	if v.index != nil {
		return v.index[string(rk)]
	}
	for i := len(v.order) - 1; i >= 0; i-- {
		if v.order[i].rk == string(rk) {
			return v.order[i]
		}
	}
	return nil
}

// latest returns the encoding of the latest version of the record rk: the
// overlay's, or a copy of the file's; nil if there is none.
func (s *Store) latest(rk []byte) ([]byte, error) {
	enc, _, err := s.latestKeyed(rk, false, false)
	return enc, err
}

// latestKeyed is latest that also returns, when the overlay holds the
// record, its entry's record key: rk as a string, already made. The
// committer's rounds (kept) read the file in the transaction they keep.
// fresh looks the file up by lookupNew (a create's key, likely absent).
func (s *Store) latestKeyed(rk []byte, kept, fresh bool) (enc []byte, key string, err error) {
	// The read lock keeps the applier from removing the record from the
	// overlay between the miss there and the read of the file, which
	// would then be older than the write the applier copied.
	s.ov.mu.RLock()
	defer s.ov.mu.RUnlock()
	if e := s.ov.m[string(rk)]; e != nil {
		return e.enc, e.rk, nil
	}
	if err := s.failure(); err != nil {
		return nil, "", err // a round begun before the file's commit failed
	}
	if kept {
		if enc, ok, err := s.kept.lookup(s.db, rk, fresh); ok {
			return enc, "", s.stopUsing(err)
		}
	}
	err = viewRecovered(&s.gate, s.db, func(tx *bolt.Tx) error {
		var v []byte
		var err error
		if fresh {
			_, v, err = (*getter)(nil).lookupNew(tx, rk)
		} else {
			_, v, err = lookup(tx, rk)
		}
		// A copy: the file's bytes last only as long as the
		// transaction, and the caller's function runs after it.
		enc = slices.Clone(v)
		return err
	})
	return enc, "", s.stopUsing(err)
}

// put stages the current request's write of r, encoded as enc (which the
// Store owns from now on).
func (v *view) put(rk []byte, r *Record, enc []byte) {
	key := v.read
	if key != string(rk) {
		key = string(rk)
	}
	v.putIn(new(logged), key, r, enc)
}

// putIn is put that stages e, a zero logged the write's op holds (see
// createOp.entry), rather than allocating one: the overlay keeps e once
// published, so e must be used for no other write. key is the record key
// as a string, the op's own (opKey).
func (v *view) putIn(e *logged, key string, r *Record, enc []byte) {
	*e = logged{rk: key, enc: enc, open: r.Open(), nextDue: r.NextDue, settled: r.Settled} // newLogged's fields
	v.pending = e
}

// opKey is rk, a create's or an update's record key (recordKeyIn, in the
// op's rkRoom or a slice of its own), as a string sharing its bytes: the
// overlay's entry and map key, which converting rk cost an allocation
// on every create (an update's read mostly finds the overlay's string
// already). Sound because nothing writes rk after recordKeyIn made it
// (its readers only look keys up), and the entry the string is kept
// with lives in the same op (createOp.entry, updateOp.entry), which a
// pointer into it keeps alive as long as the overlay holds either.
func opKey(rk []byte) string {
	return unsafe.String(unsafe.SliceData(rk), len(rk))
}

// settle keeps or drops the current request's staged write.
func (v *view) settle(keep bool) {
	if keep && v.pending != nil {
		v.order = append(v.order, v.pending)
		switch {
		case v.index != nil:
			v.index[v.pending.rk] = v.pending
		case len(v.order) > stagedScan:
			v.index = make(map[string]*logged, 2*len(v.order))
			for _, e := range v.order { // in order: the latest write of a record wins
				v.index[e.rk] = e
			}
		}
	}
	v.pending = nil
}

// writes returns the round's writes, in order.
func (v *view) writes() []*logged { return v.order }

// scan runs fn in a read transaction of the file, once the file holds
// every write acknowledged so far.
func (s *Store) scan(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	return s.view(ctx, fn)
}

// overlaid returns, decoded, the logged writes a scan of the file misses:
// those of a read-only Store over a log that a process which stopped
// without closing the journal left (nothing can be applied without the
// write lock). A Store open for writing applies the log before it scans
// (scan), and returns nil.
func (s *Store) overlaid() []*Record {
	if !s.readOnly {
		return nil
	}
	entries := s.ov.all()
	if len(entries) == 0 {
		return nil
	}
	// In the order they were written: the order the applier would give
	// the new ones their sequence numbers in (dueOrder).
	slices.SortFunc(entries, func(a, b *logged) int { return cmp.Compare(a.lsn, b.lsn) })
	out := make([]*Record, 0, len(entries))
	for _, e := range entries {
		// The entries were decoded once when Open read the log.
		r, err := decode(e.enc)
		if err == nil {
			out = append(out, r)
		}
	}
	return out
}

// forEachOpenOverlaid is ForEachOpen on a read-only Store with logged
// writes: every open record, merged, in one pass.
func (s *Store) forEachOpenOverlaid(ctx context.Context, over []*Record, fn func(*Record) error) error {
	recs, seqs, err := s.due(ctx, endOfTime, 0)
	if err != nil {
		return errorf("journal: for each open: %w", err)
	}
	order, err := s.dueOrder(ctx, recs, seqs, over)
	if err != nil {
		return errorf("journal: for each open: %w", err)
	}
	recs = merge(recs, over, (*Record).Open, order, 0)
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// endOfTime is after every NextDue (timeKey clamps it to the last key).
var endOfTime = time.Unix(1<<62, 0)

// widen is the limit a read of the file needs so that merging the logged
// writes over into its result still leaves limit records: each of them
// can displace at most one.
func widen(limit int, over []*Record) int {
	if limit <= 0 || len(over) == 0 {
		return limit
	}
	return limit + len(over)
}

// merge replaces in recs (read from the file, in order) every record of
// which over holds a later version with that version if match selects
// it, adds the other records of over that match selects, sorts the whole
// by order (stable: records equal by it keep the file's order) and keeps
// the first limit (all when limit <= 0).
func merge(recs, over []*Record, match func(*Record) bool, order func(a, b *Record) int, limit int) []*Record {
	newer := make(map[string]bool, len(over))
	for _, r := range over {
		newer[r.Scope+"\x00"+r.Key] = true
	}
	out := recs[:0:0]
	for _, r := range recs {
		if !newer[r.Scope+"\x00"+r.Key] {
			out = append(out, r)
		}
	}
	for _, r := range over {
		if match(r) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, order)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// dueOrder orders records as the due index does once the log is applied:
// soonest NextDue first, then by sequence number. recs, read from the
// file, have theirs in seqs; a record of over keeps the file's number if
// the file holds it, and otherwise gets the next ones, in the order the
// log holds them (over's), as the applier would give them.
func (s *Store) dueOrder(ctx context.Context, recs []*Record, seqs []uint64, over []*Record) (func(a, b *Record) int, error) {
	seq := make(map[*Record]uint64, len(recs)+len(over))
	for i, r := range recs {
		seq[r] = seqs[i]
	}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		keys := tx.Bucket(bucketKeys)
		next := keys.Sequence()
		for _, r := range over {
			sk := keys.Get(recordKey(r.Scope, r.Key))
			if len(sk) == seqKeySize {
				seq[r] = binary.BigEndian.Uint64(sk)
				continue
			}
			next++
			seq[r] = next
		}
		return nil
	})
	return func(a, b *Record) int {
		return cmp.Or(cmp.Compare(timeKey(a.NextDue), timeKey(b.NextDue)), cmp.Compare(seq[a], seq[b]))
	}, err
}

// byKey orders records as List returns them: by scope, then key.
func byKey(a, b *Record) int {
	return cmp.Or(strings.Compare(a.Scope, b.Scope), strings.Compare(a.Key, b.Key))
}
