package journal

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Both meta pages damaged under an open Store while other goroutines read
// the file (TestMetaPagesDamagedUnderOpenStoreFailClosed damages them
// between calls). Modelled, as that test, on a bad sector or a stray write
// under a journal being read: nothing a server does. bbolt's read Begin
// panics holding its meta lock, which every other Begin and every read's
// Rollback take: a read that had found the Store usable a moment before
// waited for it for ever, inside bbolt.

// openCopiedA opens a journal at path whose record "a" is in the file
// only (copied there, gone from the overlay): a Get of it reads the file.
// The applier waits: only the calls of the test touch the file.
func openCopiedA(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	_, err = s.Create(context.Background(), newRecord("a"))
	require.NoError(t, err)
	require.NoError(t, s.Checkpoint(context.Background()))
	return s
}

// TestHeldLocksEndConcurrentReads: eight goroutines Get a record of the
// file over and over as both meta pages are damaged. The first Begin to
// meet them panics holding bbolt's meta lock; the reads queued behind it
// on that lock, in Begin or in Rollback, never returned (five runs of
// five). Every read must come back with ErrCorrupt, and Close must return.
func TestHeldLocksEndConcurrentReads(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := openCopiedA(t, path)
	// A fresh key's Create looks for it in the committer's kept read
	// transaction, which stays open, as in a working payment process.
	_, err := s.Create(ctx, newRecord("b"))
	require.NoError(t, err)

	const readers = 8
	var started sync.WaitGroup
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) }) // the readers end if a wait below failed
	errs := make(chan error, readers)
	for range readers {
		started.Add(1)
		go func() {
			first := true
			for {
				_, err := s.Get(ctx, "s", "a")
				if first {
					started.Done()
					first = false
				}
				// Between the two pages' damage bbolt reads the older
				// meta page, of a file before "a" was copied in.
				if (err != nil && !errors.Is(err, ErrNotFound)) || stop.Load() {
					errs <- err
					return
				}
			}
		}()
	}
	started.Wait()
	damageMetaPage(t, path, 0)
	damageMetaPage(t, path, 1)
	within(t, "the reads under way", func() {
		for range readers {
			assert.ErrorIs(t, <-errs, ErrCorrupt)
		}
	})
	stop.Store(true)
	require.True(t, s.held.Load(), "the fixture: bbolt's locks are held")
	within(t, "Close", func() {
		assert.ErrorIs(t, s.Close(), ErrCorrupt)
	})
}

// BenchmarkGetFile is a Get of a record the file holds and the overlay
// does not: a read transaction begun and rolled back per call, the path a
// gate around bbolt's Begin and Rollback lies on. "parallel" runs it from
// GOMAXPROCS goroutines, which contend for bbolt's meta lock.
func BenchmarkGetFile(b *testing.B) {
	ctx := context.Background()
	s := openCopiedA(b, filepath.Join(b.TempDir(), "j.db"))
	defer s.Close()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Get(ctx, "s", "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Get(ctx, "s", "a"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
