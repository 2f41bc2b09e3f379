package journal

import (
	"bytes"
	"cmp"
	"errors"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The buckets of format version 1: records keyed by their record key
// (scope, NUL, key), so that every record created or settled with a random
// key dirtied a leaf page of its own in a large tree.
var (
	v1Open    = []byte("open")
	v1Done    = []byte("done")
	v1Due     = []byte("due")
	v1Settled = []byte("settled")

	v1Buckets = [][]byte{v1Open, v1Done, v1Due, v1Settled}
)

// migrate brings db, whose file is f, from the format version old to the
// current one, committing through o, or fails with the file unchanged
// (or, if the commit's fdatasync failed, with the marker of a failed
// write beside it: see openCommit).
//
// The migration's write transaction reads every record of a version 1
// file, deletes the buckets it read them from (bbolt walks each of their
// pages to free it), and rewrites the root and meta pages; bbolt trusts
// all of them. A damaged page of an old file made Open panic (an
// assertion on a page's id, a slice out of range, a page freed twice) or
// fault on the memory map, which killed the process; worse, a page whose
// element count a bad block had lowered read as a sound one without the
// elements the count no longer covered, and the migration wrote the file
// back without them: records lost for good, in a file that checked out.
// So the file is checked first, in a read transaction, as a whole: a
// migration runs once per file, and reads most of it anyway. Nothing
// writes the file in between: Open holds its lock, and no Store has it
// yet. The write itself still goes through updateRecovered, in case
// bbolt trips on something the checks let by.
func migrate(db *bolt.DB, f *os.File, old byte, o openCommit) error {
	err := viewRecovered(nil, db, func(tx *bolt.Tx) error { return vetOld(tx, f, old) })
	if err == nil {
		fn := migrateV2
		if old == 1 {
			fn = migrateV1 // which ends with migrateV2
		}
		err = o.update(fn)
	}
	if errors.Is(err, ErrCorrupt) {
		return withKind(ErrCorrupt, "%w; only a file that checks out is migrated: stop, keep a copy of the file, and restore the journal from a backup", err)
	}
	return err
}

// vetOld checks the pages and records of tx, a read transaction of the
// file f in format version old, that a migration reads, frees or
// rewrites, and returns an error matching ErrCorrupt for the first
// problem found. A version 2 file has the current layout: it gets the
// whole of Check. A version 1 file gets bbolt's check once the page
// headers are known to be safe for it (see pageHeaders), and every page
// of the buckets the migration reads and deletes is checked as a scan
// checks the pages it reads (scanCursor): bbolt's check misses a leaf
// whose element count was lowered.
func vetOld(tx *bolt.Tx, f *os.File, old byte) error {
	if old == 2 {
		for _, name := range dataBuckets {
			if tx.Bucket(name) == nil {
				return withKind(ErrCorrupt, "damaged (bucket %q missing)", name)
			}
		}
		problems, err := checkTx(tx, f, nil)
		if err != nil {
			return err
		}
		return damaged(problems)
	}
	if err := pageHeaders(tx, f); err != nil {
		return withKind(ErrCorrupt, "damaged: %v", err)
	}
	var problems []error
	for err := range tx.Check() {
		problems = append(problems, err)
	}
	if err := damaged(problems); err != nil {
		return err
	}
	for _, name := range append([][]byte{bucketMeta}, v1Buckets...) {
		b := tx.Bucket(name)
		if b == nil {
			continue // migrateV1 refuses the file
		}
		c, err := newScanCursor(tx, b, name)
		if err != nil {
			return err
		}
		for k, _, err := c.first(); k != nil || err != nil; k, _, err = c.next() {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// migrated is one record of a version 1 file on its way to version 2.
type migrated struct {
	rk, v []byte // record key and stored encoding (copied as they are)
	// r holds only what the sort and putRecord read (Created, State,
	// NextDue, Settled), not the decoded body and attempts.
	r *Record
}

// migrateV1 rewrites a format version 1 journal in the layout of version
// 2, in tx: the caller's one write transaction, so a crash at any point
// leaves the file as it was (bbolt commits all of it or none of it) and
// the next Open starts again. It holds every record key in memory, and
// bbolt every page it writes until the commit: about the file's size.
//
// Records keep their encoding byte for byte (record versions are not the
// file's). They get sequence numbers in the order they were created, so
// that the open ones, settled later, land near the right edge of the done
// bucket as new records do.
func migrateV1(tx *bolt.Tx) error {
	for _, name := range v1Buckets {
		if tx.Bucket(name) == nil {
			return withKind(ErrCorrupt, "damaged (format version 1 without its bucket %q)", name)
		}
	}
	var recs []migrated
	for _, name := range [][]byte{v1Open, v1Done} {
		// Keys and values are bbolt's memory, valid until the transaction
		// ends: nothing here remaps the file before the puts below hand
		// them to bbolt, which copies them if it remaps while committing.
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			r, err := decode(v)
			if err != nil {
				return errorf("record %q: %w", k, err)
			}
			if !bytes.Equal(k, recordKey(r.Scope, r.Key)) {
				return withKind(ErrCorrupt, "damaged (record %q stored under another key)", k)
			}
			if r.Open() != bytes.Equal(name, v1Open) {
				return withKind(ErrCorrupt, "damaged (record %q in the wrong bucket for state %s)", k, r.State)
			}
			recs = append(recs, migrated{rk: k, v: v, r: &Record{
				Created: r.Created, State: r.State, NextDue: r.NextDue, Settled: r.Settled,
			}})
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(recs, func(a, b migrated) int {
		return cmp.Or(a.r.Created.Compare(b.r.Created), bytes.Compare(a.rk, b.rk))
	})
	for _, name := range dataBuckets {
		if err := tx.DeleteBucket(name); err != nil && err != berrors.ErrBucketNotFound {
			return err
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	tx.Bucket(bucketKeys).FillPercent = appendFill
	for _, m := range recs {
		if err := addRecord(tx, m.rk, m.r, m.v); err != nil {
			return err
		}
	}
	for _, name := range v1Buckets {
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
	}
	return migrateV2(tx)
}

// migrateV2 makes a format version 2 journal a version 3 one: the layout is
// the same; version 3 adds the log beside the file, and the meta entries
// that tie the two together (the journal's id, and the LSN applied, none
// yet). The version tells an older idem, which would not read the log,
// to refuse the file.
func migrateV2(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	id, err := newJournalID()
	if err != nil {
		return err
	}
	if err := meta.Put(metaID, id[:]); err != nil {
		return err
	}
	return meta.Put(metaVersion, []byte{formatVersion})
}
