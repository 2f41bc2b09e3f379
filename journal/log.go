package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The log is where a write becomes durable. bbolt makes a commit durable
// with two fsyncs and rewrites the pages of every B+tree it touched;
// measured on this project's machines a round of a few dozen writes spent
// more CPU in bbolt (its syscalls, node rewrites and the garbage they
// leave) than the client spent on HTTP. A write therefore goes, encoded,
// to the end of an append-only file, one write and one fdatasync per
// round of concurrent writes, and the Store keeps it in memory (overlay.go)
// until the applier (apply.go) has copied it into the bbolt file in a
// large, fsync'd transaction of its own. The bbolt file and its log are
// one journal: Open replays into bbolt whatever the log holds that bbolt
// does not, so nothing a write acknowledged is ever lost, and a write that
// was not acknowledged is either wholly there or not at all.
//
// The log is a series of segment files beside the journal, named
// <journal>.log.<generation, 16 hex digits>. A segment starts with a
// header (segHeaderSize bytes):
//
//	magic "idem-log" | version u32 | 0 u32 | generation u64 | start LSN u64 | journal id [16] | crc32c u32 | 0 u32
//
// and then holds rounds, each the writes of one group commit, written and
// fsync'd in one go, each starting at a multiple of 8 bytes:
//
//	round: "IRND" | crc32c u32 | first LSN u64 | entries u32 | length u32 | entries (length bytes) | zeros to 8
//	entry: crc32c u32 | payload size u32 | LSN u64 | payload (the record's encoding)
//
// An entry is a whole record after a write. Its CRC (Castagnoli) covers
// everything after it in the entry; a round's covers the journal's id and
// the rest of the round header (so that bytes of a record that look like
// a round header are not one), the segment header's everything before it.
// Every write gets the next log sequence number (LSN); within a segment
// the LSNs follow each other from the header's start. The meta bucket of
// the bbolt file records the LSN up to which bbolt holds every entry
// (metaApplied), in the same transaction as the records it applied.
//
// Reading the log (scanLog) takes the segments in (start, generation)
// order and, in each, the rounds up to the first that is cut short or
// damaged, or breaks the LSN sequence: a crash can tear only the last
// round written to a segment, which was never acknowledged (its whole
// entries are kept: each write is there whole or not at all). A damaged
// round followed by an intact later one is not a torn write: rounds are
// written one after another, each fsync'd, so that is damage to writes
// that were acknowledged, and Open fails closed. A segment's start also
// voids every entry of the older segments at or past that LSN: after a
// failed write the Store starts a new segment at the failed round's first
// LSN (logWriter.fail), which turns what the failed write may have left on
// disk into nothing, durably, before the failure is reported. A hole
// (a segment starting past the LSN the entries before it reach) means
// acknowledged writes are missing: the journal is damaged, and Open fails
// closed.
//
// A segment the writer left because it grew full ends with a seal after
// its last round, written once the next segment's header is durable:
//
//	seal: "ISEL" | crc32c u32 | next generation u64 | next start LSN u64
//
// (its CRC seeded with the journal's id, as a round's). Segments are
// deleted oldest first, so while a sealed segment is on disk, one of the
// generation it names, or a newer one, is too; if none is, the writes
// logged after it are lost, and the file, which names only the segment it
// depended on when last written (logDep), cannot tell. A release that
// does not know seals stops reading the segment at it, as at the end of
// what was written.
const (
	logMagic        = "idem-log"
	logVersion      = 1
	segHeaderSize   = 56
	roundHeaderSize = 24
	roundMagic      = "IRND"
	sealMagic       = "ISEL"
	sealSize        = 24
	entryHeaderSize = 16
	// maxEntrySize bounds one entry's payload when reading: a length field
	// a crash or bad sector garbled must not make recovery allocate
	// gigabytes. No record comes near it (request and response bodies are
	// capped far below).
	maxEntrySize = 256 << 20
	// segmentSize is the size past which the next round starts a new
	// segment, so that the applier can delete what it has applied.
	segmentSize = 8 << 20
	// logInfix names the segments: <journal>.log.<generation>.
	logInfix = ".log."
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newerLogAdvice ends the error of a log holding what a newer idem wrote:
// after a rollback, the release rolled back to cannot start, and being
// told to upgrade does not say how to start it. Skipping those writes
// would lose operations that newer release journaled and may have sent.
const newerLogAdvice = "a newer idem release stopped without closing this journal (killed, or crashed), " +
	"leaving writes in its log that this release cannot read. To run this release on the journal, " +
	"run that newer release's idem compact on it once (or start and stop that release cleanly): " +
	"that copies its log into the file, and this release then opens the journal, leaving that release's records to it until it runs again"

// segHeader is a segment's header.
type segHeader struct {
	gen, start uint64
	id         [16]byte
}

func (h segHeader) encode() []byte {
	b := make([]byte, segHeaderSize)
	copy(b, logMagic)
	binary.BigEndian.PutUint32(b[8:], logVersion)
	binary.BigEndian.PutUint64(b[16:], h.gen)
	binary.BigEndian.PutUint64(b[24:], h.start)
	copy(b[32:48], h.id[:])
	binary.BigEndian.PutUint32(b[48:], crc32.Checksum(b[:48], castagnoli))
	return b
}

// parseSegHeader parses b; the error says what is wrong with it.
func parseSegHeader(b []byte) (segHeader, error) {
	var h segHeader
	switch {
	case len(b) < segHeaderSize:
		return h, fmt.Errorf("header cut short (%d bytes)", len(b))
	case string(b[:8]) != logMagic:
		return h, errors.New("not a journal log segment (bad magic)")
	case binary.BigEndian.Uint32(b[48:]) != crc32.Checksum(b[:48], castagnoli):
		return h, errors.New("damaged header (checksum)")
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != logVersion {
		return h, withKind(ErrVersion, "log format version %d; this build reads %d: upgrade idem to read it", v, logVersion)
	}
	h.gen = binary.BigEndian.Uint64(b[16:])
	h.start = binary.BigEndian.Uint64(b[24:])
	copy(h.id[:], b[32:48])
	return h, nil
}

// appendRound appends the round of the records encoded as payloads, whose
// first gets LSN first, in the log of the journal id.
func appendRound(dst []byte, id *[16]byte, first uint64, payloads [][]byte) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, roundHeaderSize)...)
	for i, p := range payloads {
		dst = appendEntry(dst, first+uint64(i), p)
	}
	h := dst[at : at+roundHeaderSize]
	copy(h, roundMagic)
	binary.BigEndian.PutUint64(h[8:], first)
	binary.BigEndian.PutUint32(h[16:], uint32(len(payloads)))
	binary.BigEndian.PutUint32(h[20:], uint32(len(dst)-at-roundHeaderSize))
	binary.BigEndian.PutUint32(h[4:], roundSum(id, h))
	for len(dst)%8 != 0 {
		dst = append(dst, 0)
	}
	return dst
}

// roundSum is the CRC of a round header h (its first LSN, entry count and
// length), seeded with the journal's id. The id comes by pointer: a copy's
// bytes escape into the CRC's assembly, an allocation per round.
func roundSum(id *[16]byte, h []byte) uint32 {
	return crc32.Update(crc32.Checksum(id[:], castagnoli), castagnoli, h[8:roundHeaderSize])
}

// roundAt parses the round header at the start of b. ok is false when b
// does not start with an intact header of the journal id whose entries
// fit in b.
func roundAt(b []byte, id *[16]byte) (first uint64, count int, body []byte, ok bool) {
	if len(b) < roundHeaderSize || string(b[:4]) != roundMagic || binary.BigEndian.Uint32(b[4:]) != roundSum(id, b) {
		return 0, 0, nil, false
	}
	n := int64(binary.BigEndian.Uint32(b[20:]))
	if n > int64(len(b)-roundHeaderSize) {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint64(b[8:]), int(binary.BigEndian.Uint32(b[16:])), b[roundHeaderSize : roundHeaderSize+n], true
}

// roundEnd is the offset of the round after one at off whose body is n
// bytes long.
func roundEnd(off, n int) int {
	end := off + roundHeaderSize + n
	return (end + 7) &^ 7
}

// seal returns the seal of a segment the log goes on from in the segment
// of generation next, at LSN start, in the log of the journal id.
func seal(id *[16]byte, next, start uint64) []byte {
	b := make([]byte, sealSize)
	copy(b, sealMagic)
	binary.BigEndian.PutUint64(b[8:], next)
	binary.BigEndian.PutUint64(b[16:], start)
	binary.BigEndian.PutUint32(b[4:], roundSum(id, b))
	return b
}

// sealAt parses the seal at the start of b: the generation it names, 0
// when b does not start with an intact seal of the journal id.
func sealAt(b []byte, id *[16]byte) (next uint64) {
	if len(b) < sealSize || string(b[:4]) != sealMagic || binary.BigEndian.Uint32(b[4:]) != roundSum(id, b) {
		return 0
	}
	return binary.BigEndian.Uint64(b[8:])
}

// appendEntry appends the entry of the record encoded as payload, at lsn.
func appendEntry(dst []byte, lsn uint64, payload []byte) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, entryHeaderSize)...)
	binary.BigEndian.PutUint32(dst[at+4:], uint32(len(payload)))
	binary.BigEndian.PutUint64(dst[at+8:], lsn)
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[at:], crc32.Checksum(dst[at+4:], castagnoli))
	return dst
}

// nextEntry parses the entry at the start of b. ok is false when b does not
// start with a whole, intact entry (the end of what was written).
func nextEntry(b []byte) (lsn uint64, payload []byte, size int, ok bool) {
	if len(b) < entryHeaderSize {
		return 0, nil, 0, false
	}
	n := binary.BigEndian.Uint32(b[4:])
	if n > maxEntrySize || int(n) > len(b)-entryHeaderSize {
		return 0, nil, 0, false
	}
	size = entryHeaderSize + int(n)
	if binary.BigEndian.Uint32(b) != crc32.Checksum(b[4:size], castagnoli) {
		return 0, nil, 0, false
	}
	return binary.BigEndian.Uint64(b[8:]), b[entryHeaderSize:size], size, true
}

// logEntry is one entry read back from the log.
type logEntry struct {
	lsn     uint64
	payload []byte // the record's encoding
}

// segment is a segment file found on disk or written by this Store.
type segment struct {
	path string
	segHeader
	end uint64 // one past the last LSN read from it (start when empty)
	// blank: no header (all zeros: a crash while the segment was being
	// created). It holds nothing, voids nothing, and is deleted at Open.
	blank bool
	size  int64 // bytes in the file, as far as the writer knows
	// sealed is the generation the segment's seal says the log goes on
	// in, 0 without a seal.
	sealed uint64
}

// logState is what scanLog read: the entries past the applied LSN, in LSN
// order, and what the writer needs to go on.
type logState struct {
	entries  []logEntry
	next     uint64    // the LSN the next write gets
	maxGen   uint64    // the highest generation on disk
	segments []segment // every segment, oldest first
}

// segmentPaths lists the files in dir named as base's log segments, with
// their generations. A name that only looks like one (wrong digits) is
// not the journal's and is left alone.
func segmentPaths(dir, base string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	prefix := base + logInfix
	for _, e := range entries {
		name := e.Name()
		gen, ok := strings.CutPrefix(name, prefix)
		if !ok || len(gen) != 16 {
			continue
		}
		if _, err := strconv.ParseUint(gen, 16, 64); err != nil {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	return out, nil
}

// segmentPath names the segment of generation gen.
func segmentPath(dir, base string, gen uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%s%016x", base, logInfix, gen))
}

// scanLog reads the log of the journal base in dir whose id is id and whose
// bbolt file holds every entry up to applied. It returns the entries past
// applied. A segment of another journal, a damaged segment before the
// newest, or a hole in the LSNs is ErrCorrupt: acknowledged writes would
// be lost, and a person must look. The newest segment's header may be
// missing or cut short (a crash while it was created, before anything was
// written to it): such a segment is reported as empty.
func scanLog(dir, base string, id [16]byte, applied uint64) (*logState, error) {
	paths, err := segmentPaths(dir, base)
	if err != nil {
		return nil, err
	}
	type found struct {
		segment
		data []byte
		bad  error // a header that could not be read
	}
	all := make([]found, 0, len(paths))
	st := &logState{}
	for _, p := range paths {
		data, err := readSegment(p)
		if err != nil {
			return nil, errorf("log segment %s: %w", filepath.Base(p), err)
		}
		f := found{segment: segment{path: p, size: int64(len(data))}, data: data}
		f.segHeader, f.bad = parseSegHeader(data)
		if f.bad == nil && f.id != id {
			return nil, withKind(ErrCorrupt, "log segment %s belongs to another journal (id %x, this journal's is %x): a log left behind by a journal that was deleted or replaced; move it away if that journal is gone for good", filepath.Base(p), f.id, id)
		}
		switch {
		case errors.Is(f.bad, ErrVersion):
			return nil, errorf("log segment %s: %w; %s", filepath.Base(p), f.bad, newerLogAdvice)
		case f.bad != nil && !allZero(data):
			return nil, withKind(ErrCorrupt, "log segment %s: %v", filepath.Base(p), f.bad)
		}
		all = append(all, f)
	}
	// Segments without a header (all zeros) sort last: they void nothing.
	slices.SortFunc(all, func(a, b found) int {
		switch {
		case (a.bad == nil) != (b.bad == nil):
			if a.bad == nil {
				return -1
			}
			return 1
		case a.start != b.start:
			if a.start < b.start {
				return -1
			}
			return 1
		}
		if a.gen < b.gen {
			return -1
		}
		if a.gen > b.gen {
			return 1
		}
		return strings.Compare(a.path, b.path)
	})
	reached := applied // every LSN up to it is accounted for
	for _, f := range all {
		if f.bad != nil {
			// Created, but its header never reached the disk (it is
			// all zeros): a write is acknowledged only once its
			// segment's header is durable, so it holds nothing
			// acknowledged.
			f.blank = true
			st.segments = append(st.segments, f.segment)
			continue
		}
		st.maxGen = max(st.maxGen, f.gen)
		// This segment voids what older ones hold at or past its start.
		for len(st.entries) > 0 && st.entries[len(st.entries)-1].lsn >= f.start {
			st.entries = st.entries[:len(st.entries)-1]
		}
		if f.start > reached+1 {
			return nil, withKind(ErrCorrupt, "log segment %s starts at entry %d, but the journal and the log before it hold entries only up to %d: acknowledged writes are missing (a journal file restored from an older copy than its log, or a segment lost); keep the file and its segments as they are, and restore both from one complete copy", filepath.Base(f.path), f.start, reached)
		}
		want, sealed, err := readRounds(f.data, id, f.start, func(lsn uint64, payload []byte) {
			if lsn > applied {
				st.entries = append(st.entries, logEntry{lsn: lsn, payload: payload})
			}
		})
		if err != nil {
			return nil, withKind(ErrCorrupt, "log segment %s: %v", filepath.Base(f.path), err)
		}
		f.end, f.sealed = want, sealed
		reached = max(applied, want-1)
		st.segments = append(st.segments, f.segment)
	}
	st.next = reached + 1
	return st, nil
}

// readRounds reads the rounds of the segment data (whose journal id is id
// and whose first LSN is start), calling fn for each whole entry in LSN
// order, and returns the LSN after the last. It stops at the first round
// that is cut short, damaged or out of sequence, keeping the whole entries
// of that round (a write torn by a crash was never acknowledged, and each
// of its writes is there whole or not at all); if an intact round of a
// later LSN follows, the damage is to acknowledged writes: an error.
// sealed is the generation the segment's seal names, 0 without one.
func readRounds(data []byte, id [16]byte, start uint64, fn func(lsn uint64, payload []byte)) (want, sealed uint64, err error) {
	want = start
	off := segHeaderSize
	for off < len(data) {
		first, count, body, ok := roundAt(data[off:], &id)
		if !ok || first != want {
			break
		}
		n := 0
		for b := body; n < count; n++ {
			lsn, payload, size, ok := nextEntry(b)
			if !ok || lsn != want {
				break
			}
			fn(lsn, payload)
			b = b[size:]
			want++
		}
		if n < count {
			break
		}
		off = roundEnd(off, len(body))
	}
	if off < len(data) {
		sealed = sealAt(data[off:], &id)
	}
	// Where the rounds stop, a crash tore the last one, or the disk
	// damaged one: only an intact round after it tells them apart.
	for at := (off + 8) &^ 7; at < len(data); at += 8 {
		if first, _, _, ok := roundAt(data[at:], &id); ok && first >= want {
			return want, 0, fmt.Errorf("the log's writes from entry %d on are damaged, yet intact writes (from entry %d) were logged after them: acknowledged writes are lost; keep the file and its segments as they are, and restore both from one complete copy", want, first)
		}
	}
	return want, sealed, nil
}

// readSegment reads a whole segment file, refusing one so large that it
// cannot be a segment this package wrote.
func readSegment(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, withKind(ErrCorrupt, "not a regular file")
	}
	if fi.Size() > segmentSize+2*maxEntrySize {
		return nil, withKind(ErrCorrupt, "%d bytes: larger than any segment", fi.Size())
	}
	return io.ReadAll(io.LimitReader(f, fi.Size()))
}

func allZero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}

// logWriter appends rounds of entries to the active segment. Only the
// committer's leader calls append, one round at a time; the applier
// reads the segment list (under mu) to delete what it has applied.
type logWriter struct {
	dir, base string
	id        [16]byte
	noSync    bool

	f       *os.File // the active segment; nil until the first round, and after a failure
	size    int64    // bytes in the active segment
	maxSize int64    // the active segment's size past which a round starts a new one
	next    uint64   // the LSN the next entry gets
	gen     uint64   // the last generation used
	buf     []byte   // the round being written, reused

	// failWrite, when a test sets it, can fail the write of a round (or,
	// with header set, of a new segment's header): before anything is
	// written, or with written set, once the bytes are in the file and
	// before they are synced, as a failed fdatasync leaves them.
	failWrite func(header, written bool) error

	// renew makes the next round start a new segment: the active one is
	// gone from the directory (activeGone).
	renew atomic.Bool
	// dep is the generation of the active segment once its header is
	// durable, 0 while no segment is known to be on disk (before the
	// first, or once the active one was found gone): what the applier
	// records as the log the file depends on (metaLogDep). Set by rotate,
	// cleared under the Store's stopMu, which every round holds.
	dep atomic.Uint64

	mu       sync.Mutex
	segments []segment   // every segment not yet deleted, oldest first, the active one last
	activeID os.FileInfo // the active segment's file, for activeGone; nil before the first
}

// errLogPoisoned is the cause of every write refused because the log has
// no segment to write to: starting one failed (after a failed round, or
// the first after Open). Nothing of such a write was written; the next
// write tries again.
var errLogPoisoned = errors.New("the log has no segment to write to; nothing of this write was written")

// append writes the round's entries (payloads, in order), durably, and
// returns the LSN of the first. On error nothing of the round is in the
// journal, unless the error matches ErrMaybeCommitted: then the round may
// or may not be, until a later round succeeds, which voids it.
//
// A write that fails is tried once more, on a new segment that voids the
// first try: a disk that failed one fdatasync (a transient I/O error) need
// not fail the writers, as long as the second copy is durable.
func (w *logWriter) append(payloads [][]byte) (uint64, error) {
	full := w.f != nil && w.size >= w.maxSize
	if full || w.f == nil || w.renew.Swap(false) {
		// A new segment starts at the next LSN. After a failure, that is
		// the failed round's first: its segment voids what the failed
		// write left.
		var old *os.File
		at := w.size
		if full && !w.renew.Load() {
			// Left whole (not found gone): sealed once the new one is
			// started.
			old, w.f = w.f, nil
		}
		err := w.rotate()
		if old != nil {
			if err == nil {
				w.seal(old, at)
			}
			_ = old.Close()
		}
		if err != nil {
			return 0, errorf("%w (%w)", err, errLogPoisoned)
		}
	}
	first := w.next
	buf := appendRound(w.buf[:0], &w.id, first, payloads)
	w.buf = buf
	if cap(w.buf) > 4<<20 {
		w.buf = nil // one huge round must not stay in memory
	}
	wrote, whole, err := w.write(buf)
	for try := 0; err != nil; try++ {
		w.grow(int64(len(buf))) // the failed write's bytes may be in the file
		if ferr := w.fail(err, wrote, whole); ferr != nil || try == 1 {
			if ferr == nil {
				ferr = errorf("log write: %w", err)
			}
			return 0, ferr
		}
		wrote, whole, err = w.write(buf)
	}
	w.size += int64(len(buf))
	w.next += uint64(len(payloads))
	w.mu.Lock()
	active := &w.segments[len(w.segments)-1]
	active.size += int64(len(buf))
	active.end = w.next
	w.mu.Unlock()
	return first, nil
}

// seal writes the seal of the segment before the active one, whose file
// is old and whose rounds end at offset at, naming the active one, and
// makes it durable. A seal that fails
// only leaves that segment as a release without seals would: its writes
// are durable already, and the active segment's header too.
func (w *logWriter) seal(old *os.File, at int64) {
	if _, err := old.WriteAt(seal(&w.id, w.gen, w.next), at); err != nil {
		return
	}
	if !w.noSync {
		_ = fdatasync(old)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Unless the applier has deleted it meanwhile, it is the one before
	// the active one.
	if n := len(w.segments); n >= 2 && w.segments[n-2].gen < w.gen {
		w.segments[n-2].size += sealSize
		w.segments[n-2].sealed = w.gen
	}
}

// grow counts n more bytes, a failed write's, in the last segment.
func (w *logWriter) grow(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.segments) > 0 {
		w.segments[len(w.segments)-1].size += n
	}
}

// bytes returns the size of the log's segments on disk, as the writer
// counts them.
func (w *logWriter) bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, seg := range w.segments {
		n += seg.size
	}
	return n
}

// write writes buf at the end of the active segment and makes it durable.
// wrote is false when it failed before any byte of buf reached the file
// (a write(2) that fails writes nothing); whole is true when all of buf
// was written and only making it durable failed.
func (w *logWriter) write(buf []byte) (wrote, whole bool, err error) {
	if err := w.inject(false, false); err != nil {
		return false, false, err
	}
	if n, err := w.f.WriteAt(buf, w.size); err != nil {
		return n > 0 || w.grew(), false, err
	}
	if err := w.inject(false, true); err != nil {
		return true, true, err
	}
	if w.noSync {
		return true, true, nil
	}
	// The segment's name was made durable when it was started (rotate).
	return true, true, fdatasync(w.f)
}

// grew reports whether the active segment's file holds more than the
// rounds written to it, after a write to it failed. os.File.WriteAt
// returns 0, not the bytes written, when a pwrite wrote part of them and
// the next failed (a full disk, at the page it has no room for): a round
// cut short in its padding is whole in the file, and its writers must not
// be told that nothing was written. A file whose size cannot be had may
// hold anything.
func (w *logWriter) grew() bool {
	fi, err := w.f.Stat()
	return err != nil || fi.Size() > w.size
}

// fail handles a round that failed with err: unless nothing of it was
// written (wrote false), the round's bytes may be anywhere between absent
// and whole on disk. A new segment starting at the round's first LSN voids
// them; once its header is durable the round is surely not in the journal,
// and fail returns nil. If the new segment cannot be made durable, the
// round may come back after a crash: the error then matches
// ErrMaybeCommitted, and the next round tries again. A round of which
// nothing reached the file cannot come back: a full disk fails its write
// and the new segment alike, and its writers are told, plainly, that
// nothing was written.
//
// Only a round whose fdatasync failed (whole) leaves the marker of a
// failed write (markWriteFailed): the kernel may keep its bytes in memory,
// marked written, that the disk does not hold. The bytes of a write cut
// short (a full disk) are dirty, as any write's: they reach the disk as
// ever, and a writeback of them that fails is reported to the next Open's
// fdatasync (syncRecovered), an error no descriptor has seen being
// reported to every one. Marked, the next Open would write the whole
// journal again, after a full disk: minutes for a large journal, and on a
// copy-on-write file system as much free space as its size, refused
// without it.
func (w *logWriter) fail(err error, wrote, whole bool) error {
	w.close()
	if rerr := w.rotate(); rerr != nil {
		if !wrote {
			return errorf("writing the log failed before any of the write reached it (%w), and starting a new segment failed too (%v); nothing of this write was written: "+
				"check the disk (free space, I/O errors), then write again", err, rerr)
		}
		ferr := errorf("%w: writing the log failed (%w), and starting a new segment to void the write failed too (%v); "+
			"the write may come back after a restart, or be gone once a later write succeeds: check the disk, "+
			"never redo the operation under a new key, and look the record up (Get) once a later write has succeeded or the journal was opened again", ErrMaybeCommitted, err, rerr)
		if whole {
			ferr = unmarked(ferr, markWriteFailed(w.dir, w.base, ferr))
		}
		return ferr
	}
	return nil
}

// close closes the active segment's file; the segment stays on disk until
// applied.
func (w *logWriter) close() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// rotate starts a new segment at w.next and makes its header and name
// durable.
func (w *logWriter) rotate() error {
	w.close()
	var f *os.File
	var path string
	var err error
	for range openTries {
		// A name already taken is a segment this Store did not list (a
		// deletion that a crash undid): it is never overwritten.
		w.gen++
		path = segmentPath(w.dir, w.base, w.gen)
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return errorf("new log segment: %w", err)
	}
	h := segHeader{gen: w.gen, start: w.next, id: w.id}
	herr := w.writeHeader(f, h)
	if herr != nil {
		_ = f.Close()
		// Removed if it can be. If not, it stays listed and on disk: with
		// its header there it voids only what the next segment, which
		// starts where it does, voids too; without, it holds nothing.
		if os.Remove(path) == nil {
			return errorf("new log segment %s: %w", filepath.Base(path), herr)
		}
	}
	fi, _ := f.Stat() // nil on error: activeGone then never finds it gone
	w.mu.Lock()
	w.segments = append(w.segments, segment{path: path, segHeader: h, end: h.start, size: segHeaderSize})
	w.activeID = fi
	w.mu.Unlock()
	if herr != nil {
		return errorf("new log segment %s: %w", filepath.Base(path), herr)
	}
	w.f, w.size = f, segHeaderSize
	w.dep.Store(w.gen)
	return nil
}

func (w *logWriter) writeHeader(f *os.File, h segHeader) error {
	if err := w.inject(true, false); err != nil {
		return err
	}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return err
	}
	if err := w.inject(true, true); err != nil {
		return err
	}
	if w.noSync {
		return nil
	}
	if err := fdatasync(f); err != nil {
		return err
	}
	return syncDir(w.dir)
}

// deleteApplied deletes, oldest first, the segments whose entries bbolt
// holds (applied), all of them with all set (Close, once everything is
// applied), otherwise every one but the active. A segment's entries end
// where they stop or where the next segment starts (which voids the rest).
// The oldest goes first so that a crash midway never leaves a segment
// whose entries a newer segment voided without that newer segment.
func (w *logWriter) deleteApplied(applied uint64, all bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	var err error
	for i, seg := range w.segments {
		last := i == len(w.segments)-1
		if last && !all {
			break
		}
		if !seg.blank {
			end := seg.end
			for _, later := range w.segments[i+1:] {
				if !later.blank { // a blank one voids nothing
					end = min(end, later.start)
					break
				}
			}
			if end > applied+1 {
				break
			}
		}
		if err = os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			break
		}
		err = nil
		n++
	}
	w.segments = w.segments[n:]
	if n > 0 && !w.noSync {
		err = errors.Join(err, syncDir(w.dir))
	}
	return err
}

// inject returns the error a test's failWrite makes a step fail with.
func (w *logWriter) inject(header, written bool) error {
	if w.failWrite == nil {
		return nil
	}
	return w.failWrite(header, written)
}

// activeGone reports whether the active segment is no longer the file at
// its path (removed, by a cleanup job that deletes "*.log*" files, say, or
// replaced), or no longer starts with the header written to it (truncated
// in place, as logrotate's copytruncate does: later rounds land after a
// hole of zeros, and Open then refuses the segment). Every round written
// to it since is acknowledged but in a file nobody can read back: until
// the applier copies it into the journal file, a crash loses it. It also
// returns the segment's path and whether the file there is still the
// segment (truncated), for the caller to remove once all of it is
// applied. A Stat or read that fails for another reason proves nothing.
func (w *logWriter) activeGone() (path string, truncated, gone bool) {
	w.mu.Lock()
	id := w.activeID
	var h segHeader
	if n := len(w.segments); n > 0 {
		path, h = w.segments[n-1].path, w.segments[n-1].segHeader
	}
	w.mu.Unlock()
	if id == nil || path == "" {
		return "", false, false
	}
	f, err := os.Open(path)
	if err != nil {
		return path, false, errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return path, false, false
	}
	if !os.SameFile(fi, id) {
		return path, false, true
	}
	got := make([]byte, segHeaderSize)
	if _, err := f.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		return path, false, false
	}
	if !bytes.Equal(got, h.encode()) {
		return path, true, true
	}
	return path, false, false
}

// removeDead removes the segment file at path, found truncated
// (activeGone) and now wholly applied: left there, its zeroed header would
// make the next Open refuse the log. Segment names are never reused (see
// rotate), so the path names that segment or nothing. It stays listed;
// deleteApplied takes it off.
func (w *logWriter) removeDead(path string) {
	if err := os.Remove(path); err == nil && !w.noSync {
		_ = syncDir(w.dir)
	}
}
