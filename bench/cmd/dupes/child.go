package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/idemkit/idem"
)

// rounds is how often the application itself tries an intent again, within
// one process, when the client returns without a definite answer.
const rounds = 8

// A worker sends one intent and reports whether the answer is definite
// (the order exists, or the server refused it for good).
type worker interface {
	send(ctx context.Context, id string) (definite bool)
}

// A receiver records an intent durably before its receipt is confirmed to
// the source of work.
type receiver interface {
	receive(ctx context.Context, id string) error
}

// out serialises the lines the parent reads.
var out = struct {
	sync.Mutex
	w *bufio.Writer
}{w: bufio.NewWriter(os.Stdout)}

func say(verb, id string) {
	out.Lock()
	defer out.Unlock()
	fmt.Fprintln(out.w, verb, id)
	_ = out.w.Flush()
}

func runChild(kind, server, journalPath string) error {
	ctx := context.Background()
	var w worker
	var after func() error
	switch kind {
	case "naive":
		w = &retrying{c: newRetryable(true), url: server + "/v1/orders"}
	case "memory-key":
		w = &retrying{c: newRetryable(false), url: server + "/v1/orders", keys: map[string]string{}}
	case "idem":
		iw, err := openIdem(ctx, server, journalPath)
		if err != nil {
			return err
		}
		w, after = iw, iw.finish
	default:
		return fmt.Errorf("unknown client %q", kind)
	}

	work := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if id := sc.Text(); id != "" {
				work <- id
			}
		}
		close(work)
	}()
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Go(func() {
			for id := range work {
				// Receipt: the source's hand-off ends here. idem's worker
				// journals the intent first (Prepare); the others have
				// nothing durable to write.
				if r, ok := w.(receiver); ok {
					if err := r.receive(ctx, id); err != nil {
						fmt.Fprintln(os.Stderr, "dupes child: receive:", err)
						continue
					}
				}
				say("start", id)
				definite := false
				for r := range rounds {
					if definite = w.send(ctx, id); definite {
						say("ack", id)
						break
					}
					time.Sleep(time.Duration(r+1) * 50 * time.Millisecond)
				}
				if !definite {
					say("giveup", id)
				}
			}
		})
	}
	wg.Wait()
	if after != nil {
		return after()
	}
	return nil
}

// newRetryable is go-retryablehttp as a naive client configures it to
// retry POSTs: 3 retries on connection errors, timeouts and 5xx, a pool
// sized for the callers, no logging. With freshKey, every HTTP attempt
// carries a new random key.
func newRetryable(freshKey bool) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	var rt http.RoundTripper = t
	if freshKey {
		rt = freshKeys{t}
	}
	c.HTTPClient = &http.Client{Transport: rt, Timeout: attemptTimeout}
	c.RetryMax = 3
	c.RetryWaitMin = 20 * time.Millisecond
	c.RetryWaitMax = 200 * time.Millisecond
	c.Logger = nil
	return c
}

// freshKeys gives every HTTP attempt a key of its own.
type freshKeys struct{ next http.RoundTripper }

func (f freshKeys) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Idempotency-Key", uuid.NewString())
	return f.next.RoundTrip(r)
}

// retrying is the naive client (keys nil) or the memory-key client.
type retrying struct {
	c   *retryablehttp.Client
	url string

	mu   sync.Mutex
	keys map[string]string // intent -> key, for this process's life
}

func (r *retrying) send(ctx context.Context, id string) bool {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, r.url, intentBody(id))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", scope)
	if r.keys != nil {
		r.mu.Lock()
		key, ok := r.keys[id]
		if !ok {
			key = uuid.NewString()
			r.keys[id] = key
		}
		r.mu.Unlock()
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return true
	case s == 408 || s == 409 || s == 425 || s == 429:
		return false
	default:
		return s >= 400 && s < 500 // refused for good
	}
}

// idemWorker keeps no state of its own beyond what it rebuilt from the
// journal: which key each intent (Ref) was journaled under.
type idemWorker struct {
	c  *idem.Client
	mu sync.Mutex
	// keys maps an intent to its journaled key: rebuilt from the journal at
	// start-up, extended before each Submit.
	keys map[string]string
	run  context.CancelFunc
	done chan struct{}
}

func openIdem(ctx context.Context, server, path string) (*idemWorker, error) {
	w := &idemWorker{keys: map[string]string{}, done: make(chan struct{})}
	c, err := idem.Open(path,
		idem.WithResultEndpoint(server+"/operations/{key}"),
		idem.WithRequestHook(func(r *http.Request) error { r.Header.Set("Authorization", scope); return nil }),
		idem.WithAttemptTimeout(attemptTimeout),
		idem.WithMaxElapsed(5*time.Second),
		idem.WithBackoff(func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(20*time.Millisecond),
				backoff.WithMaxInterval(200*time.Millisecond), backoff.WithMaxElapsedTime(0))
		}),
		idem.WithReconcile(200*time.Millisecond, time.Second, 72*time.Hour),
		idem.WithSettleFunc(func(r *idem.Result) { w.settled(r) }),
	)
	if err != nil {
		return nil, err
	}
	w.c = c
	ops, err := c.List(ctx, idem.Filter{})
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		w.keys[op.Ref] = op.Key
	}
	// Settle what the last process left open, before new work; then keep
	// reconciling in the background.
	if _, err := c.Resume(ctx); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	w.run = cancel
	go func() { defer close(w.done); _ = c.Run(rctx) }()
	return w, nil
}

// settled tells the parent about an operation Resume or Run settled.
func (w *idemWorker) settled(r *idem.Result) {
	op, err := w.c.Lookup(context.Background(), r.Scope, r.Key)
	if err == nil && op.Ref != "" {
		say("ack", op.Ref)
	}
}

// receive journals the intent (Prepare) under the key it already has in
// the journal, or a new one.
func (w *idemWorker) receive(ctx context.Context, id string) error {
	w.mu.Lock()
	key, ok := w.keys[id]
	if !ok {
		key = idem.NewKey()
		w.keys[id] = key
	}
	w.mu.Unlock()
	_, err := w.c.Prepare(ctx, idem.Request{Key: key, Ref: id, URL: *serverURL + "/v1/orders", Body: intentBody(id)})
	return err
}

// send drives the journaled operation (Do); an operation already settled
// returns its result without a request.
func (w *idemWorker) send(ctx context.Context, id string) bool {
	w.mu.Lock()
	key := w.keys[id]
	w.mu.Unlock()
	op, err := w.c.Lookup(ctx, idem.DefaultScope, key)
	if err == nil {
		_, err = w.c.Do(ctx, op)
	}
	return err == nil || errors.Is(err, idem.ErrFailed) || errors.Is(err, idem.ErrKeyConflict)
}

// finish waits (up to 30 s) for the reconciler to settle what is still
// open, and tells the parent what it could not.
func (w *idemWorker) finish() error {
	ctx := context.Background()
	openStates := idem.Filter{States: []idem.State{idem.StatePending, idem.StateProcessing, idem.StateUnknown}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ops, err := w.c.List(ctx, openStates)
		if err != nil {
			return err
		}
		if len(ops) == 0 || time.Now().After(deadline) {
			for _, op := range ops {
				say("open", op.Ref)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.run()
	<-w.done
	return w.c.Close()
}
