package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names (format version 2). Every record has a sequence number,
// given when it is created and never changed: an 8-byte big-endian
// counter (the keys bucket's bbolt sequence). bucketKeys maps each record
// key (scope, NUL, key) to its sequence number. Records live in one of two
// buckets keyed by their sequence number: open records in bucketOpen,
// terminal ones in bucketDone. Two indexes are keyed by an 8-byte sortable
// time followed by the sequence number: bucketDue holds every open record
// at its NextDue (empty value), bucketSettled every terminal record at its
// Settled time (the record key as value, so Prune can drop the key
// without decoding the record). A record, its key and its index entry
// always change in the same transaction.
//
// Sequence numbers make every new record, and nearly every settled one,
// land at the right edge of its B+tree: a commit dirties the last leaf or
// two of the big buckets instead of one leaf per record, whatever keys the
// caller chose (with random keys in format version 1, each settle
// rewrote its own 4 KiB leaf of the done bucket). Only bucketKeys is
// written at random, once per record, and its entries are small.
//
// Keeping open records apart means Due and ForEachOpen read two small
// buckets however many settled records the journal holds: looking open
// records up in one big bucket scatters the reads over the whole file
// (measured: 2.4 times slower with 1M settled records than with 10k). The
// settled index makes Prune's cost grow with what it deletes.
var (
	bucketMeta    = []byte("meta")
	bucketKeys    = []byte("keys")
	bucketOpen    = []byte("open.seq")
	bucketDone    = []byte("done.seq")
	bucketDue     = []byte("due.seq")
	bucketSettled = []byte("settled.seq")

	// dataBuckets are the buckets besides meta, all created with the file.
	dataBuckets = [][]byte{bucketKeys, bucketOpen, bucketDone, bucketDue, bucketSettled}

	metaMagic   = []byte("magic")
	metaVersion = []byte("version")
	magicValue  = []byte("idem-journal")
	// metaID names the journal (16 random bytes, format version 3): its
	// log's segments carry it, so a log left beside another journal is
	// never replayed into this one.
	metaID = []byte("id")
	// metaApplied is the LSN up to which the file holds every write of
	// the log (format version 3), committed with the records it covers.
	metaApplied = []byte("log applied")
)

const (
	timeKeySize = 8
	seqKeySize  = 8
	// appendFill is the fill percent of the buckets written at their
	// right edge: bbolt's default (half) would leave every page of an
	// append-only tree half empty.
	appendFill = 0.9
)

// recordKey joins scope and key with a NUL, which validate forbids in both,
// so distinct (scope, key) pairs never collide.
func recordKey(scope, key string) []byte {
	k := make([]byte, 0, len(scope)+1+len(key))
	k = append(k, scope...)
	k = append(k, 0)
	return append(k, key...)
}

// seqKey is the key of the record with sequence number n.
func seqKey(n uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, seqKeySize), n)
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

// indexKey is the key of the index entry at t of the record whose key in
// its bucket is sk.
func indexKey(t time.Time, sk []byte) []byte {
	k := make([]byte, timeKeySize, timeKeySize+len(sk))
	binary.BigEndian.PutUint64(k, timeKey(t))
	return append(k, sk...)
}

// home returns the bucket a record lives in, and its index bucket and key.
func home(tx *bolt.Tx, r *Record, sk []byte) (records, index *bolt.Bucket, ik []byte) {
	if r.Open() {
		return tx.Bucket(bucketOpen), tx.Bucket(bucketDue), indexKey(r.NextDue, sk)
	}
	records, index = tx.Bucket(bucketDone), tx.Bucket(bucketSettled)
	records.FillPercent, index.FillPercent = appendFill, appendFill
	return records, index, indexKey(r.Settled, sk)
}

// lookup returns the sequence key and stored encoding of a record, or
// nils. A key entry whose record is missing is damage, reported as such.
// In a read transaction it also refuses a key or value that a damaged
// page makes bbolt return from outside the file (see mappedOf), and
// answers "no such record" only from pages that pass a check (vetMiss).
func lookup(tx *bolt.Tx, rk []byte) (sk, v []byte, err error) {
	return (*getter)(nil).lookup(tx, rk)
}

// A getter reads the buckets of one transaction through a cursor per
// bucket, kept: bbolt's Bucket.Get makes a cursor for every read and
// grows its stack from empty, an allocation per level of the tree, and
// the applier reads three keys of every record it copies. It keeps the
// buckets too: a read transaction's Bucket makes a new one every call. A
// nil getter reads with Tx.Bucket and Bucket.Get.
type getter struct {
	buckets []namedBucket
	cursors []*bolt.Cursor
	tree    treeReader // for vetMiss, made at its first miss
}

type namedBucket struct {
	name []byte
	b    *bolt.Bucket
}

// bucket is tx.Bucket(name), made once per getter; tx must be the same
// transaction every time.
func (g *getter) bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	if g == nil {
		return tx.Bucket(name)
	}
	for _, nb := range g.buckets {
		if bytes.Equal(nb.name, name) {
			return nb.b
		}
	}
	b := tx.Bucket(name)
	if b != nil {
		g.buckets = append(g.buckets, namedBucket{name, b})
	}
	return b
}

// get is b.Get(key) for a bucket b that holds no nested bucket.
func (g *getter) get(b *bolt.Bucket, key []byte) []byte {
	if g == nil {
		return b.Get(key)
	}
	var c *bolt.Cursor
	for _, o := range g.cursors {
		if o.Bucket() == b {
			c = o
			break
		}
	}
	if c == nil {
		c = b.Cursor()
		g.cursors = append(g.cursors, c)
	}
	// Seek repositions the cursor from the root, as a new one would: a
	// Put since its last use does not mislead it.
	if k, v := c.Seek(key); bytes.Equal(k, key) {
		return v
	}
	return nil
}

// lookup is the package's lookup, reading through g.
func (g *getter) lookup(tx *bolt.Tx, rk []byte) (sk, v []byte, err error) {
	keys := g.bucket(tx, bucketKeys)
	sk = g.get(keys, rk)
	if sk == nil {
		if tx.Writable() { // its changed pages are not in the map vetMiss reads
			return nil, nil, nil
		}
		var tree treeReader
		t := &tree
		if g != nil {
			t = &g.tree
		}
		return nil, nil, vetMiss(tx, t, keys, bucketKeys, rk)
	}
	if err := mappedOf(tx, keys).check(sk); err != nil {
		return nil, nil, err
	}
	if len(sk) != seqKeySize {
		return nil, nil, withKind(ErrCorrupt, "damaged key index: entry %q of %d bytes", rk, len(sk))
	}
	for _, name := range [][]byte{bucketOpen, bucketDone} {
		b := g.bucket(tx, name)
		if v = g.get(b, sk); v != nil {
			return sk, v, mappedOf(tx, b).check(v)
		}
	}
	return nil, nil, withKind(ErrCorrupt, "damaged key index: entry %q without record", rk)
}

// addRecord stores r, a new record whose record key is rk and encoding
// enc: it gives r its sequence number and key entry, then its record and
// index entry (putRecord).
func addRecord(tx *bolt.Tx, rk []byte, r *Record, enc []byte) error {
	return (*getter)(nil).addRecord(tx, rk, r, enc)
}

// addRecord is the package's addRecord, reading through g.
func (g *getter) addRecord(tx *bolt.Tx, rk []byte, r *Record, enc []byte) error {
	keys := tx.Bucket(bucketKeys)
	n, err := keys.NextSequence()
	if err != nil {
		return err
	}
	sk := seqKey(n)
	// A sequence number is never given twice (bbolt keeps the counter in
	// the bucket, and Compact copies it); were it ever reset, the new
	// record would overwrite an old one: refuse instead.
	if g.get(tx.Bucket(bucketOpen), sk) != nil || g.get(tx.Bucket(bucketDone), sk) != nil {
		return withKind(ErrCorrupt, "damaged key index: sequence number %d already in use", n)
	}
	if err := keys.Put(rk, sk); err != nil {
		return err
	}
	return putRecord(tx, sk, rk, nil, r, enc)
}

// putRecord writes the encoding of r, whose record key is rk and sequence
// key sk, and moves the record and its index entry from where old (nil
// for a new record) had them to where r belongs. old need only hold
// State, NextDue and Settled.
func putRecord(tx *bolt.Tx, sk, rk []byte, old, r *Record, enc []byte) error {
	records, index, ik := home(tx, r, sk)
	if old != nil {
		oldRecords, oldIndex, oldIK := home(tx, old, sk)
		if err := oldIndex.Delete(oldIK); err != nil {
			return err
		}
		if old.Open() != r.Open() {
			if err := oldRecords.Delete(sk); err != nil {
				return err
			}
		}
	}
	if err := records.Put(sk, enc); err != nil {
		return err
	}
	var iv []byte
	if !r.Open() {
		iv = rk
	}
	return index.Put(ik, iv)
}

// check verifies the indexes against the records: every record decodes,
// has its key entry, and each index holds exactly the records that belong
// in it, under the right time. It reads the whole journal; it is for tests
// and tools.
func check(tx *bolt.Tx) error {
	var errs []error
	want := map[string]string{} // index bucket + "/" + index key -> record key
	keys := tx.Bucket(bucketKeys)
	seen := map[string]bool{} // sequence keys of the records
	for _, name := range [][]byte{bucketOpen, bucketDone} {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			r, err := decode(v)
			if err != nil {
				errs = append(errs, errorf("%s record %x: %w", name, k, err))
				return nil
			}
			rk := recordKey(r.Scope, r.Key)
			if sk := keys.Get(rk); !bytes.Equal(sk, k) {
				errs = append(errs, errorf("%s record %x (%q): the key index says %x", name, k, rk, sk))
			}
			if r.Open() != bytes.Equal(name, bucketOpen) {
				errs = append(errs, errorf("%s record %q: in the wrong bucket for state %s", name, rk, r.State))
			}
			if seen[string(k)] {
				errs = append(errs, errorf("record %q: stored twice", rk))
			}
			seen[string(k)] = true
			id := string(bucketDue) + "/" + string(indexKey(r.NextDue, k))
			if !r.Open() {
				id = string(bucketSettled) + "/" + string(indexKey(r.Settled, k)) + "=" + string(rk)
			}
			want[id] = string(rk)
			return nil
		})
		if err != nil {
			return err
		}
	}
	err := keys.ForEach(func(rk, sk []byte) error {
		if !seen[string(sk)] {
			errs = append(errs, errorf("key index: stray entry %q", rk))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketDue, bucketSettled} {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			id := string(name) + "/" + string(k)
			if bytes.Equal(name, bucketSettled) {
				id += "=" + string(v)
			}
			if _, ok := want[id]; !ok {
				errs = append(errs, errorf("%s index: stray entry %x", name, k))
			}
			delete(want, id)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for id, rk := range want {
		errs = append(errs, errorf("record %q: missing index entry %q", rk, id))
	}
	return errors.Join(errs...)
}
