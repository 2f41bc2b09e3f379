package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names. Records are keyed by recordKey; the two indexes are keyed
// by an 8-byte sortable time followed by the record key, with empty values.
//
// The open index holds every non-terminal record at its NextDue, so Due and
// ForEachOpen never touch settled records. The settled index holds every
// terminal record at its Settled time, so Prune's cost grows with what it
// deletes. Both are changed in the same transaction as the record.
var (
	bucketMeta    = []byte("meta")
	bucketRecords = []byte("records")
	bucketOpen    = []byte("open")
	bucketSettled = []byte("settled")

	metaMagic   = []byte("magic")
	metaVersion = []byte("version")
	magicValue  = []byte("idem-journal")
)

const timeKeySize = 8

// recordKey joins scope and key with a NUL, which validate forbids in both,
// so distinct (scope, key) pairs never collide.
func recordKey(scope, key string) []byte {
	k := make([]byte, 0, len(scope)+1+len(key))
	k = append(k, scope...)
	k = append(k, 0)
	return append(k, key...)
}

// timeKey maps t to 8 bytes whose byte order is time order: Unix
// nanoseconds with the sign bit flipped. Times outside the range of
// UnixNano (years 1678 to 2262), including the zero time, are clamped, so
// a zero NextDue sorts first: due at once.
func timeKey(t time.Time) uint64 {
	const maxSec = math.MaxInt64 / int64(time.Second)
	if s := t.Unix(); t.IsZero() || s <= -maxSec {
		return 0
	} else if s >= maxSec {
		return math.MaxUint64
	}
	return uint64(t.UnixNano()) ^ (1 << 63)
}

func indexKey(t time.Time, rk []byte) []byte {
	k := make([]byte, timeKeySize, timeKeySize+len(rk))
	binary.BigEndian.PutUint64(k, timeKey(t))
	return append(k, rk...)
}

// indexEntry is the index bucket and key a record belongs under.
func indexEntry(tx *bolt.Tx, r *Record, rk []byte) (*bolt.Bucket, []byte) {
	if r.Open() {
		return tx.Bucket(bucketOpen), indexKey(r.NextDue, rk)
	}
	return tx.Bucket(bucketSettled), indexKey(r.Settled, rk)
}

// putRecord writes the encoding of r and moves its index entry from where
// old (nil for a new record) had it to where r belongs.
func putRecord(tx *bolt.Tx, rk []byte, old, r *Record, enc []byte) error {
	if err := tx.Bucket(bucketRecords).Put(rk, enc); err != nil {
		return err
	}
	if old != nil {
		b, k := indexEntry(tx, old, rk)
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	b, k := indexEntry(tx, r, rk)
	return b.Put(k, nil)
}

// check verifies the indexes against the records: every record decodes,
// and each index holds exactly the records that belong in it, under the
// right time. It reads the whole journal; it is for tests and tools.
func check(tx *bolt.Tx) error {
	var errs []error
	want := map[string]string{} // index key -> bucket name
	err := tx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
		r, err := decode(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("record %q: %w", k, err))
			return nil
		}
		if !bytes.Equal(k, recordKey(r.Scope, r.Key)) {
			errs = append(errs, fmt.Errorf("record %q: stored under the wrong key", k))
		}
		name := bucketSettled
		ik := indexKey(r.Settled, k)
		if r.Open() {
			name, ik = bucketOpen, indexKey(r.NextDue, k)
		}
		want[string(name)+"/"+string(ik)] = string(k)
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketOpen, bucketSettled} {
		err := tx.Bucket(name).ForEach(func(k, _ []byte) error {
			id := string(name) + "/" + string(k)
			if _, ok := want[id]; !ok {
				errs = append(errs, fmt.Errorf("%s index: stray entry %q", name, k))
			}
			delete(want, id)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for id, rk := range want {
		errs = append(errs, fmt.Errorf("record %q: missing index entry %q", rk, id))
	}
	return errors.Join(errs...)
}
