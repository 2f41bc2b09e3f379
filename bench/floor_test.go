package bench

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// memStore keeps records in a map instead of the journal: idem's client
// with nothing written to disk, its own CPU floor. The calls a happy
// operation makes (CreateClaimed or Create and Claim, Update under the
// lease, Get, and Renew and Release when a drive needs them) stay in
// memory; everything else
// goes to the embedded, empty journal, so Due and ClaimDue find nothing
// and Run never visits the map. Settled records are dropped so the map
// stays small. Never durable: a benchmark's floor only.
type memStore struct {
	*journal.Store
	mu    sync.Mutex
	m     map[memKey]*memEntry
	token uint64 // last lease token handed out
}

// memEntry is a record and its lease (a zero Token: none).
type memEntry struct {
	rec   *journal.Record
	lease journal.Lease
}

// memKey names a record in the map without building a string per call.
type memKey struct{ scope, key string }

func (s *memStore) Create(_ context.Context, rec *journal.Record) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey{rec.Scope, rec.Key}
	if old, ok := s.m[k]; ok {
		return copyRecord(old.rec), journal.ErrExists
	}
	s.m[k] = &memEntry{rec: copyRecord(rec)}
	return copyRecord(rec), nil
}

// CreateClaimed is Create with the lease (idem.CreateClaimer), as the
// journal's is: without it, the embedded journal's would take Submit's
// record.
func (s *memStore) CreateClaimed(_ context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey{rec.Scope, rec.Key}
	if old, ok := s.m[k]; ok {
		return copyRecord(old.rec), journal.Lease{}, journal.ErrExists
	}
	s.token++
	e := &memEntry{rec: copyRecord(rec), lease: journal.Lease{Scope: rec.Scope, Key: rec.Key, Owner: owner, Token: s.token, Expires: expires}}
	s.m[k] = e
	return copyRecord(rec), e.lease, nil
}

func (s *memStore) Get(_ context.Context, scope, key string) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[memKey{scope, key}]
	if !ok {
		return nil, journal.ErrNotFound
	}
	return copyRecord(e.rec), nil
}

// Update is fenced as the journal's is: a write under a lease that is no
// longer the record's is refused.
func (s *memStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	l, leased, err := journal.CheckLease(ctx, scope, key)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey{scope, key}
	e, ok := s.m[k]
	if !ok {
		return nil, journal.ErrNotFound
	}
	if e.rec.State.Terminal() {
		return nil, journal.ErrTerminal
	}
	if leased && e.lease.Token != l.Token {
		return nil, journal.ErrLeaseLost
	}
	r := copyRecord(e.rec)
	if err := fn(r); err != nil {
		return nil, err
	}
	if r.State.Terminal() {
		delete(s.m, k)
	} else {
		e.rec = r
	}
	return copyRecord(r), nil
}

func (s *memStore) Claim(_ context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[memKey{scope, key}]
	if !ok {
		return nil, journal.Lease{}, journal.ErrNotFound
	}
	if e.lease.Held(owner, now) {
		return copyRecord(e.rec), e.lease, journal.ErrLeased
	}
	s.token++
	e.lease = journal.Lease{Scope: scope, Key: key, Owner: owner, Token: s.token, Expires: expires}
	return copyRecord(e.rec), e.lease, nil
}

func (s *memStore) Renew(_ context.Context, l journal.Lease, expires time.Time) (journal.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[memKey{l.Scope, l.Key}]
	if !ok || l.Token == 0 || e.lease.Token != l.Token {
		return journal.Lease{}, journal.ErrLeaseLost
	}
	e.lease.Expires = expires
	return e.lease, nil
}

func (s *memStore) Release(_ context.Context, l journal.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[memKey{l.Scope, l.Key}]
	if !ok || l.Token == 0 || e.lease.Token != l.Token {
		return journal.ErrLeaseLost
	}
	e.lease = journal.Lease{}
	return nil
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
	c, err := idem.New(&memStore{Store: s, m: map[memKey]*memEntry{}})
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

// BenchmarkClientAlone is idem's client and nothing else: Submit over
// memStore, one caller, with an in-memory transport that answers every
// request as the bench server does (201, a result body). No sockets, no
// server process, no journal: allocs/op and B/op are the client's own
// (with memStore's record copies and the transport's response), and
// under valgrind --tool=callgrind the instruction count per operation is
// the same from run to run (see CLIENT_CPU_NOTES.md).
func BenchmarkClientAlone(b *testing.B) {
	s, err := journal.Open(filepath.Join(b.TempDir(), "unused.journal"), journal.WithUnsafeNoSync())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := idem.New(&memStore{Store: s, m: map[memKey]*memEntry{}}, idem.WithHTTPClient(&http.Client{Transport: &answering{}}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Submit(ctx, idem.Request{URL: "http://api.example/v1/orders", Body: body})
		if err != nil || res.State != idem.StateSucceeded {
			b.Fatal(res, err)
		}
	}
}

// answering is a RoundTripper that answers like plainHandler, in memory.
type answering struct{ seq atomic.Int64 }

func (t *answering) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	s := `{"state":"succeeded","resourceId":"ord_` + strconv.FormatInt(t.seq.Add(1), 10) + `"}`
	return &http.Response{
		StatusCode: http.StatusCreated, Status: "201 Created", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(s))}},
		Body:          io.NopCloser(strings.NewReader(s)),
		ContentLength: int64(len(s)),
		Request:       r,
	}, nil
}
