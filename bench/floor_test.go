package bench

import (
	"context"
	"path/filepath"
	"slices"
	"sync"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// memStore keeps records in a map instead of the journal: idem's client
// with nothing written to disk, its own CPU floor. The writes a happy
// operation makes (Create, Get, Update) stay in memory; everything else
// goes to the embedded, empty journal. Settled records are dropped so the
// map stays small. Never durable: a benchmark's floor only.
type memStore struct {
	*journal.Store
	mu sync.Mutex
	m  map[string]*journal.Record
}

func (s *memStore) Create(_ context.Context, rec *journal.Record) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := rec.Scope + "\x00" + rec.Key
	if old, ok := s.m[k]; ok {
		return copyRecord(old), journal.ErrExists
	}
	s.m[k] = copyRecord(rec)
	return copyRecord(rec), nil
}

func (s *memStore) Get(_ context.Context, scope, key string) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[scope+"\x00"+key]
	if !ok {
		return nil, journal.ErrNotFound
	}
	return copyRecord(r), nil
}

func (s *memStore) Update(_ context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := scope + "\x00" + key
	old, ok := s.m[k]
	if !ok {
		return nil, journal.ErrNotFound
	}
	if old.State.Terminal() {
		return nil, journal.ErrTerminal
	}
	r := copyRecord(old)
	if err := fn(r); err != nil {
		return nil, err
	}
	if r.State.Terminal() {
		delete(s.m, k)
	} else {
		s.m[k] = r
	}
	return copyRecord(r), nil
}

// copyRecord copies what the client changes in a record.
func copyRecord(r *journal.Record) *journal.Record {
	c := *r
	c.Attempts = slices.Clone(r.Attempts)
	if r.Result != nil {
		res := *r.Result
		c.Result = &res
	}
	return &c
}

// floorC is idem's client over memStore.
var floorC = contender{"idem-nojournal", func(dir string) (client, error) {
	s, err := journal.Open(filepath.Join(dir, "unused.journal"), journal.WithUnsafeNoSync())
	if err != nil {
		return nil, err
	}
	c, err := idem.New(&memStore{Store: s, m: map[string]*journal.Record{}})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return &floorClient{idemClient{c: c}, s}, nil
}}

type floorClient struct {
	idemClient
	s *journal.Store
}

func (c *floorClient) close() { c.idemClient.close(); _ = c.s.Close() }
