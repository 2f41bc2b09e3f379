package pgjournal_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// This file is a replica's side of TestReplicaCrashHarness: TestReplicaChild
// runs one replica of a service in a process the parent kills, pauses and
// restarts. It talks to the parent by printing lines:
//
//	opened              the journal is open, Run is started
//	ack KEY STATE       Submit returned with KEY journaled
//	refused KEY OP      the store refused a write or renewal of KEY: another replica claimed it (fencing)
//	stale KEY OP        fencing off: a write of KEY the store would have refused, made anyway
//	submitted           every operation of the replica's share is acknowledged
//	settled OPEN REVIEW settle mode: what is left open, and how much of it is flagged for review
//	error ...           something that must not happen; exit 2
//
// A work replica then goes on reconciling (Run) until its stdin closes.

// The children's environment.
const (
	envReplicaMode    = "IDEM_REPLICA_MODE"    // work or settle
	envReplicaSchema  = "IDEM_REPLICA_SCHEMA"  // the shared journal's schema
	envReplicaURL     = "IDEM_REPLICA_URL"     // the fake server's URL
	envReplicaOwner   = "IDEM_REPLICA_OWNER"   // the lease owner: new on every restart
	envReplicaOps     = "IDEM_REPLICA_OPS"     // "lo hi": the share, operations lo..hi-1
	envReplicaFencing = "IDEM_REPLICA_FENCING" // "off" drops the fencing (the harness's self-test)
)

// The replicas' timings: short leases and reconcile intervals, so that a
// dead replica's work is taken over within seconds, not the defaults' 30.
const (
	replicaLease      = time.Second
	replicaAttempt    = 500 * time.Millisecond
	replicaReconcile  = time.Second
	replicaWorkers    = 8
	replicaMaxLife    = 4 * time.Minute
	replicaSettleTime = 90 * time.Second
)

// TestReplicaChild is the body of a child process of
// TestReplicaCrashHarness; in a normal run it does nothing.
func TestReplicaChild(t *testing.T) {
	mode := os.Getenv(envReplicaMode)
	if mode == "" {
		t.Skip("child process of TestReplicaCrashHarness")
	}
	err := replicaMain(mode)
	if err != nil {
		replicaSay("error %v", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// replicaSay prints one line to the parent in a single write, so that lines
// from several goroutines never interleave.
func replicaSay(format string, args ...any) {
	_, _ = os.Stdout.Write(fmt.Appendf(nil, format+"\n", args...))
}

func replicaMain(mode string) error {
	ctx := context.Background()
	var lo, hi int
	if _, err := fmt.Sscanf(os.Getenv(envReplicaOps), "%d %d", &lo, &hi); err != nil {
		return fmt.Errorf("%s: %w", envReplicaOps, err)
	}
	ps, err := pgjournal.Open(ctx, os.Getenv("IDEM_PG_DSN"), pgjournal.WithSchema(os.Getenv(envReplicaSchema)))
	if err != nil {
		return err
	}
	store := &fenceStore{Store: ps, off: os.Getenv(envReplicaFencing) == "off"}
	url := os.Getenv(envReplicaURL)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	// Default settings but for the timings: the retry budget is on.
	c, err := idem.New(store,
		idem.WithHTTPClient(&http.Client{Transport: tr}),
		idem.WithResultEndpoint(url+"/operations/{key}"),
		idem.WithLease(os.Getenv(envReplicaOwner), replicaLease),
		idem.WithAttemptTimeout(replicaAttempt),
		idem.WithMaxElapsed(4*time.Second),
		idem.WithRetryAfterCap(2*time.Second),
		idem.WithReconcile(replicaReconcile, 4*replicaReconcile, time.Hour),
	)
	if err != nil {
		return err
	}
	defer c.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(runCtx) }()
	replicaSay("opened")

	if err := submitShare(ctx, c, url, lo, hi); err != nil {
		return err
	}
	if mode == "settle" {
		return settle(ctx, c)
	}
	replicaSay("submitted")
	// Reconcile until the parent closes stdin (or the life's bound).
	eof := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0)
		close(eof)
	}()
	select {
	case <-eof:
	case err := <-runErr:
		return fmt.Errorf("run: %w", err)
	case <-time.After(replicaMaxLife):
		return errors.New("still running at the end of its life")
	}
	return nil
}

// submitShare submits operations lo..hi-1 from several goroutines, skipping
// those the journal holds as settled: a restarted replica is handed its
// share again, as a rescheduled pod re-reads its queue.
func submitShare(ctx context.Context, c *idem.Client, url string, lo, hi int) error {
	var wg sync.WaitGroup
	errs := make(chan error, replicaWorkers)
	for g := range replicaWorkers {
		wg.Go(func() {
			for i := lo + g; i < hi; i += replicaWorkers {
				if err := submitOne(ctx, c, url, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func submitOne(ctx context.Context, c *idem.Client, url string, i int) error {
	key := replicaKey(i)
	op, err := c.Lookup(ctx, idem.DefaultScope, key)
	switch {
	case err == nil && op.State.Terminal():
		return nil
	case err != nil && !errors.Is(err, idem.ErrNotFound):
		return fmt.Errorf("lookup %s: %w", key, err)
	}
	res, err := c.Submit(ctx, idem.Request{Key: key, URL: url + "/orders", Body: replicaBody(i)})
	var ierr *idem.Error
	switch {
	case res == nil:
		return fmt.Errorf("submit %s: no result: %v", key, err)
	case err != nil && !errors.As(err, &ierr):
		return fmt.Errorf("submit %s: %w", key, err)
	}
	replicaSay("ack %s %s", key, res.State)
	return nil
}

// settle drives what is left open until only operations flagged for review
// remain, within a bounded time: Run (started by the caller) claims them as
// they fall due and their leases expire; Resume is not used, so that leases
// of replicas the parent paused are waited out, not broken.
func settle(ctx context.Context, c *idem.Client) error {
	deadline := time.Now().Add(replicaSettleTime)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		open, err := c.List(ctx, idem.Filter{States: []idem.State{idem.StatePending, idem.StateProcessing, idem.StateUnknown}})
		if err != nil {
			return err
		}
		review := 0
		for _, op := range open {
			if op.Review != "" {
				review++
			}
		}
		if len(open) == review || time.Now().After(deadline) {
			replicaSay("settled %d %d", len(open), review)
			return nil
		}
		<-tick.C
	}
}

func replicaKey(i int) string { return "rop-" + strconv.Itoa(i) }

func replicaBody(i int) []byte {
	return fmt.Appendf(nil, `{"order":"r-%05d","amount":%d}`, i, 100+(i*7919)%90000)
}

// fenceStore is the journal as a replica sees it: it reports every write
// the store refused because another replica claimed the record. With off
// set it drops the fencing, as a journal without it would: a refused write
// is made again without its lease (the store's own unfenced path), and a
// refused renewal or release is taken as granted. The harness must then
// see stale writes.
type fenceStore struct {
	*pgjournal.Store
	off bool
}

func (s *fenceStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	rec, err := s.Store.Update(ctx, scope, key, fn)
	if s.refused(err, key, "update") {
		return s.Store.Update(unleased{ctx}, scope, key, fn)
	}
	return rec, err
}

func (s *fenceStore) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	rec, err := s.Store.Resolve(ctx, scope, key, m)
	if s.refused(err, key, "resolve") {
		return s.Store.Resolve(unleased{ctx}, scope, key, m)
	}
	return rec, err
}

func (s *fenceStore) Renew(ctx context.Context, l journal.Lease, expires time.Time) (journal.Lease, error) {
	got, err := s.Store.Renew(ctx, l, expires)
	if s.refused(err, l.Key, "renew") {
		l.Expires = expires
		return l, nil
	}
	return got, err
}

func (s *fenceStore) Release(ctx context.Context, l journal.Lease) error {
	err := s.Store.Release(ctx, l)
	if s.refused(err, l.Key, "release") {
		return nil
	}
	return err
}

// refused reports a write refused for a lost lease, and whether the write
// is to be made anyway (fencing off).
func (s *fenceStore) refused(err error, key, op string) bool {
	if !errors.Is(err, journal.ErrLeaseLost) {
		return false
	}
	if s.off {
		replicaSay("stale %s %s", key, op)
		return true
	}
	replicaSay("refused %s %s", key, op)
	return false
}

// unleased hides the lease ctx carries, so that the store writes unfenced.
type unleased struct{ context.Context }

func (u unleased) Value(k any) any {
	v := u.Context.Value(k)
	if _, ok := v.(journal.Lease); ok {
		return nil
	}
	return v
}
