package journal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Reads of the file while the applier's commits grow it. Modelled on a
// payment process at work: callers Get operations the applier copied to
// the file while new ones, with bodies of some kilobytes, are journaled.
// A commit that grows the file remaps it under bbolt's mmap lock (bbolt
// v1.5.0, db.go, beginTx: "When the mmap is remapped it will obtain a
// write lock so all transactions must finish before it can be
// remapped."), and a read Begin that
// comes meanwhile waits for the remap (Go's RWMutex admits no new reader
// while a writer waits). bbolt's Rollback lets go of the mmap lock before
// it takes the meta lock for that reason; a gate held across a read's
// whole Begin and Rollback undid that: the Begin waiting for the remap
// held the gate, the Rollback of a read open before the remap waited for
// the gate, and the remap for that Rollback.

// TestFileGrowsUnderConcurrentReads: four goroutines Get a record of the
// file over and over while 40 Creates of 256 KiB bodies are checkpointed
// one by one, growing the file (and its memory map) from 32 KiB to over
// 10 MiB. Every Checkpoint and every Get must return, the Gets with the
// record.
func TestFileGrowsUnderConcurrentReads(t *testing.T) {
	ctx := context.Background()
	// Closed at the end, not deferred: a Close would wait for a stalled
	// commit for ever.
	s := openCopiedA(t, filepath.Join(t.TempDir(), "j.db"))

	const readers, writes = 4, 40
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) }) // the readers end if a wait below failed
	var wg sync.WaitGroup
	var gets atomic.Int64
	errs := make(chan error, readers)
	for range readers {
		wg.Go(func() {
			var err error
			for err == nil && !stop.Load() {
				if _, err = s.Get(ctx, "s", "a"); err == nil {
					gets.Add(1)
				}
			}
			errs <- err
		})
	}
	body := make([]byte, 256<<10)
	within(t, "the growing commits", func() {
		for i := range writes {
			body[0] = byte(i)
			r := &Record{Scope: "s", Key: fmt.Sprint("big", i), State: StatePending, Body: body, BodySHA: sha256.Sum256(body)}
			// assert, not require: within runs this off the test's goroutine.
			if _, err := s.Create(ctx, r); !assert.NoError(t, err) || !assert.NoError(t, s.Checkpoint(ctx)) {
				return
			}
		}
	})
	stop.Store(true)
	within(t, "the reads under way", wg.Wait)
	for range readers {
		assert.NoError(t, <-errs)
	}
	assert.Positive(t, gets.Load())
	within(t, "Close", func() { assert.NoError(t, s.Close()) })
}
