package idem_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// unboundedKeyIgnoring is a Store that keeps every endpoint ignoring the
// key, with no bound: idem.KeyIgnoringStore lets a Store keep a bounded
// number, not all Stores must.
type unboundedKeyIgnoring struct {
	*memStore
	mu  sync.Mutex
	set map[string]struct{}
}

func (s *unboundedKeyIgnoring) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if endpoint == "" {
		return fmt.Errorf("add endpoint ignoring the key: %w: empty", journal.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[endpoint] = struct{}{}
	return nil
}

func (s *unboundedKeyIgnoring) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for e := range s.set {
			if !yield(e) {
				return
			}
		}
	}), nil
}

var _ idem.KeyIgnoringStore = (*unboundedKeyIgnoring)(nil)

// A Store that keeps every endpoint ignoring the key, each durably when
// AddKeyIgnoring says nil, keeps the contract the Client relies on: the
// conformance suite every Store must pass took it for broken, asking
// journal.ErrKeyIgnoringFull past journal.MaxKeyIgnoringEndpoints, a bound
// idem.KeyIgnoringStore leaves to the Store. What it must refuse is a nil
// for an endpoint it does not keep.
func TestUnboundedKeyIgnoringStoreConformance(t *testing.T) {
	journaltest.Run(t, func(testing.TB) idem.Store {
		return &unboundedKeyIgnoring{memStore: newMemStore(), set: map[string]struct{}{}}
	})
}
