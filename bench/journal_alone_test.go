package bench

import (
	"context"
	"crypto/sha256"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

var bodySHA = sha256.Sum256(body)

// journalOnly writes what idem's Submit journals on the happy path, with
// no HTTP at all: Create (pending) then Update to succeeded, fsync'd,
// through the journal's group commit. newKey makes each operation's key.
type journalOnly struct {
	s      *journal.Store
	newKey func() string
}

func openJournalOnly(dir string, newKey func() string) (client, error) {
	s, err := journal.Open(filepath.Join(dir, "journal.db"))
	if err != nil {
		return nil, err
	}
	return &journalOnly{s: s, newKey: newKey}, nil
}

func (c *journalOnly) do(ctx context.Context, url string) error {
	now := time.Now()
	key := c.newKey()
	_, err := c.s.Create(ctx, &journal.Record{
		Scope: idem.DefaultScope, Key: key, Method: http.MethodPost, URL: url,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   body, BodySHA: bodySHA, State: journal.StatePending,
		Created: now, Updated: now, NextDue: now.Add(time.Minute),
	})
	if err != nil {
		return err
	}
	_, err = c.s.Update(ctx, idem.DefaultScope, key, func(r *journal.Record) error {
		t := time.Now()
		r.State, r.Settled, r.Updated = journal.StateSucceeded, t, t
		r.Result = &journal.Result{StatusCode: http.StatusCreated, ResourceID: "ord_1"}
		return nil
	})
	return err
}

func (c *journalOnly) close() { _ = c.s.Close() }

// drain copies the journal's log into its file (see drainer).
func (c *journalOnly) drain() error { return checkpoint(c.s) }

var (
	// journalC uses the keys idem generates (idem.NewKey).
	journalC = contender{"journal-alone", func(dir string) (client, error) { return openJournalOnly(dir, idem.NewKey) }}
	// journalRandomC uses random UUIDv4 keys, as a caller choosing its
	// own random keys does.
	journalRandomC = contender{"journal-alone-v4keys", func(dir string) (client, error) { return openJournalOnly(dir, uuid.NewString) }}
)

// BenchmarkJournalAlone is the journal's share of the 64-caller target:
// the two fsync'd writes of a happy operation (create, settle) from 64
// goroutines, with no HTTP, against bare net/http's POSTs. Compare ops/s.
func BenchmarkJournalAlone(b *testing.B) {
	interleave(b, []contender{journalC, journalRandomC, bareC}, func(b *testing.B, c contender) {
		withClient(b, c, func(cl client) { runOps(b, cl, servers.plain+"/v1/orders", 64) })
	})
}

// BenchmarkRealisticLatency: the server answers each request after 2 ms,
// as a real API nearby would; 64 callers. Compare ops/s and p99-µs;
// idem-nosync shows what the journal's fsyncs cost there.
func BenchmarkRealisticLatency(b *testing.B) {
	interleave(b, []contender{idemC, idemNoSyncC, bareC}, func(b *testing.B, c contender) {
		withClient(b, c, func(cl client) { runOps(b, cl, servers.plain+slowPrefix+"/v1/orders", 64) })
	})
}
