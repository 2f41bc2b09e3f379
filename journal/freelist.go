package journal

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// bbolt writes its whole freelist (8 bytes per free page) in every commit.
// A journal that pruned a million records holds hundreds of thousands of
// free pages: megabytes written, and allocated, per commit, which made
// commits on such a file 20 times slower than on a fresh one (measured:
// 11.9 ms against 0.53 ms per record, fsync'd). Above freelistUnsyncAbove
// free pages, commits skip the freelist (bbolt's NoFreelistSync, as etcd
// runs it); below freelistSyncBelow they write it again, and Close writes
// it once, so that a journal closed cleanly opens without rebuilding it.
//
// The cost moves to recovery: a journal that was not closed while its
// freelist was unsynced (a crash, a kill) has bbolt rebuild the freelist
// when it is next opened, by walking every page its trees reach, a cost
// that grows with the records it holds (measured on 1M records: 230-290
// ms warm, 13.6 s cold). Durability is unchanged: the freelist is derived
// data, and bbolt's recovery from an unsynced one is part of its design.
const (
	freelistUnsyncAbove = 4096 // a 32 KiB freelist per commit
	freelistSyncBelow   = 1024
)

// tuneFreelist decides, before a commit, whether the commit writes the
// freelist. Only the committer's leader calls it, between transactions.
func tuneFreelist(db *bolt.DB) {
	st := db.Stats()
	n := st.FreePageN + st.PendingPageN
	switch {
	case !db.NoFreelistSync && n > freelistUnsyncAbove:
		db.NoFreelistSync = true
	case db.NoFreelistSync && n < freelistSyncBelow:
		db.NoFreelistSync = false
	}
}

// syncFreelist writes the freelist, with an empty commit through o, if
// the last commit skipped it. Close calls it once the log is deleted and
// no commit follows, so tuneFreelist, which would skip it again on a file
// with many free pages, is not called. The commit writes a new meta page
// naming the new freelist page: bbolt's bare Update left no marker when
// its fdatasync failed, Close said the journal was intact, and the next
// Open, in the same boot, trusted a meta page and a freelist the disk may
// not hold (a freelist naming pages in use, which later commits then
// overwrite). openCommit leaves the marker.
func syncFreelist(o openCommit) error {
	if !o.db.NoFreelistSync {
		return nil
	}
	o.db.NoFreelistSync = false
	return o.update(func(*bolt.Tx) error { return nil })
}

// flushFreelist does what bolt.Open does for a file whose last commit
// skipped the freelist, which Open keeps it from doing (NoFreelistSync)
// until rewriteAfterFailure is done: it writes the freelist, with an empty
// commit, so that a release of bbolt that does not know unsynced
// freelists can read the file. db's file is f, locked for writing; o
// commits to db.
func flushFreelist(db *bolt.DB, f *os.File, o openCommit) error {
	db.NoFreelistSync = false
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	m, ok, err := newestMeta(f, fi.Size())
	if err != nil || !ok || m.freelist != noFreelist {
		return err
	}
	return o.update(func(*bolt.Tx) error { return nil })
}
