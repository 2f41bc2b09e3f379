package journal

import (
	"bytes"
	"cmp"
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
	// metaLogDep says which log the file depends on (see logDep): the
	// generation of the segment writes went to when metaApplied was last
	// committed, and that metaApplied, 8 bytes each, big-endian. Absent,
	// or generation 0: the file holds every acknowledged write (a clean
	// Close, Compact's copy, a file older than the field).
	metaLogDep = []byte("log depends")
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

// rkRoom is the room a create's or an update's write keeps for its record
// key: a scope and a UUID key fit, and the key then takes no allocation
// of its own on every write.
const rkRoom = 64

// recordKeyIn is recordKey written into room when it fits there.
func recordKeyIn(room *[rkRoom]byte, scope, key string) []byte {
	if len(scope)+1+len(key) > rkRoom {
		return recordKey(scope, key)
	}
	k := append(room[:0], scope...)
	k = append(k, 0)
	return append(k, key...)
}

// seqKeyIn is the key of the record with sequence number n, written into
// room, which has room for it.
func seqKeyIn(room []byte, n uint64) []byte { return binary.BigEndian.AppendUint64(room[:0], n) }

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
	return indexKeyIn(make([]byte, 0, timeKeySize+len(sk)), t, sk)
}

// indexKeyIn is indexKey written into room, which has room for it.
func indexKeyIn(room []byte, t time.Time, sk []byte) []byte {
	return append(binary.BigEndian.AppendUint64(room[:0], timeKey(t)), sk...)
}

// keyRoom is the size of the chunks room carves: 42 records' sequence and
// index keys.
const keyRoom = 1008

// room returns n bytes, with a capacity of n, for a key or value bbolt is
// given to keep until the transaction ends (a new record's sequence key,
// a record's index key), carved from one allocation per keyRoom bytes
// rather than one each: the applier writes two for every record. The
// bytes are the transaction's, never reused: g lives as long as it.
func (g *getter) room(n int) []byte {
	if g == nil || n > keyRoom {
		return make([]byte, 0, n)
	}
	if cap(g.keys)-len(g.keys) < n {
		g.keys = make([]byte, 0, keyRoom)
	}
	k := g.keys[len(g.keys) : len(g.keys) : len(g.keys)+n]
	g.keys = g.keys[:len(g.keys)+n]
	return k
}

// home returns the bucket a record lives in, and its index bucket and key.
func (g *getter) home(tx *bolt.Tx, r *Record, sk []byte) (records, index *bolt.Bucket, ik []byte) {
	if r.Open() {
		return g.bucket(tx, bucketOpen), g.bucket(tx, bucketDue), indexKeyIn(g.room(timeKeySize+len(sk)), r.NextDue, sk)
	}
	records, index = g.bucket(tx, bucketDone), g.bucket(tx, bucketSettled)
	records.FillPercent, index.FillPercent = appendFill, appendFill
	return records, index, indexKeyIn(g.room(timeKeySize+len(sk)), r.Settled, sk)
}

// lookup returns the sequence key and stored encoding of a record, or
// nils. A key entry whose record is missing is damage, reported as such.
// In a read transaction it also refuses a key or value that a damaged
// page makes bbolt return from outside the file (see mappedOf), and
// answers "no such record" only from pages that pass a check (vetMiss);
// through a getter in a write transaction, it reads only pages checked
// whole (vetPath).
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
	// In a write transaction: a cursor per bucket for vetPath, and the
	// pages it has checked.
	paths []bucketPath
	known map[uint64]keyRange
	// keys is the chunk room carves keys from.
	keys []byte
	// freeAbove, once set, is a sequence number that no key of the open
	// and done buckets reached when seqInUse searched them: the numbers
	// after it are free for the rest of the transaction. Zero until then.
	freeAbove uint64
	// seqSearches counts seqInUse's searches of the two buckets (tests
	// read it).
	seqSearches int
}

// bucketPath is the cursor that checks the pages of one bucket.
type bucketPath struct {
	b *bolt.Bucket
	c *scanCursor
}

// vetPath checks, in a write transaction, every page of bucket b on the
// path of bbolt's search for key, as a scan checks the pages it reads
// (scanCursor), before bbolt reads any of them or changes them. bbolt
// trusts a damaged page in a write transaction as in a read one, and
// worse: a Put or Delete copies the page into a node, element count and
// offsets as they are, and writes that node back as a sound page. The
// applier, copying a logged update of a record whose key lay on a
// damaged page of the key index, missed the key, gave the record a
// second sequence number and record, and wrote the page back with every
// key of it made one zero byte: the damage became data no check could
// tell from the journal's. A page that fails is ErrCorrupt, and the
// transaction rolls back with nothing written. Each page is checked
// whole once per transaction (the pages bbolt changes it rewrites whole
// anyway), then only against the keys its parent gives it.
//
// The pages read are the file's (the memory map), not the transaction's:
// until its commit, a write transaction changes only leaves held in
// memory, so its search for key goes through the branch pages of the
// file, and reaches the file's page for any leaf it has not changed yet
// (one it has changed was checked before its first change). A nil getter,
// or a read transaction, checks nothing here.
func (g *getter) vetPath(tx *bolt.Tx, b *bolt.Bucket, key []byte) error {
	_, err := g.pathOf(tx, b, key)
	return err
}

// pathOf is vetPath, and returns the cursor left on the path (nil when
// nothing is checked).
func (g *getter) pathOf(tx *bolt.Tx, b *bolt.Bucket, key []byte) (*scanCursor, error) {
	if g == nil || !tx.Writable() {
		return nil, nil
	}
	var c *scanCursor
	for _, p := range g.paths {
		if p.b == b {
			c = p.c
			break
		}
	}
	if c == nil {
		var name []byte
		for _, nb := range g.buckets {
			if nb.b == b {
				name = nb.name
			}
		}
		if name == nil {
			return nil, errorf("vetPath: a bucket the getter did not open") // a bug, not damage
		}
		var err error
		if c, err = g.walk(tx, b, name); err != nil {
			return nil, err
		}
		g.paths = append(g.paths, bucketPath{b, c})
	} else if len(c.vetted) > 0 && bytes.Equal(c.vetted, key) {
		// The path just checked: the map's pages have not changed since
		// (a write transaction changes nodes in memory until its commit).
		// The applier reads a key and then writes it (the key index's
		// entry three times per new record, a record's sequence key
		// twice).
		return c, nil
	}
	c.vetted = c.vetted[:0]
	if err := c.path(key); err != nil {
		return nil, err
	}
	c.vetted = append(c.vetted, key...)
	return c, nil
}

// walk returns a cursor over bucket b, named name, of tx that checks
// every page it reads (scanCursor), sharing the pages g has checked. In a
// write transaction it reads the file's pages: only a walk before the
// transaction's first change reads what the transaction holds.
func (g *getter) walk(tx *bolt.Tx, b *bolt.Bucket, name []byte) (*scanCursor, error) {
	c, err := newScanCursor(tx, b, name)
	if err != nil {
		return nil, err
	}
	if g.known == nil {
		g.known = make(map[uint64]keyRange)
	}
	c.known = g.known
	return c, nil
}

// put is b.Put(key, value) once the path to key is checked (vetPath).
func (g *getter) put(tx *bolt.Tx, b *bolt.Bucket, key, value []byte) error {
	if err := g.vetPath(tx, b, key); err != nil {
		return err
	}
	return b.Put(key, value)
}

// del is b.Delete(key) once the path to key is checked (vetPath), and
// the pages beside it that bbolt may merge the page it leaves small with.
func (g *getter) del(tx *bolt.Tx, b *bolt.Bucket, key []byte) error {
	c, err := g.pathOf(tx, b, key)
	if err == nil && c != nil {
		err = c.siblings()
	}
	if err != nil {
		return err
	}
	return b.Delete(key)
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

// get is b.Get(key) for a bucket b that holds no nested bucket, once the
// path to key is checked (vetPath).
func (g *getter) get(tx *bolt.Tx, b *bolt.Bucket, key []byte) ([]byte, error) {
	v, _, err := g.getAt(tx, b, key)
	return v, err
}

// getAt is get that also reports, for a key b lacks, whether b holds no
// key after it either (end). A nil getter never reports end.
func (g *getter) getAt(tx *bolt.Tx, b *bolt.Bucket, key []byte) (v []byte, end bool, err error) {
	if g == nil {
		return b.Get(key), false, nil
	}
	if err := g.vetPath(tx, b, key); err != nil {
		return nil, false, err
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
	k, v := c.Seek(key)
	if bytes.Equal(k, key) {
		return v, false, nil
	}
	return nil, k == nil, nil
}

// lookup is the package's lookup, reading through g.
func (g *getter) lookup(tx *bolt.Tx, rk []byte) (sk, v []byte, err error) {
	keys := g.bucket(tx, bucketKeys)
	if sk, err = g.get(tx, keys, rk); err != nil {
		return nil, nil, err
	}
	if sk == nil {
		if tx.Writable() { // a getter checked the path (vetPath), a nil one migrates
			return nil, nil, nil
		}
		return nil, nil, vetMiss(tx, g.reader(), keys, bucketKeys, rk)
	}
	if err := mappedOf(tx, keys).check(sk); err != nil {
		return nil, nil, err
	}
	if len(sk) != seqKeySize {
		return nil, nil, withKind(ErrCorrupt, "damaged key index: entry %q of %d bytes", rk, len(sk))
	}
	for _, name := range [][]byte{bucketOpen, bucketDone} {
		b := g.bucket(tx, name)
		if v, err = g.get(tx, b, sk); err != nil {
			return nil, nil, err
		}
		if v != nil {
			return sk, v, mappedOf(tx, b).check(v)
		}
	}
	return nil, nil, withKind(ErrCorrupt, "damaged key index: entry %q without record", rk)
}

// reader is the getter's tree reader, which keeps what it learnt for the
// rest of the transaction, or a fresh one for a nil getter.
func (g *getter) reader() *treeReader {
	if g == nil {
		return &treeReader{}
	}
	return &g.tree
}

// lookupNew is lookup of a key that is likely absent, a create's. In a
// read transaction it first searches the key index with vetMiss's checks
// (treeReader.absent), and a miss that search is sure of is the answer:
// bbolt's search would read the same pages and elements and miss too,
// and vetMiss would then repeat the checked search and pass. The file is
// searched once instead of twice. Anything else (a key found, a page
// that fails a check, a search that would go on to the next leaf, an
// inline key index) is looked up by lookup from the start, so what it
// answers, damage included, is lookup's.
func (g *getter) lookupNew(tx *bolt.Tx, rk []byte) (sk, v []byte, err error) {
	if !tx.Writable() {
		if keys := g.bucket(tx, bucketKeys); keys != nil && keys.Root() != 0 {
			t := g.reader()
			if t.mm == nil {
				*t = treeOf(tx)
			}
			if t.absent(uint64(keys.Root()), rk) {
				return nil, nil, nil
			}
		}
	}
	return g.lookup(tx, rk)
}

// addRecord stores r, a new record whose record key is rk and encoding
// enc: it gives r its sequence number and key entry, then its record and
// index entry (putRecord).
func addRecord(tx *bolt.Tx, rk []byte, r *Record, enc []byte) error {
	return (*getter)(nil).addRecord(tx, rk, r, enc)
}

// addRecord is the package's addRecord, reading through g.
func (g *getter) addRecord(tx *bolt.Tx, rk []byte, r *Record, enc []byte) error {
	keys := g.bucket(tx, bucketKeys)
	if err := g.vetPath(tx, keys, rk); err != nil {
		return err // before NextSequence changes the bucket's root
	}
	n, err := keys.NextSequence()
	if err != nil {
		return err
	}
	sk := seqKeyIn(g.room(seqKeySize), n)
	// A sequence number is never given twice (bbolt keeps the counter in
	// the bucket, and Compact copies it); were it ever reset, the new
	// record would overwrite an old one: refuse instead.
	if err := g.seqInUse(tx, n, sk); err != nil {
		return err
	}
	if err := g.put(tx, keys, rk, sk); err != nil {
		return err
	}
	return g.putRecord(tx, sk, rk, nil, r, enc)
}

// seqInUse refuses n, a sequence number NextSequence has just given,
// when a record of the open or done bucket has it (ErrCorrupt).
//
// The applier gives every new record of its batch one, in increasing
// order, and searching both buckets for each was over a quarter of the
// CPU of adding a record to the file (a profile of the applier). So once
// a search finds both buckets ending before n (no key at or after it), g
// keeps n: every key either bucket gets later in the transaction is a
// sequence number given before the next one, or that of a record stored
// already (below n too), so any number after n the counter gives in this
// transaction is free without a search. A counter set back finds a key
// at or after its number in the first search, and every record of the
// transaction is then searched for, as before.
func (g *getter) seqInUse(tx *bolt.Tx, n uint64, sk []byte) error {
	if g != nil && g.freeAbove != 0 && n > g.freeAbove {
		return nil
	}
	if g != nil {
		g.seqSearches++
	}
	past := 0 // buckets whose keys all come before sk
	for _, name := range [][]byte{bucketOpen, bucketDone} {
		v, end, err := g.getAt(tx, g.bucket(tx, name), sk)
		if err != nil || v != nil {
			return cmp.Or(err, withKind(ErrCorrupt, "damaged key index: sequence number %d already in use", n))
		}
		if end {
			past++
		}
	}
	if g != nil && past == 2 {
		g.freeAbove = n
	}
	return nil
}

// putRecord writes the encoding of r, whose record key is rk and sequence
// key sk, and moves the record and its index entry from where old (nil
// for a new record) had them to where r belongs. old need only hold
// State, NextDue and Settled.
func (g *getter) putRecord(tx *bolt.Tx, sk, rk []byte, old, r *Record, enc []byte) error {
	records, index, ik := g.home(tx, r, sk)
	if old != nil {
		oldRecords, oldIndex, oldIK := g.home(tx, old, sk)
		if err := g.del(tx, oldIndex, oldIK); err != nil {
			return err
		}
		if old.Open() != r.Open() {
			if err := g.del(tx, oldRecords, sk); err != nil {
				return err
			}
		}
	}
	if err := g.put(tx, records, sk, enc); err != nil {
		return err
	}
	var iv []byte
	if !r.Open() {
		iv = rk
	}
	return g.put(tx, index, ik, iv)
}

// check verifies the indexes against the records: every record decodes,
// has its key entry, and each index holds exactly the records that belong
// in it, under the right time. It reads the whole journal; it is for tests
// and tools. A record written by a newer idem (a rollback left it) is not
// this build's to read, and newer counts such records; its bucket still
// says which index it belongs in, so it must have one entry there, at
// whatever time, and one key entry: one without its due entry is an
// operation the newer idem, upgraded to again, would never find due.
// newerAt names those with a key entry, in (scope, key) order: no List
// returns them.
func check(tx *bolt.Tx) (newer int, newerAt []Position, _ error) {
	var errs []error
	want := map[string]string{} // index bucket + "/" + index key -> record key
	keys := tx.Bucket(bucketKeys)
	seen := map[string]bool{} // sequence keys of the records
	// Those of the records written by a newer idem, to the index their
	// bucket puts them in, and how many entries each has in it and in
	// the key index.
	unread := map[string][]byte{}
	indexed, keyed := map[string]int{}, map[string]int{}
	for _, name := range [][]byte{bucketOpen, bucketDone} {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			r, err := decode(v)
			if errors.Is(err, ErrVersion) {
				if seen[string(k)] {
					errs = append(errs, errorf("record %x, written by a newer idem: stored twice", k))
				}
				seen[string(k)], unread[string(k)] = true, bucketDue
				if bytes.Equal(name, bucketDone) {
					unread[string(k)] = bucketSettled
				}
				return nil
			}
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
			return 0, nil, err
		}
	}
	err := keys.ForEach(func(rk, sk []byte) error {
		if !seen[string(sk)] {
			errs = append(errs, errorf("key index: stray entry %q", rk))
		}
		if _, ok := unread[string(sk)]; ok {
			keyed[string(sk)]++
			scope, key, _ := bytes.Cut(rk, []byte{0})
			newerAt = append(newerAt, Position{Scope: string(scope), Key: string(key)})
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	for _, name := range [][]byte{bucketDue, bucketSettled} {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			id := string(name) + "/" + string(k)
			if bytes.Equal(name, bucketSettled) {
				id += "=" + string(v)
			}
			_, ok := want[id]
			switch {
			case ok:
			case len(k) > timeKeySize && bytes.Equal(unread[string(k[timeKeySize:])], name) &&
				(bytes.Equal(name, bucketDue) || bytes.Equal(keys.Get(v), k[timeKeySize:])):
				indexed[string(k[timeKeySize:])]++
			default:
				errs = append(errs, errorf("%s index: stray entry %x", name, k))
			}
			delete(want, id)
			return nil
		})
		if err != nil {
			return 0, nil, err
		}
	}
	for id, rk := range want {
		errs = append(errs, errorf("record %q: missing index entry %q", rk, id))
	}
	for sk, index := range unread {
		switch n := keyed[sk]; {
		case n == 0:
			errs = append(errs, errorf("record %x, written by a newer idem: missing its key entry", sk))
		case n > 1:
			errs = append(errs, errorf("record %x, written by a newer idem: %d key entries", sk, n))
		}
		switch n := indexed[sk]; {
		case n == 0:
			errs = append(errs, errorf("record %x, written by a newer idem: missing its %s entry", sk, index))
		case n > 1:
			errs = append(errs, errorf("record %x, written by a newer idem: %d %s entries", sk, n, index))
		}
	}
	return len(unread), newerAt, errors.Join(errs...)
}
