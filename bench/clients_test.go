package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	retryablehttp "github.com/hashicorp/go-retryablehttp"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// body is the request every client sends: 1 KiB of JSON.
var body = func() []byte {
	b := []byte(`{"amount":1999,"currency":"EUR","customer":"cus_bench","note":"`)
	for len(b) < 1022 {
		b = append(b, 'a'+byte(len(b)%26))
	}
	return append(b, `"}`...)
}()

// pooledTransport is the transport every client uses: net/http's default
// with a pool sized for 64 concurrent callers (the default keeps 2 idle
// connections per host, which costs a third of the throughput).
func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}

// A client runs one operation: POST body to url, with a fresh idempotency
// key, and returns an error unless the server confirmed it.
type client interface {
	do(ctx context.Context, url string) error
	close()
}

// contender names a way of making a client; dir is a fresh directory for
// its journal.
type contender struct {
	name string
	open func(dir string) (client, error)
}

var (
	bareC     = contender{"net-http", openBare}
	retryC    = contender{"retryablehttp", openRetryable}
	baselineC = contender{"update-post-update", func(dir string) (client, error) { return openBaseline(dir, false) }}
	// baselineNoSyncC is the same with fsync off: the CPU floor of
	// journaling with bbolt, two commits per operation.
	baselineNoSyncC = contender{"update-post-update-nosync", func(dir string) (client, error) { return openBaseline(dir, true) }}
	idemC           = contender{"idem", func(dir string) (client, error) { return openIdem(dir, nil) }}
	idemNoSyncC     = contender{"idem-nosync", func(dir string) (client, error) {
		return openIdem(dir, []journal.Option{journal.WithUnsafeNoSync()})
	}}
)

// bare is a plain net/http POST: the floor.
type bare struct{ hc *http.Client }

func openBare(string) (client, error) {
	return &bare{hc: &http.Client{Transport: pooledTransport()}}, nil
}

func (c *bare) do(ctx context.Context, url string) error {
	return post(ctx, c.hc, url, uuid.NewString())
}

func (c *bare) close() { c.hc.CloseIdleConnections() }

func post(ctx context.Context, hc *http.Client, url, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// retryable is hashicorp/go-retryablehttp with its pool sized like the
// others and its default logger (stderr) turned off.
type retryable struct{ c *retryablehttp.Client }

func openRetryable(string) (client, error) {
	c := retryablehttp.NewClient()
	c.HTTPClient.Transport = pooledTransport()
	c.Logger = nil
	return &retryable{c: c}, nil
}

func (c *retryable) do(ctx context.Context, url string) error {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := c.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func (c *retryable) close() { c.c.HTTPClient.CloseIdleConnections() }

// baseline is the hand-written journaled call idem is measured against:
// one fsync'd bbolt Update that writes the operation (key, URL, body),
// the POST, and one fsync'd Update that writes the result. No commit
// sharing, no attempt records, no indexes.
type baseline struct {
	db *bolt.DB
	hc *http.Client
}

type baseRecord struct {
	Key, URL, State, Result string
	Body                    []byte
	Created, Settled        time.Time
}

var opsBucket = []byte("ops")

func openBaseline(dir string, noSync bool) (client, error) {
	db, err := bolt.Open(filepath.Join(dir, "baseline.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(opsBucket)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &baseline{db: db, hc: &http.Client{Transport: pooledTransport()}}, nil
}

func (c *baseline) put(r *baseRecord) error {
	enc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(opsBucket).Put([]byte(r.Key), enc) })
}

func (c *baseline) do(ctx context.Context, url string) error {
	r := &baseRecord{Key: uuid.NewString(), URL: url, State: "pending", Body: body, Created: time.Now()}
	if err := c.put(r); err != nil {
		return err
	}
	if err := post(ctx, c.hc, url, r.Key); err != nil {
		return err
	}
	r.State, r.Result, r.Settled = "succeeded", "201", time.Now()
	return c.put(r)
}

func (c *baseline) close() {
	c.hc.CloseIdleConnections()
	_ = c.db.Close()
}

// idemClient is idem's Submit with its defaults: its own pooled HTTP
// client, a random key, fsync on unless the options say otherwise.
type idemClient struct {
	c     *idem.Client
	store *journal.Store // the bbolt journal, when the client has one
}

// openIdem opens idem's client over a bbolt journal in dir.
func openIdem(dir string, jopts []journal.Option, opts ...idem.Option) (*idemClient, error) {
	s, err := journal.Open(filepath.Join(dir, "idem.journal"), jopts...)
	if err != nil {
		return nil, err
	}
	c, err := idem.New(s, opts...)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return &idemClient{c: c, store: s}, nil
}

// drain copies the journal's log into its file: work the operations left
// to the background, counted with them (see drainer).
func (c *idemClient) drain() error {
	if c.store == nil {
		return nil
	}
	return checkpoint(c.store)
}

// checkpoint copies s's log into its file, if s has one: through an
// interface, so that these benchmarks also build against releases before
// the log (BENCHMARKS.md runs them on both).
func checkpoint(s *journal.Store) error {
	if cp, ok := any(s).(interface{ Checkpoint(context.Context) error }); ok {
		return cp.Checkpoint(context.Background())
	}
	return nil
}

func (c *idemClient) do(ctx context.Context, url string) error {
	res, err := c.c.Submit(ctx, idem.Request{URL: url, Body: body})
	if err != nil {
		return err
	}
	if res.State != idem.StateSucceeded {
		return fmt.Errorf("state %s", res.State)
	}
	return nil
}

func (c *idemClient) close() {
	_ = c.c.Close()
	if c.store != nil {
		_ = c.store.Close()
	}
}

// dialTo returns a transport that sends every request to addr whatever its
// URL's host, so that a cached journal's URLs reach this run's server.
func dialTo(addr string) *http.Transport {
	t := pooledTransport()
	var d net.Dialer
	t.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return t
}
