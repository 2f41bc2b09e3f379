package journal

import (
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// keptRead is a read transaction of the file that the committer keeps from
// round to round. A Create whose key the overlay lacks must look for it in
// the file; beginning and ending a bbolt transaction for each one was, at
// 64 callers with fsync off, a few microseconds and about six allocations per
// operation, inside the round.
//
// A kept transaction must never read an older file than the overlay
// assumes: a record the applier copied into the file and then dropped
// from the overlay would seem absent, a pruned one present. Nor may it
// hold bbolt's mmap lock while a write grows the file: the write would
// wait for it for ever. So every write of the file suspends it first
// (Store.commitBolt, Close): the kept transaction ends, and none is kept
// from the write's begin to its commit except while its function runs,
// when bbolt has changed nothing of the file (Store.runKeeping); reads
// outside that window begin one of their own, as before. A transaction begun after a write's
// commit sees it, and the applier drops records from the overlay only
// after their commit.
type keptRead struct {
	mu        sync.Mutex
	tx        *bolt.Tx
	g         getter
	suspended int   // writes under way; Close suspends for good
	gate      *gate // the Store's: begin.go
}

// lookup is lookup(tx, rk) in the kept transaction, begun now if there is
// none, with a copy of the record's encoding; lookupNew if fresh. ok is
// false, and nothing is read, while a write of the file is under way.
func (k *keptRead) lookup(db *bolt.DB, rk []byte, fresh bool) (enc []byte, ok bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.suspended > 0 {
		return nil, false, nil
	}
	err = readDamaged(func() error {
		if k.tx == nil {
			tx, err := begin(k.gate, db, false)
			if err != nil {
				return err
			}
			k.tx = tx
		}
		var v []byte
		var err error
		if fresh {
			_, v, err = k.g.lookupNew(k.tx, rk)
		} else {
			_, v, err = k.g.lookup(k.tx, rk)
		}
		enc = slices.Clone(v) // the file's bytes: valid only in the transaction
		return err
	})
	if err != nil {
		// Damage, or a file closed under it: the next look begins afresh.
		k.endLocked()
	}
	return enc, true, err
}

// suspend ends the kept transaction and keeps none until resume.
func (k *keptRead) suspend() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.suspended++
	k.endLocked()
}

// resume undoes one suspend.
func (k *keptRead) resume() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.suspended--
}

func (k *keptRead) endLocked() {
	if k.tx != nil {
		endRead(k.gate, k.tx) // a read: nothing to lose
		k.tx, k.g = nil, getter{}
	}
}

// abandon drops the kept transaction without ending it, and keeps none
// from then on: bbolt's locks are held (heldLocks), and ending it would
// wait for them for ever.
func (k *keptRead) abandon() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.suspended++
	k.tx, k.g = nil, getter{}
}
