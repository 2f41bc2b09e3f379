package journal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The log's recovery: what Open reads back from segments that a crash,
// a failed disk or an operator left as they are.

// crashedJournal opens a journal whose applier never runs, lets write
// make its writes, and abandons the Store as a killed process would: every
// write is in the log, none in the file.
func crashedJournal(t *testing.T, write func(s *Store)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	write(s)
	s.crash(t)
	return path
}

// createKeys creates records k0 … k(n-1), one round each.
func createKeys(t *testing.T, n int) func(s *Store) {
	return func(s *Store) {
		for i := range n {
			_, err := s.Create(context.Background(), rvRecord(fmt.Sprint("k", i), rvT0))
			require.NoError(t, err)
		}
	}
}

// segmentData returns the journal's one log segment and its bytes.
func segmentData(t *testing.T, path string) (string, []byte) {
	t.Helper()
	segs := segmentsOf(t, path)
	require.Len(t, segs, 1)
	data, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	return segs[0], data
}

// segmentsOf returns the paths of path's log segments, oldest first.
func segmentsOf(t *testing.T, path string) []string {
	t.Helper()
	dir, base := logLocation(path)
	paths, err := segmentPaths(dir, base)
	require.NoError(t, err)
	slices.Sort(paths) // generations are fixed-width hex
	return paths
}

// copyJournal copies the journal at path and its log into a new directory.
func copyJournal(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range append([]string{path}, segmentsOf(t, path)...) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(p)), data, 0o600))
	}
	return filepath.Join(dir, filepath.Base(path))
}

// entryEnds returns the offset just past each entry of the segment data of
// the journal at path, whose rounds hold one entry each (one writer).
func entryEnds(t *testing.T, path string, data []byte) []int {
	t.Helper()
	id := readID(t, path)
	var ends []int
	off := segHeaderSize
	for off < len(data) {
		_, count, body, ok := roundAt(data[off:], &id)
		require.True(t, ok, "round at %d", off)
		require.Equal(t, 1, count, "entries of the round at %d", off)
		ends = append(ends, off+roundHeaderSize+len(body))
		off = roundEnd(off, len(body))
	}
	return ends
}

// TestLogTornTail: a crash can leave the last write to the log cut at any
// byte. Open reads every entry before the cut, whole, and nothing of the
// cut one: each record is as its last entry before the cut left it.
func TestLogTornTail(t *testing.T) {
	ctx := context.Background()
	const n = 6
	path := crashedJournal(t, func(s *Store) {
		for i := range n {
			key := fmt.Sprint("k", i)
			_, err := s.Create(ctx, rvRecord(key, rvT0))
			require.NoError(t, err)
			_, err = s.Update(ctx, "s", key, func(r *Record) error {
				r.State, r.Settled = StateSucceeded, rvT0
				return nil
			})
			require.NoError(t, err)
		}
	})
	_, data := segmentData(t, path)
	ends := entryEnds(t, path, data)
	require.Len(t, ends, 2*n, "a create and a settle per record")
	// Every cut within the last three entries, and a few before.
	var cuts []int
	for c := ends[2*n-4]; c <= len(data); c++ {
		cuts = append(cuts, c)
	}
	cuts = append(cuts, segHeaderSize, ends[0]-1, ends[0], ends[3]+5)
	for _, cut := range cuts {
		whole := 0
		for _, e := range ends {
			if e <= cut {
				whole++
			}
		}
		cp := copyJournal(t, path)
		require.NoError(t, os.Truncate(segmentsOf(t, cp)[0], int64(cut)))
		for _, ro := range []bool{true, false} {
			var opts []Option
			if ro {
				opts = append(opts, ReadOnly())
			}
			s, err := Open(cp, opts...)
			require.NoError(t, err, "cut at %d, read-only %v", cut, ro)
			for i := range n {
				r, err := s.Get(ctx, "s", fmt.Sprint("k", i))
				switch {
				case 2*i >= whole:
					require.ErrorIs(t, err, ErrNotFound, "k%d, cut at %d", i, cut)
				case 2*i+1 >= whole:
					require.NoError(t, err, "k%d, cut at %d", i, cut)
					require.Equal(t, StatePending, r.State, "k%d: its settle was cut", i)
				default:
					require.NoError(t, err, "k%d, cut at %d", i, cut)
					require.Equal(t, StateSucceeded, r.State, "k%d", i)
				}
			}
			st, err := s.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, (whole+1)/2, st.Total, "cut at %d", cut)
			require.NoError(t, s.Close())
		}
		// The writable Open applied the log and Close removed it.
		require.Empty(t, segmentsOf(t, cp), "cut at %d: segments after a clean Close", cut)
		require.NoError(t, CheckFile(cp))
	}
}

// failOnce makes the log's next write of a round fail after its bytes are
// in the file, as a failed fdatasync would: the round is written again on
// a new segment, which voids the first try.
func failOnce(s *Store) {
	done := false
	s.log.failWrite = func(header, written bool) error {
		if header || !written || done {
			return nil
		}
		done = true
		return syscall.EIO
	}
}

// TestLogRetriedRoundCountsOnce: a round written twice (the first try's
// fdatasync failed; its bytes stayed in the old segment) is read back
// once, from the new segment; the old segment's copy is void.
func TestLogRetriedRoundCountsOnce(t *testing.T) {
	ctx := context.Background()
	path := crashedJournal(t, func(s *Store) {
		_, err := s.Create(ctx, rvRecord("a", rvT0))
		require.NoError(t, err)
		failOnce(s)
		_, err = s.Update(ctx, "s", "a", func(r *Record) error {
			r.Attempts = append(r.Attempts, Attempt{Number: 1, Kind: AttemptSubmit, Start: rvT0})
			return nil
		})
		require.NoError(t, err)
		_, err = s.Create(ctx, rvRecord("b", rvT0))
		require.NoError(t, err)
	})
	segs := segmentsOf(t, path)
	require.Len(t, segs, 2)
	old, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	require.Len(t, entryEnds(t, path, old), 2, "the create, and the first try of the update")
	st, err := scanLog(filepath.Dir(path), filepath.Base(path), readID(t, path), 0)
	require.NoError(t, err)
	require.Len(t, st.entries, 3, "create a, update a (once), create b")
	require.Equal(t, uint64(4), st.next)

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	a, err := s.Get(ctx, "s", "a")
	require.NoError(t, err)
	require.Len(t, a.Attempts, 1)
}

// readID reads the journal id from the file at path.
func readID(t *testing.T, path string) [16]byte {
	t.Helper()
	s, err := Open(path, ReadOnly())
	require.NoError(t, err)
	defer s.Close()
	var id [16]byte
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		copy(id[:], tx.Bucket(bucketMeta).Get(metaID))
		return nil
	}))
	return id
}

// TestLogDamage: what Open refuses (ErrCorrupt, naming the segment), and
// what it accepts, among the ways a log can be found.
func TestLogDamage(t *testing.T) {
	ctx := context.Background()
	// Two segments: "a" in the first, the update of "a" (retried) and "b"
	// in the second.
	build := func(t *testing.T) string {
		return crashedJournal(t, func(s *Store) {
			_, err := s.Create(ctx, rvRecord("a", rvT0))
			require.NoError(t, err)
			failOnce(s)
			_, err = s.Update(ctx, "s", "a", func(r *Record) error { r.Review = "x"; return nil })
			require.NoError(t, err)
			_, err = s.Create(ctx, rvRecord("b", rvT0))
			require.NoError(t, err)
		})
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, path string, segs []string)
		want   error  // nil: opens
		msg    string // in the error
	}{
		{
			name: "entry of an older segment damaged",
			damage: func(t *testing.T, _ string, segs []string) {
				flipByte(t, segs[0], segHeaderSize+roundHeaderSize+entryHeaderSize+3)
			},
			want: ErrCorrupt, msg: "acknowledged writes are",
		},
		{
			name: "older segment missing",
			damage: func(t *testing.T, _ string, segs []string) {
				require.NoError(t, os.Remove(segs[0]))
			},
			want: ErrCorrupt, msg: "acknowledged writes are missing",
		},
		{
			name: "header of an older segment damaged",
			damage: func(t *testing.T, _ string, segs []string) {
				flipByte(t, segs[0], 20)
			},
			want: ErrCorrupt, msg: "damaged header",
		},
		{
			name: "segment of another journal",
			damage: func(t *testing.T, path string, segs []string) {
				other := crashedJournal(t, func(s *Store) {
					_, err := s.Create(ctx, rvRecord("other", rvT0))
					require.NoError(t, err)
				})
				data, err := os.ReadFile(segmentsOf(t, other)[0])
				require.NoError(t, err)
				dir, base := logLocation(path)
				require.NoError(t, os.WriteFile(segmentPath(dir, base, 99), data, 0o600))
			},
			want: ErrCorrupt, msg: "belongs to another journal",
		},
		{
			name: "segment of a newer log format",
			damage: func(t *testing.T, _ string, segs []string) {
				data, err := os.ReadFile(segs[1])
				require.NoError(t, err)
				h, err := parseSegHeader(data)
				require.NoError(t, err)
				head := h.encode()
				head[11] = logVersion + 1 // the version's low byte
				binary.BigEndian.PutUint32(head[48:], crc32.Checksum(head[:48], castagnoli))
				copy(data, head)
				require.NoError(t, os.WriteFile(segs[1], data, 0o600))
			},
			want: ErrVersion, msg: "upgrade idem",
		},
		{
			name: "newest segment empty (a crash while it was created)",
			damage: func(t *testing.T, path string, segs []string) {
				dir, base := logLocation(path)
				require.NoError(t, os.WriteFile(segmentPath(dir, base, 7), nil, 0o600))
				require.NoError(t, os.WriteFile(segmentPath(dir, base, 8), make([]byte, segHeaderSize), 0o600))
			},
		},
		{
			name: "garbage named as a segment",
			damage: func(t *testing.T, path string, segs []string) {
				dir, base := logLocation(path)
				require.NoError(t, os.WriteFile(segmentPath(dir, base, 9), []byte("not a segment at all, and long enough to have a header..."), 0o600))
			},
			want: ErrCorrupt, msg: "not a journal log segment",
		},
		{
			name: "a name that only looks like a segment's",
			damage: func(t *testing.T, path string, segs []string) {
				require.NoError(t, os.WriteFile(path+logInfix+"backup", []byte("x"), 0o600))
				require.NoError(t, os.WriteFile(path+logInfix+"00000000000000zz", []byte("x"), 0o600))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := build(t)
			segs := segmentsOf(t, path)
			require.Len(t, segs, 2)
			tt.damage(t, path, segs)
			for _, ro := range []bool{true, false} {
				var opts []Option
				if ro {
					opts = append(opts, ReadOnly())
				}
				s, err := Open(path, opts...)
				if tt.want != nil {
					require.ErrorIs(t, err, tt.want, "read-only %v", ro)
					require.ErrorContains(t, err, tt.msg)
					require.ErrorContains(t, err, path, "the error names the journal")
					continue
				}
				require.NoError(t, err, "read-only %v", ro)
				a, err := s.Get(ctx, "s", "a")
				require.NoError(t, err)
				require.Equal(t, "x", a.Review)
				_, err = s.Get(ctx, "s", "b")
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}
		})
	}
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[off] ^= 0xFF
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// TestLogReadOnlyMatchesApplied: a read-only Store over a journal whose log
// holds writes the file does not (a process stopped without closing it)
// answers every read as the journal does once the log is applied: the
// merge of the two that reads make without the write lock agrees with the
// file an Open for writing makes.
func TestLogReadOnlyMatchesApplied(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	// Times on a coarse grid: many records are due at the same time, and
	// the order among them (the file's sequence numbers) is checked too.
	at := func() time.Time { return base.Add(time.Duration(rng.IntN(1000)) * time.Second) }
	var keys []string
	path := crashedJournal(t, func(s *Store) {
		for i := range 300 {
			scope := []string{"s", "t", "u"}[rng.IntN(3)]
			key := fmt.Sprintf("%s/k%03d", scope, i)
			r := rvRecord(fmt.Sprintf("k%03d", i), at())
			r.Scope, r.Created = scope, at()
			_, err := s.Create(ctx, r)
			require.NoError(t, err)
			keys = append(keys, key)
			if i == 150 {
				// Half of it in the file: what follows changes records
				// the file holds too.
				require.NoError(t, s.applyAll())
			}
			// Change a random earlier record.
			j := rng.IntN(len(keys))
			var sc, k string
			fmt.Sscanf(keys[j], "%1s/%s", &sc, &k)
			switch rng.IntN(4) {
			case 0:
				_, err = s.Update(ctx, sc, k, func(r *Record) error {
					r.State, r.Settled = StateSucceeded, at()
					return nil
				})
			case 1:
				_, err = s.Update(ctx, sc, k, func(r *Record) error {
					r.State, r.NextDue, r.Review = StateUnknown, at(), "look"
					return nil
				})
			case 2:
				_, err = s.Resolve(ctx, sc, k, Manual{State: StateFailed, Reason: "r", By: "op", At: at()})
			default:
				_, err = s.Update(ctx, sc, k, func(r *Record) error {
					r.State, r.NextDue = StateProcessing, at()
					return nil
				})
			}
			if !errors.Is(err, ErrTerminal) {
				require.NoError(t, err)
			}
		}
	})
	type answers struct {
		lists [][]*Record
		due   [][]*Record
		open  []*Record
		stats Stats
		gets  []*Record
	}
	filters := []Filter{
		{}, {Limit: 7}, {Scope: "t"}, {Scope: "u", Limit: 3}, {Open: true}, {Open: true, Limit: 5},
		{States: []State{StateSucceeded}}, {States: []State{StateFailed}, Scope: "s"}, {Review: true},
		{CreatedBefore: base.Add(300 * time.Second)}, {States: []State{StateUnknown, StateProcessing}, Limit: 4},
	}
	read := func(s *Store) answers {
		var a answers
		for _, f := range filters {
			l, err := s.List(ctx, f)
			require.NoError(t, err)
			a.lists = append(a.lists, l)
		}
		for _, by := range []time.Duration{0, 200 * time.Second, 600 * time.Second, time.Hour} {
			for _, limit := range []int{0, 3} {
				d, err := s.Due(ctx, base.Add(by), limit)
				require.NoError(t, err)
				a.due = append(a.due, d)
			}
		}
		require.NoError(t, s.ForEachOpen(ctx, func(r *Record) error {
			a.open = append(a.open, r)
			return nil
		}))
		var err error
		a.stats, err = s.Stats(ctx)
		require.NoError(t, err)
		a.stats.FileSize = 0
		for _, k := range keys {
			var sc, key string
			fmt.Sscanf(k, "%1s/%s", &sc, &key)
			r, err := s.Get(ctx, sc, key)
			require.NoError(t, err)
			a.gets = append(a.gets, r)
		}
		return a
	}
	ro, err := Open(path, ReadOnly())
	require.NoError(t, err)
	n, _ := ro.ov.size()
	require.Greater(t, n, 100, "records only the log holds")
	merged := read(ro)
	require.NoError(t, ro.Close())

	rw, err := Open(path)
	require.NoError(t, err)
	applied := read(rw)
	require.NoError(t, rw.Close())
	require.Equal(t, applied.gets, merged.gets, "Get")
	require.Equal(t, applied.stats, merged.stats, "Stats")
	for i, f := range filters {
		require.Equal(t, applied.lists[i], merged.lists[i], "List(%+v)", f)
	}
	for i := range applied.due {
		require.Equal(t, applied.due[i], merged.due[i], "Due #%d", i)
	}
	require.Equal(t, applied.open, merged.open, "ForEachOpen")
}

// TestCompactAppliesTheLog: Compact of a journal whose log holds writes
// the file does not copies them too, and leaves no log behind.
func TestCompactAppliesTheLog(t *testing.T) {
	ctx := context.Background()
	path := crashedJournal(t, createKeys(t, 20))
	require.NotEmpty(t, segmentsOf(t, path))
	_, err := Compact(path)
	require.NoError(t, err)
	require.Empty(t, segmentsOf(t, path), "log left after Compact")
	s, err := Open(path, ReadOnly())
	require.NoError(t, err)
	defer s.Close()
	n, _ := s.ov.size()
	require.Zero(t, n)
	recs, err := s.List(ctx, Filter{})
	require.NoError(t, err)
	require.Len(t, recs, 20)
}

// TestLogBackPressure: while the file cannot take the log's writes (a
// full disk under the bbolt file, here a failing commit), the overlay
// grows only to its bound (overlayMax, lowered here); past it, writes are refused, unwritten, with
// the file's error, and taken again once the file recovers.
func TestLogBackPressure(t *testing.T) {
	ctx := context.Background()
	const bound = 1 << 20
	s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync(), withApplyDelay(time.Millisecond), withOverlayMax(bound))
	require.NoError(t, err)
	defer s.Close()
	diskFull := errors.New("no space left on device (injected)")
	var broken atomic.Bool
	broken.Store(true)
	s.ap.mu.Lock()
	s.ap.failApply = func() error {
		if broken.Load() {
			return diskFull
		}
		return nil
	}
	s.ap.mu.Unlock()
	big := make([]byte, 16<<10)
	var refused error
	var n int
	for n = 0; n < 4*bound/len(big); n++ {
		r := rvRecord(fmt.Sprint("k", n), rvT0)
		r.Body, r.BodySHA = big, sha256.Sum256(big)
		if _, refused = s.Create(ctx, r); refused != nil {
			break
		}
	}
	require.ErrorIs(t, refused, diskFull, "writes past the bound")
	require.ErrorContains(t, refused, "refused until it can")
	_, b := s.ov.size()
	require.LessOrEqual(t, b, int64(bound+len(big)+4096), "the overlay stays bounded")
	_, err = s.Get(ctx, "s", fmt.Sprint("k", n))
	require.ErrorIs(t, err, ErrNotFound, "the refused write is not there")

	broken.Store(false)
	r := rvRecord("after", rvT0)
	_, err = s.Create(ctx, r)
	require.NoError(t, err, "once the file takes writes again")
	for i := range n {
		_, err := s.Get(ctx, "s", fmt.Sprint("k", i))
		require.NoError(t, err, "k%d", i)
	}
	require.NoError(t, s.viewChecked())
}

// TestCheckpoint: Checkpoint puts every acknowledged write into the file
// at once: a copy of the file alone then holds them all.
func TestCheckpoint(t *testing.T) {
	ctx := context.Background()
	s, path := rvOpen(t, withApplyDelay(time.Hour))
	for i := range 5 {
		_, err := s.Create(ctx, rvRecord(fmt.Sprint("k", i), rvT0))
		require.NoError(t, err)
	}
	require.Equal(t, 5, s.ov.len(), "held back by the applier's delay")
	require.NoError(t, s.Checkpoint(ctx))
	require.Zero(t, s.ov.len())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	alone := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, os.WriteFile(alone, data, 0o600))
	c, err := Open(alone, ReadOnly())
	require.NoError(t, err)
	recs, err := c.List(ctx, Filter{})
	require.NoError(t, err)
	require.Len(t, recs, 5, "the file alone")
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Checkpoint(ctx), ErrClosed)

	ro, err := Open(alone, ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	require.ErrorIs(t, ro.Checkpoint(ctx), ErrReadOnly)
}

// TestInspectCountsTheLog: Check reads the log too, and Inspect says how
// many records it holds newer than the file.
func TestInspectCountsTheLog(t *testing.T) {
	path := crashedJournal(t, createKeys(t, 3))
	rep, err := Inspect(path)
	require.NoError(t, err)
	require.Equal(t, 3, rep.Logged)
	require.Zero(t, rep.Records, "none in the file yet")
	flipByte(t, segmentsOf(t, path)[0], 20)
	_, err = Inspect(path)
	require.ErrorIs(t, err, ErrCorrupt, "a damaged log fails the check")
}
