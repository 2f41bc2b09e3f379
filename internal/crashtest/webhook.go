package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// WebhookScenario is the fault-matrix row where events settle what the
// client cannot: the API has no result endpoint, responses are lost after
// the commit (and some payments declined), the client gives up after one
// attempt and restarts past the key window, so that Resume may neither
// resend nor ask and flags what is open for review. Then the provider's
// webhook events, duplicated, delayed (out of order) and some lost, are
// confirmed through Client.Confirm.
type WebhookScenario struct {
	Drop, Decline   float64 // submit fault rates
	Lose, Duplicate float64 // event fault rates
	Delay           time.Duration
}

// DefaultWebhookScenario is the row BENCHMARKS.md records.
var DefaultWebhookScenario = WebhookScenario{Drop: 0.5, Decline: 0.1, Lose: 0.1, Duplicate: 0.3, Delay: 5 * time.Millisecond}

// WebhookRow is the outcome of a WebhookScenario.
type WebhookRow struct {
	Ops          int
	HandedOff    int // not settled when Submit returned
	ReviewBefore int // flagged by Resume before the events were confirmed
	Events       int // events made by the server
	Received     int // deliveries received, duplicates included
	Redelivered  int // deliveries of an event already received
	LostEvents   int // events the server never sent (the lose fault)
	Settled      int // operations a confirmation settled
	Agreed       int // events (first deliveries) that agreed with a settled operation
	Conflicts    int // confirmations that contradicted one
	Succeeded    int
	Failed       int
	// ReviewAnswered counts operations left in review although an event
	// about them was received: must be 0.
	ReviewAnswered int
	// ReviewUnanswered counts those left in review whose every event was
	// lost: a person's job, as before.
	ReviewUnanswered int
	Duplicates       int // side effects beyond the first, over every key
	// Lost counts operations missing from the journal, or open with no
	// review reason.
	Lost     int
	Problems []string
	Elapsed  time.Duration
}

// webhookBody is Body(i) with the key in its metadata, where the provider's
// events echo it.
func webhookBody(i int) []byte {
	b := Body(i)
	return fmt.Appendf(b[:len(b)-1:len(b)-1], `,"metadata":{"idem_key":%q}}`, Key(i))
}

// eventKey is the idempotency key in an event's metadata, or "".
func eventKey(ev idemtest.WebhookEvent) string {
	var meta struct {
		Key string `json:"idem_key"`
	}
	_ = json.Unmarshal(ev.Metadata, &meta)
	return meta.Key
}

// eventQueue is the service's webhook endpoint: it queues what it receives.
type eventQueue struct {
	mu     sync.Mutex
	events []idemtest.WebhookEvent
}

func (q *eventQueue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev idemtest.WebhookEvent
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&ev); err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// RunWebhookScenario runs sc with ops operations under dir.
func RunWebhookScenario(ctx context.Context, sc WebhookScenario, ops int, seed int64, dir string) (WebhookRow, error) {
	start := time.Now()
	row := WebhookRow{Ops: ops}
	q := &eventQueue{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return row, err
	}
	hooks := &http.Server{Handler: q, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hooks.Serve(ln) }()
	defer hooks.Close()

	clk := idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clk.Now), idemtest.WithSeed(seed),
		idemtest.WithProfile(profile(map[idemtest.FaultKind]float64{idemtest.DropAfterCommit: sc.Drop, idemtest.Decline: sc.Decline})),
		idemtest.WithWebhook(idemtest.Webhook{URL: "http://" + ln.Addr().String() + "/webhooks", Secret: []byte("whsec_crashtest"),
			Lose: sc.Lose, Duplicate: sc.Duplicate, Delay: sc.Delay}))
	if err != nil {
		return row, err
	}
	defer srv.Close()
	path := filepath.Join(dir, "webhooks.journal")
	opts := []idem.Option{
		idem.WithHTTPClient(srv.Client()),
		idem.WithClock(clk),
		idem.WithAttemptTimeout(matrixAttemptTimeout),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", Credential)
			return nil
		}),
	}
	c, err := idem.Open(path, append(opts[:len(opts):len(opts)], idem.WithMaxAttempts(1))...)
	if err != nil {
		return row, err
	}
	for i := range ops {
		res, err := c.Submit(ctx, idem.Request{Key: Key(i), URL: srv.URL + OrdersPath, Body: webhookBody(i)})
		var ierr *idem.Error
		switch {
		case res == nil || (err != nil && !errors.As(err, &ierr)):
			_ = c.Close()
			return row, fmt.Errorf("webhooks: Submit(%s): %w", Key(i), err)
		case !res.State.Terminal():
			row.HandedOff++
		}
	}
	if err := c.Close(); err != nil {
		return row, err
	}

	// Down for twice the key window: Resume may not resend, cannot ask.
	if err := srv.SetProfile(idemtest.Profile{}); err != nil {
		return row, err
	}
	clk.Advance(2 * idem.DefaultKeyRetention)
	if c, err = idem.Open(path, opts...); err != nil {
		return row, err
	}
	defer c.Close()
	sum, err := c.Resume(ctx)
	if err != nil {
		return row, err
	}
	row.ReviewBefore = sum.Review

	if err := srv.FlushWebhooks(ctx); err != nil {
		return row, err
	}
	q.mu.Lock()
	events := q.events
	q.mu.Unlock()
	if err := row.confirm(ctx, c, events); err != nil {
		return row, err
	}
	st := srv.WebhookStats()
	row.Events, row.LostEvents = st.Events, st.Lost
	if err := c.Close(); err != nil {
		return row, err
	}
	if err := row.check(ctx, path, srv, events); err != nil {
		return row, err
	}
	row.Elapsed = time.Since(start)
	return row, nil
}

// confirm hands every received event to Confirm, as a service's webhook
// worker would.
func (row *WebhookRow) confirm(ctx context.Context, c *idem.Client, events []idemtest.WebhookEvent) error {
	seen := map[string]bool{}
	for _, ev := range events {
		row.Received++
		dup := seen[ev.ID]
		if dup {
			row.Redelivered++
		}
		seen[ev.ID] = true
		key := eventKey(ev)
		if key == "" {
			row.Problems = append(row.Problems, fmt.Sprintf("event %s carries no key in its metadata", ev.ID))
			continue
		}
		conf := idem.Confirmation{ResourceID: ev.ResourceID, Source: "crashtest-webhook", EventID: ev.ID, Reason: ev.Type}
		switch ev.State {
		case "succeeded":
			conf.State = idem.StateSucceeded
		case "failed":
			conf.State = idem.StateFailed
		default:
			continue // processing confirms nothing
		}
		before, err := c.Lookup(ctx, "", key)
		if err != nil {
			return err
		}
		res, err := c.Confirm(ctx, "", key, conf)
		switch {
		case errors.Is(err, idem.ErrConfirmConflict):
			row.Conflicts++
			row.Problems = append(row.Problems, fmt.Sprintf("%s: event %s contradicts the journal", key, ev.ID))
		case err != nil:
			return err
		case !before.State.Terminal() && res.State.Terminal():
			row.Settled++
		case before.State.Terminal() && !dup:
			row.Agreed++
		}
	}
	return nil
}

// check fills in the outcome columns from the journal and the server.
func (row *WebhookRow) check(ctx context.Context, path string, srv *idemtest.Server, events []idemtest.WebhookEvent) error {
	answered := map[string]bool{}
	for _, ev := range events {
		if ev.State != "processing" {
			answered[eventKey(ev)] = true
		}
	}
	store, err := journal.Open(path, journal.ReadOnly())
	if err != nil {
		return err
	}
	defer store.Close()
	problem := func(format string, args ...any) {
		row.Problems = append(row.Problems, fmt.Sprintf(format, args...))
	}
	for i := range row.Ops {
		key := Key(i)
		effects := srv.Effects(Credential, key)
		row.Duplicates += max(0, effects-1)
		rec, err := store.Get(ctx, idem.DefaultScope, key)
		if errors.Is(err, journal.ErrNotFound) {
			row.Lost++
			problem("%s: not in the journal", key)
			continue
		}
		if err != nil {
			return err
		}
		switch {
		case rec.State == journal.StateSucceeded:
			row.Succeeded++
			if effects != 1 {
				problem("%s: succeeded with %d side effects", key, effects)
			}
		case rec.State == journal.StateFailed:
			row.Failed++
			if effects > 0 {
				problem("%s: failed, yet the server performed it", key)
			}
		case rec.Review != "" && answered[key]:
			row.ReviewAnswered++
			problem("%s: in review (%s) although an event answered it", key, rec.Review)
		case rec.Review != "":
			row.ReviewUnanswered++
		default:
			row.Lost++
			problem("%s: left %s with no review reason", key, rec.State)
		}
		if rec.Review != "" && rec.State.Terminal() {
			problem("%s: %s and flagged: %s", key, rec.State, rec.Review)
		}
	}
	if row.Duplicates > 0 {
		problem("%d duplicates", row.Duplicates)
	}
	return nil
}

// WebhookMarkdown renders the row as a Markdown table.
func WebhookMarkdown(r WebhookRow) string {
	var b strings.Builder
	b.WriteString("| ops | handed off | review before events | events | received | redelivered | events lost | settled by event | agreed | conflicts | succeeded | failed | review, answered | review, event lost | duplicates | lost |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n",
		r.Ops, r.HandedOff, r.ReviewBefore, r.Events, r.Received, r.Redelivered, r.LostEvents, r.Settled, r.Agreed, r.Conflicts,
		r.Succeeded, r.Failed, r.ReviewAnswered, r.ReviewUnanswered, r.Duplicates, r.Lost)
	return b.String()
}
