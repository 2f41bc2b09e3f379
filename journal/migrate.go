package journal

import (
	"bytes"
	"cmp"
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
