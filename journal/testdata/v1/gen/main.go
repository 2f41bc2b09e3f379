// Command gen writes a journal through the journal package's public API,
// and a JSON dump of every record in it as that build reads them back. Run
// at the commit that wrote format version 1 (see ../README.md), it made
// journal.db and records.json next to it. It depends on nothing but the
// Store's public methods, so it builds at any later commit too (where it
// writes that commit's format).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem/journal"
)

func main() {
	dir := flag.String("dir", ".", "directory to write journal.db and records.json into")
	n := flag.Int("n", 400, "operations to write")
	flag.Parse()
	if err := run(*dir, *n); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, n int) error {
	ctx := context.Background()
	path := dir + "/journal.db"
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	s, err := journal.Open(path)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(20261201, 14))
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range n {
		if err := one(ctx, s, rng, base, i); err != nil {
			_ = s.Close()
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	// Prune the oldest settled records, so the file has free pages as a
	// journal in use has.
	if _, err := s.Prune(ctx, base.Add(time.Duration(n/10)*time.Second)); err != nil {
		_ = s.Close()
		return err
	}
	recs, err := s.List(ctx, journal.Filter{})
	if err != nil {
		_ = s.Close()
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	out, err := json.MarshalIndent(recs, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(dir+"/records.json", append(out, '\n'), 0o644)
}

// one writes operation i: created, then moved through the life its number
// picks (every state, reviews, manual resolutions of open and of settled
// records, replayed and refused attempts).
func one(ctx context.Context, s *journal.Store, rng *rand.Rand, base time.Time, i int) error {
	at := base.Add(time.Duration(i) * time.Second)
	scope := []string{"acct_1", "acct_2", "tenant/α"}[i%3]
	key := fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1))
	if i%7 == 0 {
		key = fmt.Sprintf("order-draft-%d", rng.IntN(1_000_000_000)) // a caller's own key
	}
	body := fmt.Appendf(nil, `{"amount":%d,"currency":"EUR","ref":"r-%d","note":%q}`, rng.IntN(100000), i, strings.Repeat("abcdefgh", rng.IntN(40)))
	rec := &journal.Record{
		Scope: scope, Key: key, Ref: fmt.Sprintf("draft-%d", i),
		Method: http.MethodPost, URL: "https://api.example.com/v1/orders",
		Header:  http.Header{"Content-Type": {"application/json"}, "X-Trace": {fmt.Sprint(i)}},
		Body:    body,
		BodySHA: sha256.Sum256(body),
		State:   journal.StatePending,
		Created: at, Updated: at, NextDue: at.Add(time.Minute),
	}
	if i%2 == 0 {
		rec.QueryURL = "https://api.example.com/v1/operations/" + key
	}
	if _, err := s.Create(ctx, rec); err != nil {
		return err
	}
	life := i % 10
	if life == 0 {
		return nil // pending, never sent
	}
	t1 := at.Add(100 * time.Millisecond)
	_, err := s.Update(ctx, scope, key, func(r *journal.Record) error {
		r.Attempts = append(r.Attempts, journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: t1})
		r.FirstSent = t1
		r.Updated = t1
		return nil
	})
	if err != nil {
		return err
	}
	t2 := t1.Add(time.Duration(rng.IntN(900)+50) * time.Millisecond)
	_, err = s.Update(ctx, scope, key, func(r *journal.Record) error {
		a := &r.Attempts[0]
		a.Wrote, a.Done, a.Duration = true, true, t2.Sub(t1)
		r.Updated = t2
		switch life {
		case 1: // sent, outcome never recorded: stays pending
			a.Done = false
		case 2: // processing
			a.Status = http.StatusAccepted
			r.State = journal.StateProcessing
			r.Result = &journal.Result{StatusCode: 202, Body: []byte(`{"state":"processing"}`)}
			r.NextDue = t2.Add(2 * time.Second)
		case 3, 4: // unknown, the second with a review reason
			a.Err = "read tcp 127.0.0.1:4242: i/o timeout"
			r.Attempts = append(r.Attempts, journal.Attempt{Number: 2, Kind: journal.AttemptQuery, Start: t2, Done: true, Wrote: true, Status: 404, Duration: time.Millisecond})
			r.State = journal.StateUnknown
			r.NextDue = t2.Add(time.Duration(rng.IntN(3600)) * time.Second)
			if life == 4 {
				r.Review = "key expired"
			}
		case 5, 6, 7: // succeeded, the third after a replayed answer
			a.Status = http.StatusCreated
			a.Replayed = life == 7
			r.State = journal.StateSucceeded
			r.Result = &journal.Result{ResourceID: fmt.Sprintf("ord_%d", i), StatusCode: 201, Body: []byte(`{"state":"succeeded"}`), Replayed: life == 7}
			r.Settled = t2
		case 8: // failed, refused
			a.Status = http.StatusUnprocessableEntity
			a.Refused = true
			r.State = journal.StateFailed
			r.Result = &journal.Result{StatusCode: 422, Reason: "key reused with another body"}
			r.Settled = t2
		case 9: // throttled, then unknown for review, then resolved by hand
			a.Status = http.StatusTooManyRequests
			a.Refused = true
			a.RetryAfter = 2 * time.Second
			r.State = journal.StateUnknown
			r.Review = "reconciliation deadline passed"
		}
		return nil
	})
	if err != nil {
		return err
	}
	if life == 9 || life == 6 && i%4 == 0 {
		m := journal.Manual{State: journal.StateSucceeded, ResourceID: fmt.Sprintf("manual_%d", i), Reason: "confirmed with the provider", By: "ops@example.com", At: t2.Add(time.Hour)}
		if i%3 == 0 {
			m.State, m.ResourceID, m.Reason = journal.StateFailed, "", "never reached the provider"
		}
		if _, err := s.Resolve(ctx, scope, key, m); err != nil {
			return err
		}
	}
	return nil
}
